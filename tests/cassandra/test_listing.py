"""Which partitions are listed, and how a page is gathered over them (no server)."""

from __future__ import annotations

import random

import pytest

from chatledger import InvalidPageError
from chatledger_cassandra.listing import PageGathering, listed


def test_cassandra_emptied_partitions_are_not_listed() -> None:
    assert listed([("a", None), ("b", True), ("c", False)]) == ["a", "c"]


def test_cassandra_bad_cursor_fails_before_any_read() -> None:
    with pytest.raises(InvalidPageError):
        PageGathering.start("not-a-token", 10)
    with pytest.raises(InvalidPageError):
        PageGathering.start(None, 0)


@pytest.mark.parametrize("seed", range(20))
def test_cassandra_pages_list_each_conversation_once(seed: int) -> None:
    rng = random.Random(seed)
    ring = [
        (f"c{n}", rng.randrange(-(2**63), 2**63), rng.random() < 0.6)
        for n in range(rng.randint(0, 60))
    ]
    ring.sort(key=lambda row: row[1])
    limit = rng.randint(1, 12)

    def read(statement: str, params: tuple[object, ...]) -> list[tuple[str, int, bool]]:
        fetch = params[-1]
        assert isinstance(fetch, int)
        if statement == "first_ids_page":
            return ring[:fetch]
        after = params[0]
        assert isinstance(after, int)
        return [row for row in ring if row[1] > after][:fetch]

    seen: list[str] = []
    cursor = None
    while True:
        gathering = PageGathering.start(cursor, limit)
        page = None
        while page is None:
            page = gathering.add(read(*gathering.query()))
        seen += page.ids
        if page.next_cursor is None:
            assert len(page.ids) <= limit
            break
        assert len(page.ids) == limit
        cursor = page.next_cursor
    assert seen == [name for name, _, emptied in ring if not emptied]
