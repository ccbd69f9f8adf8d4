"""Conformance tests of conversation records: owner, metadata, counts, listing.

A repository with :class:`chatledger.SupportsConversationInfo` must pass
them; others skip them. Mix the class into a suite subclass:

    class TestAcmeRepository(ChatMemoryRepositoryTests, ConversationInfoTests):
        conversation_time_tolerance = timedelta(microseconds=1)

Times are compared with the store's precision (the class attribute
``conversation_time_tolerance``, a millisecond unless the store keeps
microseconds), and writes whose order a test checks are 2 ms apart, so no
case depends on a finer clock. The TTL case runs when the class says
``supports_ttl``, with the suite's ``make_repository_with_ttl`` fixture.
"""

from __future__ import annotations

import itertools
import threading
import time
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from functools import partial
from typing import Any

import pytest

from chatledger.conversation_info import (
    MAX_METADATA_BYTES,
    ConversationInfo,
    ConversationInfoPage,
    listing_key,
)
from chatledger.errors import (
    InvalidConversationIdError,
    InvalidConversationInfoError,
    InvalidPageError,
)
from chatledger.messages import MAX_METADATA_DEPTH, Message
from chatledger.repository import (
    SupportsConversationInfo,
    SupportsConversationPages,
    SupportsLog,
    SupportsLogRemoval,
    SupportsWindowAppend,
)
from chatledger.validation import MAX_PAGE_SIZE
from chatledger.window import MessageWindow

__all__ = ["ConversationInfoTests"]

#: Between two writes whose order a case checks: beyond a millisecond clock.
_APART = 0.002
#: TTLs (seconds) of successive attempts of the TTL case; a longer one runs
#: only when a stalled machine left the shorter one inconclusive.
_TTLS = (4.0, 16.0, 64.0)
#: A backend may count a TTL in whole seconds of its own clock.
_CLOCK_RESOLUTION = 1.0


def _records(repository: Any) -> Any:
    if not isinstance(repository, SupportsConversationInfo):
        pytest.skip("the repository keeps no conversation records")
    return repository


def _append(repository: Any, conversation_id: str, *texts: str) -> list[Message]:
    """Append user messages by the repository's own append, or by ``save_all``."""
    sent = [Message.user(text) for text in texts]
    if isinstance(repository, SupportsLog):
        repository.append_to_log(conversation_id, sent)
    elif isinstance(repository, SupportsWindowAppend):
        repository.append_to_window(conversation_id, sent, MessageWindow(10_000))
    else:
        held = repository.find_by_conversation_id(conversation_id)
        repository.save_all(conversation_id, held + sent)
    return sent


def _apart() -> None:
    """Let the clock move on by more than a millisecond."""
    time.sleep(_APART)


def _walk(repository: Any, limit: int, **conditions: Any) -> list[ConversationInfo]:
    """Every record of a walk through the pages, in order."""
    items: list[ConversationInfo] = []
    cursor = None
    for _ in range(100_000):
        page = repository.find_conversations(cursor=cursor, limit=limit, **conditions)
        assert isinstance(page, ConversationInfoPage)
        assert len(page.items) <= limit
        items += page.items
        if page.next_cursor is None:
            return items
        assert page.items, "a page with a next cursor must hold records"
        cursor = page.next_cursor
    raise AssertionError("paging did not end")


def _ids(items: list[ConversationInfo]) -> list[str]:
    return [item.id for item in items]


def _in_order(items: list[ConversationInfo]) -> bool:
    """Newest ``updated_at`` first, ties by id descending, no record twice."""
    keys = [listing_key(item) for item in items]
    return all(a > b for a, b in itertools.pairwise(keys))


def _reached(count: list[int], target: int, failures: list[BaseException]) -> bool:
    return count[0] >= target or bool(failures)


def _sleep_until(moment: float) -> None:
    while (left := moment - time.monotonic()) > 0:
        time.sleep(left)


class ConversationInfoTests:
    """Each conversation a record (owner, metadata, count, times), newest first."""

    #: The precision of the store's times: a millisecond, or a microsecond
    #: where it keeps microseconds. Times are checked within it.
    conversation_time_tolerance: timedelta = timedelta(milliseconds=1)

    def _assert_between(
        self, moment: datetime, before: datetime, after: datetime
    ) -> None:
        assert moment.tzinfo is not None
        assert moment.utcoffset() == timedelta(0), f"{moment} is not UTC"
        slack = self.conversation_time_tolerance
        assert before - slack <= moment <= after + slack, (before, moment, after)

    def test_first_append_makes_the_record(self, repository: Any) -> None:
        """An append to a new id makes a record: no owner, no metadata, its count."""
        records = _records(repository)
        assert records.get_conversation_info("fresh") is None
        before = datetime.now(UTC)
        _append(records, "fresh", "one", "two")
        after = datetime.now(UTC)
        info = records.get_conversation_info("fresh")
        assert info is not None
        assert (info.id, info.message_count, info.owner) == ("fresh", 2, None)
        assert info.metadata == {}
        self._assert_between(info.created_at, before, after)
        assert info.updated_at == info.created_at
        assert _ids(records.find_conversations().items) == ["fresh"]

    def test_set_on_a_new_id_makes_a_record_without_messages(
        self, repository: Any
    ) -> None:
        """A chat titled before its first message: listed as a record, not as ids."""
        records = _records(repository)
        before = datetime.now(UTC)
        made = records.set_conversation_info(
            "new-chat", owner="alice", metadata={"title": "Taxes"}
        )
        after = datetime.now(UTC)
        assert (made.id, made.message_count, made.owner) == ("new-chat", 0, "alice")
        assert made.metadata == {"title": "Taxes"}
        self._assert_between(made.created_at, before, after)
        assert made.updated_at == made.created_at
        assert records.get_conversation_info("new-chat") == made
        assert records.find_by_conversation_id("new-chat") == []
        assert "new-chat" not in records.find_conversation_ids()
        if isinstance(records, SupportsConversationPages):
            assert records.find_conversation_ids_page(None, 10).ids == []
        assert records.find_conversations(owner="alice").items == [made]
        _apart()
        _append(records, "new-chat", "first")
        info = records.get_conversation_info("new-chat")
        assert info is not None
        assert (info.message_count, info.owner, info.created_at) == (
            1,
            "alice",
            made.created_at,
        )
        assert info.metadata == {"title": "Taxes"}
        assert info.updated_at > made.updated_at
        assert "new-chat" in records.find_conversation_ids()

    def test_owner_and_metadata_are_kept_replaced_and_cleared(
        self, repository: Any
    ) -> None:
        """Left out, each is kept; metadata is replaced whole; None and {} clear."""
        records = _records(repository)
        _append(records, "c", "hi")
        first = {"title": "Trip", "tags": ["rome", "june"], "budget": {"eur": 900}}
        set_both = records.set_conversation_info("c", owner="bob", metadata=first)
        assert (set_both.owner, set_both.metadata) == ("bob", first)
        assert set_both.message_count == 1
        kept = records.set_conversation_info("c", metadata={"title": "Trip to Rome"})
        assert (kept.owner, kept.metadata) == ("bob", {"title": "Trip to Rome"})
        moved = records.set_conversation_info("c", owner="carol")
        assert (moved.owner, moved.metadata) == ("carol", {"title": "Trip to Rome"})
        untouched = records.set_conversation_info("c")
        assert untouched == moved
        cleared = records.set_conversation_info("c", owner=None, metadata={})
        assert (cleared.owner, cleared.metadata) == (None, {})
        assert records.get_conversation_info("c") == cleared
        assert records.find_conversations(owner="bob").items == []
        assert records.find_conversations(owner="carol").items == []

    def test_metadata_round_trips_and_is_a_read_only_copy(
        self, repository: Any
    ) -> None:
        """Any JSON object comes back equal; neither side's changes reach the other."""
        records = _records(repository)
        given: dict[str, Any] = {
            "title": 'Ünïcode ✓ \N{GRINNING FACE} "quoted" \\ back',
            "empty": "",
            "none": None,
            "yes": True,
            "no": False,
            "int": -7,
            "big": 2**64 + 1,
            "float": 0.1,
            "list": [1, "two", None, [3], {"four": 4}],
            "nested": {"a": {"b": {"c": []}}},
            "": "an empty key",
            "dotted.key": "kept whole",
            "$dollar": "kept as given",
        }
        stored = records.set_conversation_info("json", metadata=given)
        given["title"] = "changed by the caller"
        given["list"].append(5)
        read = records.get_conversation_info("json")
        assert read is not None
        assert read.metadata == stored.metadata
        assert read.metadata["title"] != "changed by the caller"
        assert read.metadata["list"] == [1, "two", None, [3], {"four": 4}]
        assert read.metadata["big"] == 2**64 + 1
        assert type(read.metadata["float"]) is float
        assert type(read.metadata["yes"]) is bool
        with pytest.raises(TypeError):
            read.metadata["title"] = "x"  # type: ignore[index]
        limit = {"t": "x" * (MAX_METADATA_BYTES - len('{"t":""}'))}
        assert records.set_conversation_info("json", metadata=limit).metadata == limit
        again = records.get_conversation_info("json")
        assert again is not None
        assert again.metadata == limit

    def test_count_and_updated_at_follow_writes_to_the_messages(
        self, repository: Any
    ) -> None:
        """Appends and save_all move updated_at and the count; setting does not."""
        records = _records(repository)
        _append(records, "moving", "a", "b")
        made = records.get_conversation_info("moving")
        _apart()
        _append(records, "moving", "c")
        appended = records.get_conversation_info("moving")
        assert made is not None
        assert appended is not None
        assert appended.message_count == 3
        assert appended.updated_at > made.updated_at
        assert appended.created_at == made.created_at
        _apart()
        titled = records.set_conversation_info(
            "moving", owner="dan", metadata={"title": "T"}
        )
        assert titled.updated_at == appended.updated_at
        assert titled.message_count == 3
        _apart()
        old = datetime(2020, 1, 2, 3, 4, 5, tzinfo=UTC)
        before = datetime.now(UTC)
        records.save_all("moving", [Message.user("only").stamped(old)])
        after = datetime.now(UTC)
        saved = records.get_conversation_info("moving")
        assert saved is not None
        assert (saved.message_count, saved.owner, saved.created_at) == (
            1,
            "dan",
            made.created_at,
        )
        assert saved.metadata == {"title": "T"}
        # The time of the write, not of the messages written.
        self._assert_between(saved.updated_at, before, after)

    def test_window_evictions_are_counted(self, repository: Any) -> None:
        """A window append that evicts leaves the count of the messages held."""
        if not isinstance(repository, SupportsWindowAppend):
            pytest.skip("the repository has no window append")
        records = _records(repository)
        sent = [Message.user(f"m{n}") for n in range(5)]
        records.append_to_window("windowed", sent, MessageWindow(3))
        info = records.get_conversation_info("windowed")
        assert info is not None
        assert info.message_count == len(records.find_by_conversation_id("windowed"))
        assert info.message_count == 3

    def test_removals_are_counted_and_keep_the_record(self, repository: Any) -> None:
        """A removal moves updated_at; a record emptied by removals stays."""
        if not isinstance(repository, SupportsLogRemoval):
            pytest.skip("the repository removes nothing on request")
        records = _records(repository)
        _append(records, "popped", "a", "b", "c")
        records.set_conversation_info("popped", owner="erin")
        made = records.get_conversation_info("popped")
        _apart()
        records.remove_newest("popped")
        one_less = records.get_conversation_info("popped")
        assert made is not None
        assert one_less is not None
        assert one_less.message_count == 2
        assert one_less.updated_at > made.updated_at
        _apart()
        records.remove_newest("popped", 5)
        emptied = records.get_conversation_info("popped")
        assert emptied is not None
        assert (emptied.message_count, emptied.owner) == (0, "erin")
        assert emptied.updated_at > one_less.updated_at
        assert "popped" not in records.find_conversation_ids()
        assert _ids(records.find_conversations(owner="erin").items) == ["popped"]

    def test_delete_and_save_all_of_nothing_remove_the_record(
        self, repository: Any
    ) -> None:
        """The conversation is gone, record and all; a later write starts afresh."""
        records = _records(repository)
        for cid in ("deleted", "emptied", "bare"):
            _append(records, cid, "hi")
            records.set_conversation_info(cid, owner="finn", metadata={"t": 1})
        records.set_conversation_info("bare-only", owner="finn")
        records.delete_by_conversation_id("deleted")
        records.save_all("emptied", [])
        records.delete_by_conversation_id("bare-only")
        for cid in ("deleted", "emptied", "bare-only"):
            assert records.get_conversation_info(cid) is None
            assert records.find_by_conversation_id(cid) == []
        assert _ids(records.find_conversations(owner="finn").items) == ["bare"]
        assert _ids(records.find_conversations().items) == ["bare"]
        _append(records, "deleted", "again")
        again = records.get_conversation_info("deleted")
        assert again is not None
        assert (again.owner, again.metadata, again.message_count) == (None, {}, 1)

    def test_listing_is_newest_first(self, repository: Any) -> None:
        """Ordered by the last write to the messages; a set moves nothing."""
        records = _records(repository)
        for n in range(6):
            if n:
                _apart()
            if n == 3:
                records.set_conversation_info("c3")
            else:
                _append(records, f"c{n}", "hi")
        newest_first = ["c5", "c4", "c3", "c2", "c1", "c0"]
        assert _ids(records.find_conversations().items) == newest_first
        _apart()
        _append(records, "c1", "again")
        records.set_conversation_info("c0", metadata={"title": "not a write"})
        moved = ["c1", "c5", "c4", "c3", "c2", "c0"]
        assert _ids(records.find_conversations().items) == moved
        assert _ids(_walk(records, 1)) == moved

    def test_ties_and_pages_keep_one_order(self, repository: Any) -> None:
        """Written as fast as they come (ties likely on a coarse clock): one order.

        The listing is sorted by ``updated_at`` then id, both descending, and
        every page size walks it the same.
        """
        records = _records(repository)
        ids = [f"tie-{n:02d}" for n in range(16)]
        for cid in ids:
            records.set_conversation_info(cid)
        whole = records.find_conversations(limit=100).items
        assert sorted(_ids(whole)) == ids
        assert _in_order(whole)
        for limit in (1, 3, 5):
            assert _walk(records, limit) == whole

    def test_owner_filter_reads_only_that_owner(self, repository: Any) -> None:
        """Owners are compared exactly: another one's record never comes through."""
        records = _records(repository)
        owners = ["alice", "Alice", "alice ", "ALICE", "alicia", "bob", None]
        mine = []
        for n in range(14):
            owner = owners[n % len(owners)]
            cid = f"o{n:02d}"
            _append(records, cid, "hi")
            records.set_conversation_info(cid, owner=owner)
            if owner == "alice":
                mine.append(cid)
        for limit in (1, 2, 100):
            found = _walk(records, limit, owner="alice")
            assert sorted(_ids(found)) == mine
            assert {item.owner for item in found} == {"alice"}
            assert _in_order(found)
        assert _ids(records.find_conversations(owner="Alice").items) != []
        assert {i.owner for i in _walk(records, 3, owner="alice ")} == {"alice "}
        assert records.find_conversations(owner="nobody").items == []
        assert len(_walk(records, 4)) == 14

    def test_metadata_filter_matches_equal_json_scalars(self, repository: Any) -> None:
        """Each key present with an equal value: True is not 1, None is not absent."""
        records = _records(repository)
        stored = {
            "m-full": {
                "topic": "tax",
                "pinned": True,
                "n": 7,
                "gone": None,
                "a.b": "dot",
                'say "hi"': "quoted",
            },
            "m-case": {"topic": "Tax", "pinned": True, "a": {"b": "dot"}},
            "m-one": {"topic": "tax", "pinned": 1},
            "m-false": {"topic": "tax", "pinned": False, "n": 8},
            "m-list": {"topic": ["tax"], "pinned": "true"},
            "m-none": {},
        }
        for cid, metadata in stored.items():
            _append(records, cid, "hi")
            records.set_conversation_info(cid, owner="gail", metadata=metadata)
        records.set_conversation_info("m-other", owner="hank", metadata={"n": 7})

        def found(metadata: dict[str, Any], **conditions: Any) -> list[str]:
            return sorted(_ids(_walk(records, 2, metadata=metadata, **conditions)))

        assert found({"topic": "tax"}) == ["m-false", "m-full", "m-one"]
        assert found({"topic": "Tax"}) == ["m-case"]
        assert found({"pinned": True}) == ["m-case", "m-full"]
        assert found({"pinned": 1}) == ["m-one"]
        assert found({"pinned": False}) == ["m-false"]
        assert found({"gone": None}) == ["m-full"]
        assert found({"topic": "tax", "n": 8}) == ["m-false"]
        assert found({"n": 7}) == ["m-full", "m-other"]
        assert found({"n": 7}, owner="gail") == ["m-full"]
        assert found({"a.b": "dot"}) == ["m-full"]
        assert found({'say "hi"': "quoted"}) == ["m-full"]
        assert found({"topic": "tax", "pinned": "true"}) == []
        assert found({"absent": "x"}) == []
        assert len(found({})) == 7

    def test_updated_before_keeps_the_older_ones(self, repository: Any) -> None:
        """Only records whose updated_at is strictly before the moment given."""
        records = _records(repository)
        for n in range(4):
            if n:
                _apart()
            _append(records, f"u{n}", "hi")
        infos = {i.id: i for i in records.find_conversations().items}
        moment = infos["u2"].updated_at
        older = records.find_conversations(updated_before=moment).items
        assert _ids(older) == ["u1", "u0"]
        assert _ids(_walk(records, 1, updated_before=moment)) == ["u1", "u0"]
        later = moment + timedelta(milliseconds=1)
        assert _ids(records.find_conversations(updated_before=later).items) == [
            "u2",
            "u1",
            "u0",
        ]
        records.set_conversation_info("u0", owner="ida")
        assert _ids(
            records.find_conversations(owner="ida", updated_before=moment).items
        ) == ["u0"]
        far = datetime(2000, 1, 1, tzinfo=UTC)
        assert records.find_conversations(updated_before=far).items == []

    def test_paging_gives_each_conversation_exactly_once(self, repository: Any) -> None:
        """25 conversations, 4 a page: every one once, in the listing's order."""
        records = _records(repository)
        ids = [f"p{n:02d}" for n in range(25)]
        for cid in ids:
            _append(records, cid, "hi")
        pages = []
        cursor = None
        while True:
            page = records.find_conversations(cursor=cursor, limit=4)
            pages.append(_ids(page.items))
            if page.next_cursor is None:
                break
            cursor = page.next_cursor
        assert [len(p) for p in pages] == [4, 4, 4, 4, 4, 4, 1]
        walked = [cid for page in pages for cid in page]
        assert sorted(walked) == ids
        whole = records.find_conversations(limit=MAX_PAGE_SIZE)
        assert whole.next_cursor is None
        assert walked == _ids(whole.items)
        assert _in_order(whole.items)
        exact = records.find_conversations(limit=25)
        assert (len(exact.items), exact.next_cursor) == (25, None)

    def test_paging_while_others_write_gives_no_record_twice(
        self, repository: Any
    ) -> None:
        """Writes between the pages: none twice; every untouched one exactly once."""
        records = _records(repository)
        ids = [f"w{n:02d}" for n in range(24)]
        for cid in ids:
            _append(records, cid, "hi")
        touched, untouched = ids[::2], ids[1::2]
        done = threading.Event()
        written = threading.Condition()
        count = [0]
        failures: list[BaseException] = []

        def write(worker: int) -> None:
            n = 0
            try:
                while not done.is_set():
                    if n % 5 == 4:
                        _append(records, f"new-{worker}-{n}", "late")
                    else:
                        cid = touched[(3 * n + worker) % len(touched)]
                        _append(records, cid, f"{worker}-{n}")
                    n += 1
                    with written:
                        count[0] += 1
                        written.notify_all()
            except BaseException as error:  # reported below
                failures.append(error)
                with written:
                    written.notify_all()

        writers = [threading.Thread(target=write, args=(w,)) for w in range(2)]
        for writer in writers:
            writer.start()
        seen: list[str] = []
        try:
            cursor = None
            while True:
                with written:
                    # Two more writes land between each page and the next.
                    target = count[0] + 2
                    written.wait_for(partial(_reached, count, target, failures), 60)
                page = records.find_conversations(cursor=cursor, limit=4)
                seen += _ids(page.items)
                if page.next_cursor is None:
                    break
                cursor = page.next_cursor
        finally:
            done.set()
            for writer in writers:
                writer.join()
        assert failures == []
        assert len(seen) == len(set(seen)), "a record came twice"
        assert [cid for cid in seen if cid in untouched] == [
            cid for cid in reversed(untouched)
        ]
        assert set(seen) - set(ids) <= {
            i.id for i in _walk(records, 100) if i.id.startswith("new-")
        }

    def test_bad_input_is_refused_and_changes_nothing(self, repository: Any) -> None:
        """Bad ids, owners, metadata and filters raise; no record changes."""
        records = _records(repository)
        _append(records, "kept", "hi")
        kept = records.set_conversation_info(
            "kept", owner="jo", metadata={"title": "T"}
        )
        for cid in ("", " padded", 5, None):
            with pytest.raises(InvalidConversationIdError):
                records.set_conversation_info(cid, owner="jo")
            with pytest.raises(InvalidConversationIdError):
                records.get_conversation_info(cid)
        too_long = "x" * 256
        for owner in (5, "", too_long, "nul\x00inside", "\ud800", b"jo", ["jo"]):
            for cid in ("kept", "never"):
                with pytest.raises(InvalidConversationInfoError):
                    records.set_conversation_info(cid, owner=owner)
                with pytest.raises(InvalidConversationInfoError):
                    records.set_conversation_info(
                        cid, owner=owner, metadata={"title": "changed"}
                    )
        deep: dict[str, Any] = {}
        for _ in range(MAX_METADATA_DEPTH + 1):
            deep = {"d": deep}
        big = {"t": "x" * (MAX_METADATA_BYTES - len('{"t":""}') + 1)}
        bad_metadata: list[Any] = [
            None,
            "text",
            [("title", "T")],
            {1: "a"},
            {"a": {2: "b"}},
            {"a": float("nan")},
            {"a": float("inf")},
            {"a": {1, 2}},
            {"a": b"bytes"},
            {"a": object()},
            {"a": "\ud800"},
            big,
            deep,
        ]
        for metadata in bad_metadata:
            for cid in ("kept", "never"):
                with pytest.raises(InvalidConversationInfoError):
                    records.set_conversation_info(cid, owner="other", metadata=metadata)
        assert records.get_conversation_info("kept") == kept
        assert records.get_conversation_info("never") is None
        for owner in (5, "", too_long, "nul\x00inside"):
            with pytest.raises(InvalidConversationInfoError):
                records.find_conversations(owner=owner)
        for wanted in ("x", ["a"], {"a": [1]}, {"a": {"b": 1}}, {1: "a"}):
            with pytest.raises(InvalidConversationInfoError):
                records.find_conversations(metadata=wanted)
        with pytest.raises(InvalidConversationInfoError):
            records.find_conversations(metadata={"a": float("nan")})
        naive = datetime(2030, 1, 1)
        for moment in (naive, "2030-01-01T00:00:00+00:00", 1_900_000_000):
            with pytest.raises(InvalidConversationInfoError):
                records.find_conversations(updated_before=moment)
        for limit in (0, -1, MAX_PAGE_SIZE + 1, True, "10", 2.0, None):
            with pytest.raises(InvalidPageError):
                records.find_conversations(limit=limit)
        assert records.get_conversation_info("kept") == kept
        assert _ids(records.find_conversations().items) == ["kept"]

    def test_a_cursor_works_only_with_its_own_filter(self, repository: Any) -> None:
        """Another filter's cursor, an altered one or another listing's is refused."""
        records = _records(repository)
        for n in range(5):
            _append(records, f"k{n}", "hi", "there")
            records.set_conversation_info(f"k{n}", owner="kim", metadata={"n": 1})
        moment = datetime.now(UTC) + timedelta(days=1)
        conditions: dict[str, Any] = {
            "owner": "kim",
            "metadata": {"n": 1},
            "updated_before": moment,
        }
        cursor = records.find_conversations(limit=2, **conditions).next_cursor
        assert isinstance(cursor, str)
        rest = records.find_conversations(cursor=cursor, limit=10, **conditions)
        assert len(rest.items) == 3
        others: list[dict[str, Any]] = [
            {},
            {**conditions, "owner": "kim2"},
            {**conditions, "owner": None},
            {**conditions, "metadata": {"n": 2}},
            {**conditions, "metadata": {"n": True}},
            {**conditions, "metadata": None},
            {**conditions, "updated_before": moment + timedelta(seconds=1)},
            {**conditions, "updated_before": None},
        ]
        for other in others:
            with pytest.raises(InvalidPageError):
                records.find_conversations(cursor=cursor, **other)
        foreign = ["", "garbage", cursor[:-1], cursor + "x", cursor.upper(), 5]
        if isinstance(records, SupportsLog):
            page = records.find_messages_page("k0", None, 1)
            foreign.append(page.next_cursor)
        if isinstance(records, SupportsConversationPages):
            foreign.append(records.find_conversation_ids_page(None, 1).next_cursor)
        for text in foreign:
            with pytest.raises(InvalidPageError):
                records.find_conversations(cursor=text, **conditions)

    def test_ttl_removes_the_record_and_every_write_refreshes_it(
        self, request: pytest.FixtureRequest
    ) -> None:
        """A set refreshes the messages' TTL, an append the record's; then all goes."""
        if not getattr(self, "supports_ttl", False):
            pytest.skip("the repository has no TTL")
        make: Callable[[timedelta], Any] = request.getfixturevalue(
            "make_repository_with_ttl"
        )
        grace = float(getattr(self, "ttl_grace_seconds", 1.5))
        for attempt, ttl in enumerate(_TTLS):
            records = _records(make(timedelta(seconds=ttl)))
            titled, talked = f"titled-{attempt}", f"talked-{attempt}"
            first_started = time.monotonic()
            records.set_conversation_info(titled, owner="lee")
            _append(records, talked, "hello")
            first_written = time.monotonic()
            _sleep_until(first_started + ttl / 2)
            second_started = time.monotonic()
            _append(records, titled, "first")
            records.set_conversation_info(talked, metadata={"title": "kept"})
            second_written = time.monotonic()
            if second_written >= first_started + ttl - _CLOCK_RESOLUTION:
                continue  # the first writes may have expired before the second
            # Read once the first writes' TTL has surely run out.
            _sleep_until(first_written + ttl + 0.1)
            titled_info = records.get_conversation_info(titled)
            talked_info = records.get_conversation_info(talked)
            talked_messages = records.find_by_conversation_id(talked)
            if time.monotonic() >= second_started + ttl - _CLOCK_RESOLUTION:
                continue  # the read may have come after the second writes expired
            assert titled_info is not None
            assert talked_info is not None
            assert (titled_info.owner, titled_info.message_count) == ("lee", 1)
            assert talked_info.metadata == {"title": "kept"}
            assert [m.content for m in talked_messages] == ["hello"]
            _sleep_until(second_written + ttl + grace)
            for cid in (titled, talked):
                assert records.get_conversation_info(cid) is None
                assert records.find_by_conversation_id(cid) == []
            listed = _ids(_walk(records, 100))
            assert titled not in listed
            assert talked not in listed
            assert records.find_conversations(owner="lee").items == []
            return
        pytest.fail(f"every attempt stalled past its TTL {_TTLS}")
