"""The command shows no password of a URL it was given, however the URL spells it.

Each URL writes the password ``Pw7<c>Zq9``, ``c`` a character that means
something in a URL, raw or percent-encoded: neither it, nor its decoded
form, nor either half may appear in the output, the ``--debug`` traceback or
the progress lines, and the host must (the message says where it went).
Stores at 127.0.0.1:5499, where nothing listens, make the command fail after
it has tried to connect (Neo4j's driver retries for half a minute there:
tests/unit covers its URLs); the copy runs against the PostgreSQL test server.
"""

from __future__ import annotations

import importlib.util
import uuid
from collections.abc import Iterator
from urllib.parse import quote, unquote, unquote_plus

import pytest

from chatledger import connect
from tests.backends import backend_url
from tests.cli.conftest import HAVE_SQL, NO_SQL, Cli, file_url
from tests.cli.test_cli import _jsonl, _sample

SPECIAL = ["?", "#", "/", "@", ":", "%", "[", "]", "&", "=", "+", ";", " "]
#: The characters that cut a password short for some driver, and all at once.
CUTTING = ["?", "#", "/", "@", "".join(SPECIAL)]
HALVES = ("Pw7", "Zq9")
HOST = "127.0.0.1"


def _installed(module: str) -> bool:
    return importlib.util.find_spec(module) is not None


def _passwords(characters: list[str]) -> Iterator[str]:
    """Each ``Pw7<c>Zq9`` as written in a URL: raw, then percent-encoded."""
    for character in characters:
        password = f"{HALVES[0]}{character}{HALVES[1]}"
        yield password
        yield quote(password, safe="")


def _assert_hidden(text: str, written: str) -> None:
    for form in {written, unquote(written), unquote_plus(written), *HALVES}:
        assert form not in text, f"{form!r} shown in {text!r}"


#: scheme, what follows the user information, the characters tried, the
#: -o options that make the attempt fail fast.
STORES = [
    pytest.param(
        "postgresql+psycopg",
        f"{HOST}:5499/test",
        SPECIAL,
        [],
        marks=pytest.mark.skipif(not HAVE_SQL, reason=NO_SQL),
    ),
    pytest.param(
        "sqlite",
        f"{HOST}/chat.db",
        CUTTING,
        [],
        marks=pytest.mark.skipif(not HAVE_SQL, reason=NO_SQL),
    ),
    pytest.param(
        "redis",
        f"{HOST}:5499/0",
        SPECIAL,
        [],
        marks=pytest.mark.skipif(
            not _installed("chatledger_redis"), reason="needs chatledger-redis"
        ),
    ),
    pytest.param(
        "mongodb",
        f"{HOST}:5499/chat",
        CUTTING,
        ["-o", "serverSelectionTimeoutMS=50"],
        marks=pytest.mark.skipif(
            not _installed("chatledger_mongodb"), reason="needs chatledger-mongodb"
        ),
    ),
    pytest.param(
        "cassandra",
        f"{HOST}:5499/chat",
        CUTTING,
        [],
        marks=pytest.mark.skipif(
            not _installed("chatledger_cassandra"),
            reason="needs chatledger-cassandra",
        ),
    ),
    pytest.param("nosuchdb", f"{HOST}:5499/x", CUTTING, []),
]


@pytest.mark.parametrize(("scheme", "after", "characters", "options"), STORES)
def test_a_failed_command_shows_no_password(
    cli: Cli, scheme: str, after: str, characters: list[str], options: list[str]
) -> None:
    for password in _passwords(characters):
        url = f"{scheme}://app:{password}@{after}"
        done = cli("--debug", "ls", url, *options)
        assert done.code != 0, url
        _assert_hidden(done.out + done.err, password)
        last = done.err.strip().splitlines()[-1]
        assert last.startswith("chatledger: error: "), done.err
        assert HOST in last, done.err


@pytest.mark.skipif(not HAVE_SQL, reason=NO_SQL)
@pytest.mark.parametrize("password", list(_passwords(["?", "#", "/", ":", " "])))
def test_copy_to_postgresql_shows_no_password(
    cli: Cli, tmp_path: pytest.TempPathFactory, password: str
) -> None:
    # The test server trusts loopback connections: any password is accepted.
    server = backend_url("postgresql")
    scheme, _, rest = server.partition("://")
    user, _, host = rest.partition("@")
    target = f"{scheme}://{user}:{password}@{host}"
    source = file_url("sqlite", tmp_path / "source")  # type: ignore[operator]
    assert (
        cli("import", source, "-", "--no-progress", stdin=_jsonl(_sample())).code == 0
    )
    option = f"table_name=cli_{uuid.uuid4().hex[:12]}"
    try:
        done = cli(
            "--debug",
            "copy",
            source,
            target,
            "--target-option",
            option,
            "--progress-every",
            "0",
        )
        assert done.code == 0, done.err
        assert "copying: 2/2 conversations" in done.err
        assert f"@{host}" in done.out
        _assert_hidden(done.out + done.err, password)
    finally:
        repository = connect(server, table_name=option.partition("=")[2])
        repository.drop_schema()  # type: ignore[attr-defined]
        repository.close()  # type: ignore[attr-defined]
