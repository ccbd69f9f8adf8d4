"""``chatledger migrate URL``: a store brought to this release's schema, explicitly.

Here on stores this release made and then stripped of what release 0.2
lacked; ``tests/upgrade`` runs the command on stores 0.2 itself wrote, on
every backend, two processes at once.
"""

from __future__ import annotations

import importlib.util
import uuid
from pathlib import Path

import pytest

from tests.backends import backend_url
from tests.cli.conftest import HAVE_SQL, NO_SQL, Cli
from tests.cli.test_cli import _one_line_error

#: A port nothing listens on: a command that connected would fail there.
NOBODY = "127.0.0.1:9"
PASSWORD = "pw-not-to-show"

needs_sql = pytest.mark.skipif(not HAVE_SQL, reason=NO_SQL)


def _store_of_release_0_2(path: Path) -> str:
    """A SQLite store whose conversations table lacks the log's columns."""
    from sqlalchemy import text

    from chatledger import Message
    from chatledger_sql import SqlChatMemoryRepository
    from chatledger_sql.schema import LOG_COLUMNS

    url = f"sqlite:///{path}"
    with SqlChatMemoryRepository.from_url(url) as repository:
        repository.save_all("c1", [Message.user("kept")])
        with repository.engine.begin() as connection:
            for column in LOG_COLUMNS:
                connection.execute(
                    text(f"ALTER TABLE chat_memory_conversation DROP COLUMN {column}")
                )
    return url


@needs_sql
def test_the_changes_are_printed_then_the_store_is_current(
    cli: Cli, tmp_path: Path
) -> None:
    url = _store_of_release_0_2(tmp_path / "chat.db")
    first = cli("migrate", url)
    assert first.code == 0, first.err
    assert first.out.splitlines() == [
        "added column system_batch to table chat_memory_conversation",
        "added column system_last to table chat_memory_conversation",
        "added column system_as_of to table chat_memory_conversation",
        f"{url}: upgraded (3 changes)",
    ]
    again = cli("migrate", url)
    assert (again.code, again.out) == (0, f"{url}: already current\n"), again.err
    shown = cli("show", url, "c1")
    assert shown.code == 0, shown.err
    assert "kept" in shown.out


@needs_sql
def test_a_missing_store_is_an_error_and_is_not_created(
    cli: Cli, tmp_path: Path
) -> None:
    missing = cli("migrate", f"sqlite:///{tmp_path / 'absent.db'}")
    assert missing.code == 1
    assert "does not exist" in _one_line_error(missing.err)
    assert not (tmp_path / "absent.db").exists()
    url = _store_of_release_0_2(tmp_path / "chat.db")
    other = cli("migrate", url, "-o", "table_name=mistyped")
    assert other.code == 1
    assert "table 'mistyped' does not exist" in _one_line_error(other.err)
    assert other.out == ""


def _installed(module: str) -> None:
    if importlib.util.find_spec(module) is None:
        pytest.skip(f"{module} is not installed (pip install -e ./packages/...)")


@pytest.mark.parametrize(
    ("args", "says", "module"),
    [
        (("migrate",), "the following arguments are required: url", "chatledger"),
        (("migrate", "nosuch://x"), "unknown URL scheme", "chatledger"),
        (
            (
                "migrate",
                f"postgresql+psycopg://app:{PASSWORD}@{NOBODY}/chat",
                "-o",
                "table_name=bad-name",
            ),
            "'bad-name' is not allowed",
            "chatledger_sql",
        ),
        (
            ("migrate", f"redis://:{PASSWORD}@{NOBODY}/0", "-o", "key_prefix=a{b"),
            "key prefix 'a{b' is not allowed",
            "chatledger_redis",
        ),
        (
            ("migrate", "sqlite:///chat.db", "-o", "bogus=1"),
            "takes no option 'bogus'",
            "chatledger_sql",
        ),
    ],
    ids=["no url", "unknown scheme", "bad table name", "bad key prefix", "bad option"],
)
def test_usage_errors_exit_2_before_any_io(
    cli: Cli, tmp_path: Path, args: tuple[str, ...], says: str, module: str
) -> None:
    _installed(module)
    done = cli(*args)
    assert done.code == 2
    assert done.out == ""
    assert says in _one_line_error(done.err)
    assert PASSWORD not in done.err
    assert list(tmp_path.iterdir()) == [], "nothing was created"


@pytest.mark.parametrize(
    ("url", "module"),
    [
        (f"redis://:{PASSWORD}@{NOBODY}/0", "chatledger_redis"),
        (f"mongodb://app:{PASSWORD}@{NOBODY}/chat", "chatledger_mongodb"),
        ("memory://", "chatledger"),
    ],
    ids=["redis", "mongodb", "memory"],
)
def test_a_backend_without_a_schema_says_so_and_exits_0(
    cli: Cli, url: str, module: str
) -> None:
    """Redis, MongoDB and memory keep no schema: nothing to connect to or change."""
    _installed(module)
    done = cli("migrate", url)
    assert done.code == 0, done.err
    assert done.out.startswith(url.replace(PASSWORD, "***") + ": already current: ")
    assert "this backend keeps no schema to upgrade" in done.out
    assert PASSWORD not in done.out + done.err


@needs_sql
def test_a_failure_on_a_server_shows_no_password(cli: Cli) -> None:
    """The error names the store with its password hidden. The local server
    may trust any password, so the failure here is a table that is missing."""
    from sqlalchemy.engine import make_url

    given = make_url(backend_url("postgresql")).set(password=PASSWORD)
    url = given.render_as_string(hide_password=False)
    table = f"absent_{uuid.uuid4().hex[:12]}"
    done = cli("migrate", url, "-o", f"table_name={table}")
    assert done.code == 1
    line = _one_line_error(done.err)
    assert f"table {table!r} does not exist" in line
    assert PASSWORD not in done.out + done.err
