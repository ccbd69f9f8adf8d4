"""connect(): scheme lookup through entry points, its errors, and URL redaction."""

from __future__ import annotations

import importlib
import textwrap
from pathlib import Path

import pytest

from chatledger import (
    ChatLedgerError,
    InMemoryChatMemoryRepository,
    UnknownBackendError,
    connect,
    redact_url,
)
from chatledger.connect import (
    adapter_parameters,
    install_hint,
    installed_schemes,
    redact_text,
    url_scheme,
)

SECRET = "s3cr3t-pa55"


@pytest.mark.parametrize(
    ("url", "shown"),
    [
        ("memory://", "memory://"),
        ("sqlite:///relative.db", "sqlite:///relative.db"),
        ("sqlite:////abs/path@odd.db", "sqlite:////abs/path@odd.db"),
        (
            f"postgresql+psycopg://app:{SECRET}@db:5432/chat",
            "postgresql+psycopg://app:***@db:5432/chat",
        ),
        ("postgresql+psycopg://postgres@127.0.0.1:5432/test", None),
        (f"redis://:{SECRET}@cache:6379/0", "redis://:***@cache:6379/0"),
        (
            f"rediss://default:{SECRET}@cache/0?ssl_cert_reqs=none",
            "rediss://default:***@cache/0?ssl_cert_reqs=none",
        ),
        (
            f"mongodb+srv://u:{SECRET}@a.example,b.example/db?authSource=admin",
            "mongodb+srv://u:***@a.example,b.example/db?authSource=admin",
        ),
        (f"neo4j+s://neo4j:{SECRET}@graph:7687", "neo4j+s://neo4j:***@graph:7687"),
        # Unencoded "/" and "@" in a password still stay hidden.
        ("mysql://root:pa/ss@word@h/db", "mysql://root:***@h/db"),
        (
            f"mssql+pyodbc://sa@h/db?driver=ODBC+18&password={SECRET}&Token={SECRET}",
            "mssql+pyodbc://sa@h/db?driver=ODBC+18&password=***&Token=***",
        ),
        (
            f"cassandra://h1,h2:9042/ks?api_key={SECRET}",
            "cassandra://h1,h2:9042/ks?api_key=***",
        ),
        (f"app:{SECRET}@host/db", "app:***@host/db"),
        ("not a url", "not a url"),
    ],
)
def test_redact_url(url: str, shown: str | None) -> None:
    assert redact_url(url) == (url if shown is None else shown)
    assert SECRET not in redact_url(url)


def test_redact_text_finds_urls_in_a_message() -> None:
    text = f"could not reach postgresql://app:{SECRET}@db/chat: refused; also redis://:{SECRET}@r"
    redacted = redact_text(text)
    assert SECRET not in redacted
    assert "postgresql://app:***@db/chat:" in redacted


def test_memory_url_gives_a_new_empty_repository() -> None:
    first = connect("memory://")
    assert isinstance(first, InMemoryChatMemoryRepository)
    assert first.find_conversation_ids() == []
    second = connect("MEMORY://")
    assert second is not first
    with pytest.raises(TypeError, match="only the retention option"):
        connect("memory://", table_name="x")
    assert "memory" in installed_schemes()


@pytest.mark.parametrize("url", ["", "chat.db", "memory:", "/tmp/x.db", "://x"])
def test_a_string_without_scheme_is_rejected(url: str) -> None:
    with pytest.raises(UnknownBackendError, match="not a URL"):
        connect(url)


def test_url_must_be_a_str() -> None:
    with pytest.raises(TypeError):
        url_scheme(b"memory://")  # type: ignore[arg-type]


def test_unknown_scheme_is_one_error_listing_the_backends() -> None:
    with pytest.raises(UnknownBackendError) as caught:
        connect(f"nosuchdb://admin:{SECRET}@host/x")
    message = str(caught.value)
    assert isinstance(caught.value, ChatLedgerError)
    assert isinstance(caught.value, LookupError)
    assert "unknown URL scheme 'nosuchdb' (nosuchdb://admin:***@host/x)" in message
    assert "pip install chatledger-sql" in message
    assert "pip install chatledger-redis" in message
    assert SECRET not in message


_HINTS = {
    "sqlite:///x.db": "pip install chatledger-sql",
    "duckdb:///x.duckdb": "pip install 'chatledger-sql[duckdb]'",
    "postgresql+psycopg://u@h/db": "pip install 'chatledger-sql[postgres]'",
    "mysql+pymysql://root@h/db": "pip install 'chatledger-sql[mysql]'",
    "mariadb+mariadbconnector://u@h/db": "pip install chatledger-sql mariadb",
    # SQLAlchemy drivers no extra installs: the driver's own distribution.
    "mysql+mysqldb://root@h/db": "pip install chatledger-sql mysqlclient",
    "mysql+mysqlconnector://u@h/db": (
        "pip install chatledger-sql mysql-connector-python"
    ),
    "postgresql+psycopg2://u@h/db": "pip install chatledger-sql psycopg2-binary",
    "postgresql+pg8000://u@h/db": "pip install chatledger-sql pg8000",
    "mssql+pymssql://sa@h/db": "pip install chatledger-sql pymssql",
    "mssql+pyodbc://sa@h/db": "pip install 'chatledger-sql[mssql]'",
    "oracle+oracledb://u@h/db": "pip install 'chatledger-sql[oracle]'",
    "redis://h:6379/0": "pip install chatledger-redis",
    "rediss://h:6379/0": "pip install chatledger-redis",
    "mongodb://h/db": "pip install chatledger-mongodb",
    "mongodb+srv://h/db": "pip install chatledger-mongodb",
    "cassandra://h1,h2:9042/ks": "pip install chatledger-cassandra",
    "neo4j://h": "pip install chatledger-neo4j",
    "neo4j+s://h": "pip install chatledger-neo4j",
    "bolt://h": "pip install chatledger-neo4j",
}


@pytest.fixture
def only_memory(monkeypatch: pytest.MonkeyPatch) -> None:
    """Hide every installed adapter, as on a machine with the core alone."""
    module = importlib.import_module("chatledger.backends")
    everything = module.entry_points
    monkeypatch.setattr(
        module,
        "entry_points",
        lambda group: [e for e in everything(group=group) if e.name == "memory"],
    )


@pytest.mark.usefixtures("only_memory")
@pytest.mark.parametrize(("url", "hint"), list(_HINTS.items()))
def test_missing_adapter_names_its_pip_install_line(url: str, hint: str) -> None:
    scheme = url_scheme(url)
    assert install_hint(scheme) == hint
    assert installed_schemes() == ["memory"]
    rest = url.partition("://")[2].rpartition("@")[2]
    secret_url = f"{scheme}://user:{SECRET}@{rest}"
    with pytest.raises(UnknownBackendError) as caught:
        connect(secret_url)
    assert str(caught.value) == (
        f"no installed chatledger adapter handles {scheme}:// URLs "
        f"({scheme}://user:***@{rest}); install it with: {hint}"
    )


@pytest.fixture
def plugins(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Register a few test adapters the way an installed distribution does."""
    (tmp_path / "cl_plugin.py").write_text(
        textwrap.dedent(
            """
            class Exact:
                @classmethod
                def from_url(cls, url, **options):
                    return ("exact", url, options)

            def family(url, **options):
                return ("family", url, options)

            NOT_CALLABLE = 42
            """
        ),
        encoding="utf-8",
    )
    info = tmp_path / "cl_plugin-0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(
        "Metadata-Version: 2.1\nName: cl-plugin\nVersion: 0\n", encoding="utf-8"
    )
    (info / "entry_points.txt").write_text(
        "[chatledger.repositories]\n"
        "clfam = cl_plugin:family\n"
        "clfam+special = cl_plugin:Exact.from_url\n"
        "clbroken = cl_plugin_missing:Nothing.from_url\n"
        "clvalue = cl_plugin:NOT_CALLABLE\n",
        encoding="utf-8",
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    return tmp_path


def test_exact_scheme_wins_then_the_part_before_plus(plugins: Path) -> None:
    exact = connect("clfam+special://h/x", table="t")
    assert exact == ("exact", "clfam+special://h/x", {"table": "t"})  # type: ignore[comparison-overlap]
    family = connect("clfam+other://h/x")
    assert family == ("family", "clfam+other://h/x", {})  # type: ignore[comparison-overlap]
    assert connect("CLFAM://h") == ("family", "CLFAM://h", {})  # type: ignore[comparison-overlap]
    assert {"clfam", "clfam+special"} <= set(installed_schemes())


def test_adapter_that_cannot_be_imported_is_one_clear_error(plugins: Path) -> None:
    with pytest.raises(UnknownBackendError, match="installed but cannot be imported"):
        connect(f"clbroken://u:{SECRET}@h")
    with pytest.raises(UnknownBackendError, match="not callable"):
        connect("clvalue://h")


@pytest.mark.parametrize(
    ("url", "module", "flag"),
    [
        ("sqlite:///chat.db", "chatledger_sql", "create_schema"),
        ("postgres://app@db/chat", "chatledger_sql", "create_schema"),
        ("mongodb://db/chat", "chatledger_mongodb", "create_indexes"),
        ("cassandra://db/chat", "chatledger_cassandra", "create_schema"),
        ("neo4j://db", "chatledger_neo4j", "create_schema"),
    ],
)
def test_adapter_parameters_name_the_flag_that_creates_storage(
    url: str, module: str, flag: str
) -> None:
    """What the command turns off so that reading creates nothing."""
    pytest.importorskip(module)
    assert flag in adapter_parameters(url)


def test_adapter_parameters_of_the_in_memory_adapter() -> None:
    assert adapter_parameters("memory://") == frozenset({"retention"})
    with pytest.raises(UnknownBackendError):
        adapter_parameters("nosuchdb://x")
