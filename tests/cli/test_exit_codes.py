"""Every command follows the README's exit-code rule, one case per row.

0 on success, 1 on a runtime error (a store, conversation or file content
that is not as expected, a server that fails), 2 on a usage error: a bad
argument, URL or option value, a file argument that cannot be read or
written, an unknown URL scheme, a missing adapter, driver or package the
command needs. Each error is one line on stderr that says what is wrong,
and comes before anything is printed on stdout.
"""

from __future__ import annotations

import importlib.util
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.cli.conftest import HAVE_SQL, NO_SQL, Cli, Run
from tests.cli.test_cli import _jsonl, _one_line_error, _sample
from tests.cli.test_errors import _without_modules

HAVE_CASSANDRA = importlib.util.find_spec("chatledger_cassandra") is not None

#: The files each case finds in its folder: a store holding the sample
#: conversations, a good export of them and a bad one.
STORE = "sqlite:///store.db"
GOOD, BAD = "good.jsonl", "bad.jsonl"


@dataclass(frozen=True)
class Case:
    """A command line, the exit code the rule gives it and a piece of its error."""

    args: tuple[str, ...]
    code: int
    says: str
    #: Modules the command's process cannot import.
    without: tuple[str, ...] = ()


CASES = {
    # The command line itself.
    "no command": Case((), 2, "required: COMMAND"),
    "unknown command": Case(("frobnicate",), 2, "invalid choice: 'frobnicate'"),
    # demo
    "demo: window below 1": Case(("demo", "--max-messages", "0"), 2, "at least 1"),
    "demo: bad id": Case(
        ("demo", "--url", "sqlite:///demo.db", "--conversation", " "),
        2,
        "leading or trailing whitespace",
    ),
    "demo: unknown scheme": Case(
        ("demo", "--url", "nosuch://x"), 2, "unknown URL scheme"
    ),
    "demo: missing folder": Case(
        ("demo", "--url", "sqlite:///no/such/demo.db"), 1, "does not exist"
    ),
    # ls
    "ls: bad table name": Case(
        ("ls", STORE, "-o", "table_name=bad-name"), 2, "'bad-name' is not allowed"
    ),
    "ls: bad ttl": Case(("ls", STORE, "-o", "ttl=-5"), 2, "ttl must be positive"),
    "ls: unknown option": Case(
        ("ls", STORE, "-o", "bogus=1"), 2, "takes no option 'bogus'"
    ),
    "ls: unknown dialect": Case(("ls", STORE, "-o", "dialect=nosuch"), 2, "'nosuch'"),
    "ls: engine options not a dict": Case(
        ("ls", STORE, "-o", "engine_options=5"), 2, "engine_options must be a dict"
    ),
    "ls: host for a file": Case(("ls", "sqlite://store.db"), 2, "names a host"),
    "ls: missing store": Case(("ls", "sqlite:///absent.db"), 1, "does not exist"),
    # show
    "show: bad id": Case(("show", STORE, " "), 2, "leading or trailing whitespace"),
    "show: unknown conversation": Case(
        ("show", STORE, "nobody"), 1, "no conversation 'nobody'"
    ),
    # export
    "export: unknown format": Case(
        ("export", STORE, "--format", "xml"), 2, "invalid choice: 'xml'"
    ),
    "export: output in a missing folder": Case(
        ("export", STORE, "--output", "no/such/out.jsonl"),
        2,
        "--output 'no/such/out.jsonl': the folder 'no/such' does not exist",
    ),
    "export: unknown conversation": Case(
        ("export", STORE, "nobody"), 1, "no conversation 'nobody'"
    ),
    # import
    "import: missing file": Case(
        ("import", "sqlite:///new.db", "absent.jsonl"),
        2,
        "cannot read 'absent.jsonl': no such file or directory",
    ),
    "import: a folder for a file": Case(
        ("import", "sqlite:///new.db", "."), 2, "cannot read '.': is a directory"
    ),
    "import: into this process only": Case(
        ("import", "memory://", GOOD), 2, "keeps data in this process only"
    ),
    "import: bad line": Case(
        ("import", "sqlite:///new.db", BAD), 1, f"{BAD}:1: not JSON"
    ),
    # copy
    "copy: into this process only": Case(
        ("copy", STORE, "memory://"), 2, "keeps data in this process only"
    ),
    "copy: missing source": Case(
        ("copy", "sqlite:///absent.db", "sqlite:///new.db"), 1, "does not exist"
    ),
    # rm
    "rm: bad id": Case(("rm", STORE, " "), 2, "leading or trailing whitespace"),
    "rm: unknown conversation": Case(
        ("rm", STORE, "nobody"), 1, "no conversation 'nobody'"
    ),
    # conformance
    "conformance: without pytest": Case(
        ("conformance", STORE),
        2,
        "needs pytest: pip install 'chatledger[testing]'",
        without=("pytest",),
    ),
    "conformance: a store with data": Case(
        ("conformance", STORE), 2, "needs an empty store"
    ),
    "conformance: missing folder": Case(
        ("conformance", "sqlite:///no/such/c.db"), 1, "does not exist"
    ),
    # bench
    "bench: bad windows": Case(("bench", STORE, "--windows", "0"), 2, "window"),
    "bench: a store with data": Case(("bench", STORE), 2, "needs an empty store"),
    "bench: missing folder": Case(
        ("bench", "sqlite:///no/such/b.db"), 1, "does not exist"
    ),
}

if HAVE_CASSANDRA:
    CASES["ls: bad cassandra URL"] = Case(
        ("ls", "cassandra://127.0.0.1/chat#x"), 2, "a URL fragment is not allowed"
    )


@pytest.fixture
def folder(cli: Cli, tmp_path: Path) -> Path:
    """The command's folder: a store with the sample, a good and a bad export."""
    (tmp_path / GOOD).write_text(_jsonl(_sample()), encoding="utf-8")
    (tmp_path / BAD).write_text("{not json}\n", encoding="utf-8")
    assert cli("import", STORE, GOOD).code == 0
    return tmp_path


@pytest.mark.skipif(not HAVE_SQL, reason=NO_SQL)
@pytest.mark.parametrize("case", CASES.values(), ids=CASES.keys())
def test_exit_code(cli: Cli, folder: Path, case: Case) -> None:
    done: Run
    if case.without:
        done = _without_modules(list(case.without), *case.args, cwd=folder)
    else:
        done = cli(*case.args)
    assert done.code == case.code, done.err
    assert done.out == "", "an error is found before anything is printed"
    line = _one_line_error(done.err)
    assert case.says in line
    assert "[Errno" not in line
