"""The dialect registry: which :class:`SqlDialect` serves which database product.

Example:
    from sqlalchemy import create_engine
    from chatledger_sql.dialects import detect_dialect, register_dialect

    register_dialect("cockroachdb", "my_package.dialects:CockroachDialect")
    dialect = detect_dialect(create_engine("sqlite://"))   # SQLiteDialect()

Keys are the product names SQLAlchemy gives (``engine.dialect.name``), plus
``"mariadb"`` for a MariaDB server behind a ``mysql://`` URL. Values stay
``"module:Class"`` strings until first use, so no dialect module, and no
driver, is imported before an engine is made. Lookup order: dialects
registered in code, then the built-ins, then the entry-point group
``chatledger.sql_dialects``, so an installed package cannot take over a
built-in name. A product with no dialect falls back to
:class:`PostgresDialect` with an :class:`UnknownDialectWarning`.
"""

from __future__ import annotations

import importlib
import threading
import warnings
from importlib.metadata import entry_points
from typing import TYPE_CHECKING, Any

from chatledger.adapters import (
    InvalidNameError,
)
from chatledger_sql.dialects.base import SqlDialect

if TYPE_CHECKING:
    from sqlalchemy import Engine

    from chatledger_sql.dialects.duckdb import DuckDBDialect
    from chatledger_sql.dialects.mssql import SQLServerDialect
    from chatledger_sql.dialects.mysql import MariaDBDialect, MySQLDialect
    from chatledger_sql.dialects.oracle import OracleDialect
    from chatledger_sql.dialects.postgresql import PostgresDialect
    from chatledger_sql.dialects.sqlite import SQLiteDialect

__all__ = [
    "ENTRY_POINT_GROUP",
    "DialectMismatchWarning",
    "DuckDBDialect",
    "MariaDBDialect",
    "MySQLDialect",
    "OracleDialect",
    "PostgresDialect",
    "SQLServerDialect",
    "SQLiteDialect",
    "SqlDialect",
    "UnknownDialectError",
    "UnknownDialectWarning",
    "detect_dialect",
    "known_products",
    "load_dialect",
    "product_name",
    "register_dialect",
    "resolve_dialect",
    "unregister_dialect",
]

#: The entry-point group third-party packages register dialects in.
ENTRY_POINT_GROUP = "chatledger.sql_dialects"

#: The product every unknown one falls back to.
FALLBACK_PRODUCT = "postgresql"

_BUILTIN: dict[str, str] = {
    "postgresql": "chatledger_sql.dialects.postgresql:PostgresDialect",
    "mysql": "chatledger_sql.dialects.mysql:MySQLDialect",
    "mariadb": "chatledger_sql.dialects.mysql:MariaDBDialect",
    "mssql": "chatledger_sql.dialects.mssql:SQLServerDialect",
    "oracle": "chatledger_sql.dialects.oracle:OracleDialect",
    "sqlite": "chatledger_sql.dialects.sqlite:SQLiteDialect",
    "duckdb": "chatledger_sql.dialects.duckdb:DuckDBDialect",
}
_CLASS_MODULES = {value.rpartition(":")[2]: value for value in _BUILTIN.values()}

DialectSpec = SqlDialect | type[SqlDialect] | str
_registered: dict[str, DialectSpec] = {}
_lock = threading.Lock()


class UnknownDialectWarning(UserWarning):
    """The database product has no registered dialect; PostgreSQL's is used."""


class DialectMismatchWarning(UserWarning):
    """An explicit dialect was given for a different database product."""


class UnknownDialectError(InvalidNameError, LookupError):
    """A dialect was asked for by a name no registry knows.

    An :class:`~chatledger.errors.InvalidNameError` (a ``ValueError``): the
    ``dialect`` option names nothing usable, as a bad table name would.
    """


def register_dialect(product_name: str, dialect: DialectSpec) -> None:
    """Use ``dialect`` for databases whose product name is ``product_name``.

    Args:
        product_name: The name SQLAlchemy gives the product
            (``engine.dialect.name``), e.g. ``"cockroachdb"``.
        dialect: A :class:`SqlDialect` subclass, an instance, or a
            ``"module:Class"`` string imported on first use.
    """
    if not isinstance(product_name, str) or not product_name:
        raise TypeError("product_name must be a non-empty str")
    valid = isinstance(dialect, SqlDialect | str) or (
        isinstance(dialect, type) and issubclass(dialect, SqlDialect)
    )
    if not valid:
        raise TypeError(
            "dialect must be a SqlDialect subclass, an instance or a "
            f"'module:Class' string, not {dialect!r}"
        )
    with _lock:
        _registered[product_name.lower()] = dialect


def unregister_dialect(product_name: str) -> None:
    """Forget a dialect registered with :func:`register_dialect`."""
    with _lock:
        _registered.pop(product_name.lower(), None)


def _entry_point(product_name: str) -> str | None:
    for point in entry_points(group=ENTRY_POINT_GROUP):
        if point.name.lower() == product_name:
            return str(point.value)
    return None


def known_products() -> list[str]:
    """Every product name a dialect is registered for."""
    names = set(_registered) | set(_BUILTIN)
    names |= {point.name.lower() for point in entry_points(group=ENTRY_POINT_GROUP)}
    return sorted(names)


def _instantiate(spec: DialectSpec) -> SqlDialect:
    if isinstance(spec, SqlDialect):
        return spec
    if isinstance(spec, str):
        module_name, _, attribute = spec.partition(":")
        target: Any = importlib.import_module(module_name)
        for part in attribute.split("."):
            target = getattr(target, part)
        spec = target
    if not (isinstance(spec, type) and issubclass(spec, SqlDialect)):
        raise TypeError(f"{spec!r} is not a SqlDialect subclass")
    return spec()


def _lookup(product_name: str) -> DialectSpec | None:
    key = product_name.lower()
    with _lock:
        spec = _registered.get(key)
    if spec is None:
        spec = _BUILTIN.get(key) or _entry_point(key)
    return spec


def load_dialect(product_name: str) -> SqlDialect:
    """Return a new dialect for ``product_name``.

    Raises:
        UnknownDialectError: no dialect is registered for it.
    """
    spec = _lookup(product_name)
    if spec is None:
        raise UnknownDialectError(
            f"no SQL dialect for {product_name!r}; known: "
            f"{', '.join(known_products())}. Register one with "
            "chatledger_sql.register_dialect() or the entry-point group "
            f"{ENTRY_POINT_GROUP!r}"
        )
    return _instantiate(spec)


def product_name(engine: Engine) -> str:
    """The product behind ``engine``: ``engine.dialect.name``, MariaDB told apart.

    MariaDB reached through a ``mysql://`` URL is only known after SQLAlchemy's
    first connect, so an engine that has not connected yet connects once.
    """
    name = str(engine.dialect.name).lower()
    if name == "mysql":
        if getattr(engine.dialect, "server_version_info", None) is None:
            with engine.connect():
                pass
        if getattr(engine.dialect, "is_mariadb", False):
            name = "mariadb"
    return name


def detect_dialect(engine: Engine) -> SqlDialect:
    """Return the dialect for the product behind ``engine``.

    An unknown product gets :class:`PostgresDialect` and an
    :class:`UnknownDialectWarning` that names it and says how to register one.
    """
    product = product_name(engine)
    spec = _lookup(product)
    if spec is not None:
        return _instantiate(spec)
    warnings.warn(
        f"chatledger-sql has no dialect for the database product {product!r}; "
        "falling back to PostgresDialect. If the database is not PostgreSQL-"
        "compatible, register a dialect: chatledger_sql.register_dialect("
        f"{product!r}, MyDialect), or an entry point named {product!r} in the "
        f"group {ENTRY_POINT_GROUP!r}, or pass dialect=... to the repository.",
        UnknownDialectWarning,
        stacklevel=2,
    )
    return load_dialect(FALLBACK_PRODUCT)


def resolve_dialect(engine: Engine, explicit: DialectSpec | None) -> SqlDialect:
    """The dialect a repository uses: ``explicit`` if given, else the detected one.

    An explicit dialect made for another product than the one detected is
    still used, with a :class:`DialectMismatchWarning`.
    """
    if explicit is None:
        return detect_dialect(engine)
    chosen = (
        load_dialect(explicit) if isinstance(explicit, str) else _instantiate(explicit)
    )
    product = product_name(engine)
    if _lookup(product) is not None and chosen.name != product:
        warnings.warn(
            f"the explicit dialect {chosen!r} (for {chosen.name!r}) is used, but the "
            f"engine's database product is {product!r}",
            DialectMismatchWarning,
            stacklevel=2,
        )
    return chosen


def __getattr__(name: str) -> Any:
    # Built-in dialect classes import lazily: `from chatledger_sql.dialects
    # import OracleDialect` loads only the Oracle module.
    spec = _CLASS_MODULES.get(name)
    if spec is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    module_name, _, attribute = spec.partition(":")
    return getattr(importlib.import_module(module_name), attribute)
