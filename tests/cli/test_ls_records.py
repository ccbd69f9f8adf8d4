"""``chatledger ls --owner X --long --limit N``: conversation records, newest first.

The store is the in-memory repository (``memory://``, one instance that every
command of a test opens) and a SQLite file when the SQL adapter keeps
records; a store without records (the testfile:// adapter) is refused.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from chatledger import (
    ConversationInfo,
    InMemoryChatMemoryRepository,
    Message,
    SupportsConversationInfo,
    connect,
)
from chatledger.cli import conversations
from tests.cli import filestore
from tests.cli.conftest import HAVE_SQL, NO_SQL, Cli


def sql_keeps_records() -> bool:
    """Whether the installed SQL adapter keeps conversation records."""
    from chatledger_sql import SqlChatMemoryRepository

    return issubclass(SqlChatMemoryRepository, SupportsConversationInfo)


@pytest.fixture(params=["memory", "sqlite"])
def store(
    request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> Iterator[tuple[str, Any]]:
    """``(url, repository)``: a store of records the commands open by its URL."""
    if request.param == "memory":
        shared = InMemoryChatMemoryRepository()
        monkeypatch.setattr(
            InMemoryChatMemoryRepository,
            "from_url",
            classmethod(lambda cls, url="memory://", **options: shared),
        )
        yield "memory://", shared
        return
    if not HAVE_SQL:
        pytest.skip(NO_SQL)
    if not sql_keeps_records():
        pytest.skip("the SQL adapter keeps no conversation records")
    url = f"sqlite:///{tmp_path / 'records.db'}"
    repository = connect(url)
    yield url, repository
    repository.close()  # type: ignore[attr-defined]


def _write(repository: Any, cid: str, count: int = 1, **info: Any) -> None:
    """Give ``cid`` ``count`` messages and, if given, its owner or metadata."""
    if count:
        repository.save_all(cid, [Message.user(f"m{n}") for n in range(count)])
    if info or not count:
        repository.set_conversation_info(cid, **info)
    time.sleep(0.002)  # the next write is later, on a millisecond clock too


def _info(repository: Any, cid: str) -> ConversationInfo:
    info = repository.get_conversation_info(cid)
    assert isinstance(info, ConversationInfo)
    return info


def test_long_lists_records_newest_first(cli: Cli, store: tuple[str, Any]) -> None:
    url, repository = store
    _write(repository, "trip", 2, owner="ann", metadata={"title": "Rome in June"})
    _write(repository, "draft", 0, owner="bob", metadata={"title": "New chat"})
    _write(repository, "plain", 3)
    done = cli("ls", url, "--long")
    assert (done.code, done.err) == (0, "")
    expected = []
    for cid, count, owner, title in [
        ("plain", 3, "-", "-"),
        ("draft", 0, "bob", "New chat"),
        ("trip", 2, "ann", "Rome in June"),
    ]:
        stamp = _info(repository, cid).updated_at.isoformat(timespec="milliseconds")
        expected.append(f"{cid}\t{stamp}\t{count}\t{owner}\t{title}")
    assert done.out.splitlines() == expected
    assert cli("ls", url, "-l").out == done.out
    # The plain listing stays the ids of conversations holding messages.
    assert cli("ls", url).out.splitlines() == ["plain", "trip"]


def test_owner_lists_only_that_owners_conversations(
    cli: Cli, store: tuple[str, Any]
) -> None:
    url, repository = store
    for n, owner in enumerate(["ann", "Ann", "ann ", "bob", "ann", None, "ann"]):
        _write(repository, f"c{n}", 1 + n % 2, owner=owner)
    assert cli("ls", url, "--owner", "ann").out.splitlines() == ["c6", "c4", "c0"]
    longer = cli("ls", url, "--owner", "ann", "--long").out.splitlines()
    assert [line.split("\t")[0] for line in longer] == ["c6", "c4", "c0"]
    assert {line.split("\t")[3] for line in longer} == {"ann"}
    assert cli("ls", url, "--owner", "Ann").out.splitlines() == ["c1"]
    assert cli("ls", url, "--owner", "ann ").out.splitlines() == ["c2"]
    times = cli("ls", url, "--owner", "ann", "--times").out.splitlines()
    assert [line.split("\t")[:2] for line in times] == [
        ["c6", "1"],
        ["c4", "1"],
        ["c0", "1"],
    ]


def test_limit_stops_the_listing(
    cli: Cli, store: tuple[str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    url, repository = store
    for n in range(7):
        _write(repository, f"c{n}", owner="ann")
    # Pages of 3: the listing crosses page boundaries, and --limit stops in one.
    monkeypatch.setattr(conversations, "_LS_PAGE", 3)
    newest = [f"c{n}" for n in range(6, -1, -1)]
    assert cli("ls", url, "--owner", "ann").out.splitlines() == newest
    for limit in (1, 3, 5, 7, 50):
        shown = cli("ls", url, "--owner", "ann", "--limit", str(limit)).out
        assert shown.splitlines() == newest[:limit]
        listed = cli("ls", url, "--long", "--limit", str(limit)).out.splitlines()
        assert [line.split("\t")[0] for line in listed] == newest[:limit]
        plain = cli("ls", url, "--limit", str(limit)).out.splitlines()
        assert plain == sorted(newest)[:limit]


def test_text_that_would_break_a_column_is_written_as_json(
    cli: Cli, store: tuple[str, Any]
) -> None:
    url, repository = store
    titles: dict[str, Any] = {
        "tab": "a\tb",
        "newline": "a\nb",
        "dash": "-",
        "empty": "",
        "number": 5,
        "list": ["x", 1],
        "unicode": "Été ✓",
    }
    for cid, title in titles.items():
        _write(repository, cid, owner="tab\there", metadata={"title": title})
    lines = cli("ls", url, "--long").out.splitlines()
    columns = {line.split("\t")[0]: line.split("\t")[1:] for line in lines}
    assert all(len(line.split("\t")) == 5 for line in lines)
    shown = {cid: cells[3] for cid, cells in columns.items()}
    assert shown == {
        "tab": '"a\\tb"',
        "newline": '"a\\nb"',
        "dash": '"-"',
        "empty": '""',
        "number": "5",
        "list": '["x",1]',
        "unicode": "Été ✓",
    }
    assert {cells[2] for cells in columns.values()} == {'"tab\\there"'}


def test_an_empty_listing_says_where_it_looked(
    cli: Cli, store: tuple[str, Any]
) -> None:
    url, repository = store
    _write(repository, "c1", owner="ann")
    nobody = cli("ls", url, "--owner", "zed")
    assert (nobody.code, nobody.out) == (0, "")
    assert nobody.err.startswith("no conversation of owner 'zed' is stored in ")
    repository.delete_by_conversation_id("c1")
    empty = cli("ls", url, "--long")
    assert (empty.code, empty.out) == (0, "")
    assert empty.err.startswith("no conversation is stored in ")


def test_a_store_without_records_is_refused(cli: Cli, tmp_path: Path) -> None:
    url = f"{filestore.SCHEME}://{tmp_path / 'store.json'}"
    assert cli("import", url, "-", stdin="").code == 0
    for asked in (("--owner", "ann"), ("--long",), ("--owner", "ann", "--times")):
        done = cli("ls", url, *asked)
        assert (done.code, done.out) == (2, "")
        assert f"ls {asked[0]} lists conversation records" in done.err
        assert "keeps none" in done.err
        assert "ls --times" in done.err
    assert cli("ls", url, "--times").code == 0


@pytest.mark.parametrize(
    ("arguments", "said"),
    [
        (("--owner", ""), "argument --owner: expected an owner, not ''"),
        (("--owner", "x" * 256), "owner is 256 characters; the limit is 255"),
        (("--limit", "0"), "argument --limit: expected a whole number >= 1"),
        (("--limit", "many"), "argument --limit"),
        (("--long", "--times"), "not allowed with argument -l/--long"),
    ],
)
def test_bad_options_are_usage_errors(
    cli: Cli, arguments: tuple[str, ...], said: str
) -> None:
    done = cli("ls", "memory://", *arguments)
    assert (done.code, done.out) == (2, "")
    assert said in done.err
