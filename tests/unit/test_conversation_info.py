"""Conversation records in core: the checks of owner, metadata, filter; the cursor."""

from __future__ import annotations

import base64
import json
from datetime import UTC, datetime, timedelta, timezone
from types import MappingProxyType
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import chatledger.in_memory
from chatledger import (
    ConversationInfo,
    InMemoryChatMemoryRepository,
    InvalidConversationInfoError,
    InvalidPageError,
    Message,
)
from chatledger.conversation_info import (
    MAX_METADATA_BYTES,
    MAX_OWNER_LENGTH,
    UNSET,
    check_conversation_info,
    check_find_conversations,
    decode_conversation_cursor,
    encode_conversation_cursor,
    filter_fingerprint,
    listing_key,
    metadata_matches,
    validate_metadata,
    validate_metadata_filter,
    validate_owner,
    validate_updated_before,
)
from chatledger.messages import MAX_METADATA_DEPTH
from chatledger.validation import MAX_PAGE_SIZE

MOMENT = datetime(2026, 3, 4, 5, 6, 7, 891234, tzinfo=UTC)


def _info(cid: str, updated_at: datetime, **fields: Any) -> ConversationInfo:
    return ConversationInfo(cid, updated_at, updated_at, 0, **fields)


class TestOwner:
    @pytest.mark.parametrize(
        "owner", ["a", "x" * MAX_OWNER_LENGTH, "Ünï cödé ✓", " a "]
    )
    def test_an_owner_is_kept_exactly(self, owner: str) -> None:
        assert validate_owner(owner) is owner

    @pytest.mark.parametrize(
        ("owner", "said"),
        [
            (5, "must be a str or None, not int"),
            (b"alice", "not bytes"),
            ("", "must not be empty"),
            ("x" * (MAX_OWNER_LENGTH + 1), "256 characters; the limit is 255"),
            ("a\x00b", "NUL"),
            ("a\ud800", "lone surrogate"),
        ],
    )
    def test_a_bad_owner_is_refused_saying_why(self, owner: object, said: str) -> None:
        with pytest.raises(InvalidConversationInfoError, match=said) as caught:
            validate_owner(owner)
        assert isinstance(caught.value, ValueError)
        assert isinstance(caught.value, TypeError)


class TestMetadata:
    def test_it_is_a_read_only_deep_copy(self) -> None:
        given: dict[str, Any] = {"title": "T", "tags": ["a"], "deep": {"n": 1}}
        frozen = validate_metadata(given)
        given["tags"].append("b")
        given["deep"]["n"] = 2
        assert frozen == {"title": "T", "tags": ["a"], "deep": {"n": 1}}
        assert isinstance(frozen, MappingProxyType)
        with pytest.raises(TypeError):
            frozen["deep"]["n"] = 3  # type: ignore[index]

    def test_the_size_limit_counts_compact_utf8_json(self) -> None:
        # {"t":"..."} is 8 bytes around the text; "é" is 2 bytes in UTF-8.
        fits = {"t": "é" * ((MAX_METADATA_BYTES - 8) // 2)}
        assert validate_metadata(fits) == fits
        assert validate_metadata({"t": "x" * (MAX_METADATA_BYTES - 8)})
        with pytest.raises(InvalidConversationInfoError, match="65537 bytes"):
            validate_metadata({"t": "x" * (MAX_METADATA_BYTES - 7)})

    @pytest.mark.parametrize(
        ("metadata", "said"),
        [
            (None, "must be a mapping, not NoneType"),
            ([("a", 1)], "must be a mapping, not list"),
            ({1: "a"}, "key 1 at metadata must be a str"),
            ({"a": {2: "b"}}, r"key 2 at metadata\['a'\]"),
            ({"a": float("nan")}, "is nan, not JSON"),
            ({"a": [float("-inf")]}, r"metadata\['a'\]\[0\] is -inf"),
            ({"a": {1}}, "is a set, which is not JSON"),
            ({"a": b"x"}, "is a bytes"),
            ({"a": "\udc00"}, "lone surrogate"),
            ({"\udc00": 1}, "lone surrogate"),
        ],
    )
    def test_what_is_not_a_json_object_is_refused(
        self, metadata: object, said: str
    ) -> None:
        with pytest.raises(InvalidConversationInfoError, match=said):
            validate_metadata(metadata)

    def test_depth_is_limited_before_recursing(self) -> None:
        deep: dict[str, Any] = {}
        for _ in range(MAX_METADATA_DEPTH - 1):
            deep = {"d": deep}
        assert validate_metadata(deep)
        with pytest.raises(InvalidConversationInfoError, match="nests deeper"):
            validate_metadata({"d": deep})
        far: dict[str, Any] = {}
        for _ in range(100_000):
            far = {"d": far}
        with pytest.raises(InvalidConversationInfoError, match="nests deeper"):
            validate_metadata(far)


class TestUpdate:
    def test_left_out_keeps_none_clears_a_value_sets(self) -> None:
        kept = check_conversation_info("c1")
        assert (kept.owner, kept.metadata, kept.metadata_json) == (UNSET, UNSET, UNSET)
        assert kept.owner_after("ann") == "ann"
        assert kept.metadata_after({"t": 1}) == {"t": 1}
        cleared = check_conversation_info("c1", None, {})
        assert cleared.owner_after("ann") is None
        assert cleared.metadata_after({"t": 1}) == {}
        assert cleared.metadata_json == "{}"
        given = check_conversation_info("c1", "bo", {"title": "Été", "n": [1, 2.5]})
        assert given.owner_after(None) == "bo"
        assert given.metadata_json == '{"title":"Été","n":[1,2.5]}'
        assert json.loads(given.metadata_json) == given.metadata

    def test_the_id_is_checked_first(self) -> None:
        from chatledger import InvalidConversationIdError

        with pytest.raises(InvalidConversationIdError):
            check_conversation_info(" c1", owner=5)

    def test_unset_reads_as_its_name(self) -> None:
        assert repr(UNSET) == "UNSET"


class TestRecord:
    def test_times_become_utc_and_naive_ones_are_refused(self) -> None:
        paris = timezone(timedelta(hours=2))
        info = ConversationInfo("c", MOMENT.astimezone(paris), MOMENT, 0)
        assert info.created_at == MOMENT
        assert info.created_at.tzinfo is UTC
        with pytest.raises(TypeError, match="naive"):
            ConversationInfo("c", MOMENT.replace(tzinfo=None), MOMENT, 0)

    def test_its_metadata_is_a_frozen_copy(self) -> None:
        given: dict[str, Any] = {"tags": ["a"]}
        info = ConversationInfo("c", MOMENT, MOMENT, 0, None, given)
        given["tags"].append("b")
        assert info.metadata == {"tags": ["a"]}
        assert ConversationInfo("c", MOMENT, MOMENT, 0).metadata == {}
        assert info == ConversationInfo("c", MOMENT, MOMENT, 0, None, {"tags": ["a"]})


class TestFilter:
    def test_a_filter_holds_json_scalars(self) -> None:
        wanted = {"s": "x", "i": 1, "f": 1.5, "b": False, "n": None}
        assert validate_metadata_filter(wanted) == wanted
        assert validate_metadata_filter(None) == {}

    @pytest.mark.parametrize(
        "wanted",
        ["x", [("a", 1)], {"a": [1]}, {"a": {"b": 1}}, {1: "a"}, {"a": float("nan")}],
    )
    def test_anything_else_is_refused(self, wanted: object) -> None:
        with pytest.raises(InvalidConversationInfoError):
            validate_metadata_filter(wanted)

    def test_updated_before_must_be_aware(self) -> None:
        assert validate_updated_before(None) is None
        local = MOMENT.astimezone(timezone(timedelta(hours=-5)))
        assert validate_updated_before(local) == MOMENT
        for moment in (MOMENT.replace(tzinfo=None), "2026-01-01", 0):
            with pytest.raises(InvalidConversationInfoError):
                validate_updated_before(moment)

    @pytest.mark.parametrize(
        ("stored", "wanted", "equal"),
        [
            ("tax", "tax", True),
            ("Tax", "tax", False),
            ("tax ", "tax", False),
            (True, True, True),
            (1, True, False),
            (True, 1, False),
            (0, False, False),
            (1, 1, True),
            (1.0, 1, True),
            (2, 1.0, False),
            ("1", 1, False),
            (None, None, True),
            (["tax"], "tax", False),
            ({"a": 1}, 1, False),
        ],
    )
    def test_values_compare_as_json(
        self, stored: object, wanted: Any, equal: bool
    ) -> None:
        assert metadata_matches({"k": stored}, {"k": wanted}) is equal

    def test_every_key_must_be_present(self) -> None:
        assert metadata_matches({"k": None}, {"k": None})
        assert not metadata_matches({}, {"k": None})
        assert metadata_matches({"a": 1, "b": 2}, {"a": 1})
        assert not metadata_matches({"a": 1}, {"a": 1, "b": 2})
        assert metadata_matches({}, {})


class TestCursor:
    FINGERPRINT = filter_fingerprint("ann", MappingProxyType({}), None)

    def test_it_round_trips_to_the_microsecond(self) -> None:
        for cid in ("c1", "Ünï/cödé ✓", "x" * 255):
            cursor = encode_conversation_cursor(MOMENT, cid, self.FINGERPRINT)
            assert decode_conversation_cursor(cursor, self.FINGERPRINT) == (MOMENT, cid)
            assert cursor.isascii()

    def test_another_filter_is_named_as_the_reason(self) -> None:
        cursor = encode_conversation_cursor(MOMENT, "c1", self.FINGERPRINT)
        other = filter_fingerprint("bob", MappingProxyType({}), None)
        with pytest.raises(InvalidPageError, match="given for another filter"):
            decode_conversation_cursor(cursor, other)

    def test_an_altered_or_foreign_cursor_is_refused(self) -> None:
        cursor = encode_conversation_cursor(MOMENT, "c1", self.FINGERPRINT)
        prefix, body, digest = cursor.split(".")
        moved = json.loads(base64.urlsafe_b64decode(body + "=="))
        moved[0] -= 1
        forged = base64.urlsafe_b64encode(json.dumps(moved).encode()).decode()
        foreign = [
            "",
            "c1",
            "n:5",
            cursor[:-1],
            cursor + "0",
            cursor.replace(".", "", 1),
            f"{prefix}.{forged.rstrip('=')}.{digest}",
            f"{prefix}.!!!.{digest}",
        ]
        for text in foreign:
            with pytest.raises(InvalidPageError, match="not a cursor"):
                decode_conversation_cursor(text, self.FINGERPRINT)

    def test_a_well_formed_cursor_of_a_bad_id_or_time_is_refused(self) -> None:
        from chatledger.conversation_info import _check_digest

        for payload in ([0, " padded", self.FINGERPRINT], [10**20, "c", "f"]):
            body = json.dumps(payload).encode()
            text = base64.urlsafe_b64encode(body).decode().rstrip("=")
            cursor = f"cl1.{text}.{_check_digest(body)}"
            with pytest.raises(InvalidPageError, match="not a cursor"):
                decode_conversation_cursor(cursor, self.FINGERPRINT)

    def test_the_fingerprint_covers_each_condition(self) -> None:
        def fingerprint(
            owner: str | None = None,
            metadata: dict[str, Any] | None = None,
            before: datetime | None = None,
        ) -> str:
            return filter_fingerprint(owner, MappingProxyType(metadata or {}), before)

        prints = [
            fingerprint(),
            fingerprint("ann"),
            fingerprint("Ann"),
            fingerprint(metadata={"a": 1}),
            fingerprint(metadata={"a": True}),
            fingerprint(metadata={"a": "1"}),
            fingerprint(metadata={"a": None}),
            fingerprint(before=MOMENT),
            fingerprint(before=MOMENT + timedelta(microseconds=1)),
        ]
        assert len(set(prints)) == len(prints)
        assert fingerprint(metadata={"a": 1, "b": 2}) == fingerprint(
            metadata={"b": 2, "a": 1}
        )
        assert filter_fingerprint(None, MappingProxyType({}), None) == fingerprint()


class TestQuery:
    def test_errors_come_in_the_order_of_the_arguments(self) -> None:
        with pytest.raises(InvalidConversationInfoError):
            check_find_conversations(owner="", limit=0)
        with pytest.raises(InvalidPageError):
            check_find_conversations(owner="ann", limit=0)
        for limit in (0, MAX_PAGE_SIZE + 1, True, 1.0, "5"):
            with pytest.raises(InvalidPageError):
                check_find_conversations(limit=limit)
        assert check_find_conversations(limit=MAX_PAGE_SIZE).limit == MAX_PAGE_SIZE

    def test_a_query_continues_strictly_after_its_cursor(self) -> None:
        first = check_find_conversations(owner="ann", limit=2)
        cursor = encode_conversation_cursor(MOMENT, "m", first.fingerprint)
        query = check_find_conversations(owner="ann", cursor=cursor, limit=2)
        assert query.after == (MOMENT, "m")
        earlier = MOMENT - timedelta(microseconds=1)
        assert query.matches(_info("z", earlier, owner="ann"))
        assert query.matches(_info("l", MOMENT, owner="ann"))
        assert not query.matches(_info("m", MOMENT, owner="ann"))
        assert not query.matches(_info("n", MOMENT, owner="ann"))
        assert not query.matches(_info("a", MOMENT + timedelta(microseconds=1)))
        assert not query.matches(_info("l", MOMENT, owner="ann2"))
        assert not query.matches(_info("l", MOMENT))

    def test_updated_before_is_strict(self) -> None:
        query = check_find_conversations(updated_before=MOMENT)
        assert not query.matches(_info("a", MOMENT))
        assert query.matches(_info("a", MOMENT - timedelta(microseconds=1)))

    def test_a_page_of_limit_plus_one_names_its_last_item(self) -> None:
        query = check_find_conversations(limit=2)
        items = [_info(c, MOMENT) for c in ("c", "b", "a")]
        page = query.page(items)
        assert page.items == items[:2]
        assert page.next_cursor is not None
        decoded = decode_conversation_cursor(page.next_cursor, query.fingerprint)
        assert decoded == (MOMENT, "b")
        last = query.page(items[:2])
        assert (last.items, last.next_cursor) == (items[:2], None)


class TestInMemoryListing:
    def test_records_written_at_one_moment_are_listed_by_id_descending(
        self, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        monkeypatch.setattr(chatledger.in_memory, "utc_now", lambda: MOMENT)
        repository = InMemoryChatMemoryRepository()
        ids = [f"c{n:02d}" for n in range(11)]
        for cid in ids:
            repository.append_to_log(cid, [Message.user("hi")])
        expected = sorted(ids, reverse=True)
        assert [i.id for i in _walk(repository, 3)] == expected
        assert {i.updated_at for i in _walk(repository, 3)} == {MOMENT}


def _walk(repository: Any, limit: int, **conditions: Any) -> list[ConversationInfo]:
    items: list[ConversationInfo] = []
    cursor = None
    while True:
        page = repository.find_conversations(cursor=cursor, limit=limit, **conditions)
        items += page.items
        if page.next_cursor is None:
            return items
        cursor = page.next_cursor


_owners = st.sampled_from([None, "ann", "Ann", "bob"])
_values = st.sampled_from([None, True, False, 0, 1, 1.0, "x", "X", ["x"]])
_records = st.lists(
    st.tuples(
        st.integers(0, 5),  # milliseconds: few, so that ties are many
        _owners,
        st.dictionaries(st.sampled_from(["a", "b"]), _values, max_size=2),
    ),
    max_size=25,
)


@settings(max_examples=200, deadline=None)
@given(
    records=_records,
    owner=_owners,
    wanted=st.dictionaries(
        st.sampled_from(["a", "b"]),
        st.sampled_from([None, True, 1, "x"]),
        max_size=1,
    ),
    limit=st.integers(1, 4),
)
def test_a_walk_gives_every_match_once_in_listing_order(
    records: list[tuple[int, str | None, dict[str, Any]]],
    owner: str | None,
    wanted: dict[str, Any],
    limit: int,
) -> None:
    """Any records, any filter, any page size: the walk is the sorted matches."""
    infos = [
        _info(f"c{n:02d}", MOMENT + timedelta(milliseconds=ms), owner=o, metadata=m)
        for n, (ms, o, m) in enumerate(records)
    ]
    expected = sorted(
        (
            i
            for i in infos
            if (owner is None or i.owner == owner)
            and metadata_matches(i.metadata, wanted)
        ),
        key=listing_key,
        reverse=True,
    )
    walked: list[ConversationInfo] = []
    cursor = None
    while True:
        query = check_find_conversations(
            owner=owner, metadata=wanted, cursor=cursor, limit=limit
        )
        page = query.page(
            sorted(
                (i for i in infos if query.matches(i)), key=listing_key, reverse=True
            )[: limit + 1]
        )
        walked += page.items
        if page.next_cursor is None:
            break
        cursor = page.next_cursor
    assert walked == expected
