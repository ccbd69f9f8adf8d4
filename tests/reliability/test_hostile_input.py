"""Hostile and odd input on every backend: an early clear error, or an exact round trip.

The conformance suite already checks bad and odd ids through ``save_all``,
``find`` and ``delete``, the unicode corpus, 1 MB and metadata types through
``save_all``, and bad batches through ``save_all``. These tests extend that to
the atomic append path (a different code path on every adapter), to the size
and depth limits, and to names that reach a query.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from chatledger import (
    InvalidConversationIdError,
    InvalidMessageError,
    InvalidNameError,
    Message,
    MessageTooLargeError,
)
from chatledger.messages import MAX_METADATA_DEPTH
from chatledger.testing.samples import (
    BAD_CONVERSATION_IDS,
    ODD_CONVERSATION_IDS,
    UNICODE_CORPUS,
)
from chatledger.window import MessageWindow
from tests.reliability.probes import no_io
from tests.reliability.workload import Target

WINDOW = MessageWindow(1000)


@pytest.fixture
def repository(target: Target) -> Iterator[Any]:
    """A repository of the backend under test, closed afterwards."""
    built = target.build()
    try:
        yield built
    finally:
        close = getattr(built, "close", None)
        if callable(close):
            close()


def _append(repository: Any, conversation: str, messages: Any) -> Any:
    return repository.append_to_window(conversation, messages, WINDOW)


def _ids(messages: list[Message]) -> list[str]:
    return [m.id for m in messages]


class TestHostileInput:
    """Each case either fails before any I/O, changing nothing, or round-trips."""

    @pytest.mark.parametrize("bad_id", BAD_CONVERSATION_IDS, ids=repr)
    def test_bad_ids_are_rejected_by_the_append(
        self, repository: Any, bad_id: Any
    ) -> None:
        _append(repository, "existing", [Message.user("x")])
        with no_io(repository), pytest.raises(InvalidConversationIdError):
            _append(repository, bad_id, [Message.user("y")])
        assert repository.find_conversation_ids() == ["existing"]
        assert len(repository.find_by_conversation_id("existing")) == 1

    @pytest.mark.parametrize(
        "bad_batch",
        [
            None,
            "text",
            b"bytes",
            {"role": "user"},
            [Message.user("a"), None, Message.user("b")],
            [Message.user("a"), "b"],
            42,
        ],
        ids=[
            "none",
            "text",
            "bytes",
            "dict",
            "none-among-messages",
            "str-after-message",
            "int",
        ],
    )
    def test_bad_batches_are_rejected_by_the_append(
        self, repository: Any, bad_batch: Any
    ) -> None:
        before = [Message.user("u"), Message.assistant("a")]
        _append(repository, "c", before)
        with no_io(repository), pytest.raises(InvalidMessageError):
            _append(repository, "c", bad_batch)
        assert _ids(repository.find_by_conversation_id("c")) == _ids(before)

    def test_a_batch_repeating_an_id_is_rejected_whole(self, repository: Any) -> None:
        message = Message.user("twice")
        with no_io(repository), pytest.raises(InvalidMessageError):
            _append(repository, "dup", [Message.user("first"), message, message])
        assert repository.find_conversation_ids() == []

    def test_an_empty_append_touches_nothing(self, repository: Any) -> None:
        with no_io(repository):
            result = _append(repository, "empty", [])
        assert result.appended == []
        assert result.evicted_ids == []
        assert repository.find_conversation_ids() == []

    def test_odd_ids_stay_isolated_on_the_append_path(self, repository: Any) -> None:
        for conversation in ODD_CONVERSATION_IDS:
            _append(repository, conversation, [Message.user(conversation)])
        assert sorted(repository.find_conversation_ids()) == sorted(
            ODD_CONVERSATION_IDS
        )
        for pattern in ("a*", "a?", "[x]", "100%", "a_b", "{t}"):
            repository.delete_by_conversation_id(pattern)
        remaining = set(ODD_CONVERSATION_IDS) - {
            "a*",
            "a?",
            "[x]",
            "100%",
            "a_b",
            "{t}",
        }
        assert set(repository.find_conversation_ids()) == remaining
        for conversation in remaining:
            found = repository.find_by_conversation_id(conversation)
            assert [m.content for m in found] == [conversation]

    @pytest.mark.parametrize(
        "conversation",
        ["k" * 255, "é" * 127 + "k", "😀" * 63 + "abc", "會" * 85],
        ids=["255 ascii", "255 two-byte", "255 four-byte", "255 three-byte"],
    )
    def test_ids_of_exactly_255_bytes_round_trip(
        self, repository: Any, conversation: str
    ) -> None:
        assert len(conversation.encode()) == 255
        _append(repository, conversation, [Message.user("at the limit")])
        assert repository.find_conversation_ids() == [conversation]
        assert repository.find_by_conversation_id(conversation)[0].content == (
            "at the limit"
        )
        with no_io(repository), pytest.raises(InvalidConversationIdError):
            _append(repository, conversation + "k", [Message.user("over")])

    def test_unicode_corpus_round_trips_on_the_append_path(
        self, repository: Any
    ) -> None:
        batch = [Message.user(text) for text in UNICODE_CORPUS]
        batch += [Message.assistant(text) for text in UNICODE_CORPUS]
        _append(repository, "unicode", batch)
        found = repository.find_by_conversation_id("unicode")
        assert [m.content for m in found] == [m.content for m in batch]
        assert _ids(found) == _ids(batch)

    def test_nul_and_controls_round_trip_everywhere_in_a_message(
        self, repository: Any
    ) -> None:
        odd = "a\x00b\x01\x1f\x7f\u2028\ufeff"
        message = Message.user(
            odd, metadata={odd: [odd, {"k": odd}]}, id="id ' \" % _ * 😀"
        )
        _append(repository, "nul", [message])
        found = repository.find_by_conversation_id("nul")
        assert found == [message]
        assert found[0].id == message.id
        assert found[0].metadata == message.metadata

    def test_one_megabyte_round_trips_on_the_append_path(self, repository: Any) -> None:
        text = "0123456789abcdef" * 65536 + "é😀\x00"
        _append(repository, "big", [Message.user(text)])
        assert repository.find_by_conversation_id("big")[0].content == text

    @pytest.mark.parametrize("how", ["append", "save_all"])
    def test_sixteen_megabytes_round_trip_or_fail_before_writing(
        self, repository: Any, how: str
    ) -> None:
        before = [Message.user("before"), Message.assistant("kept")]
        repository.save_all("huge", before)
        text = "x" * (16 * 1024 * 1024) + "é"
        huge = Message.user(text)
        try:
            if how == "append":
                _append(repository, "huge", [huge])
            else:
                repository.save_all("huge", [*before, huge])
        except MessageTooLargeError:
            assert _ids(repository.find_by_conversation_id("huge")) == _ids(before)
            return
        found = repository.find_by_conversation_id("huge")
        assert _ids(found) == [*_ids(before), huge.id]
        assert found[-1].content == text

    def test_metadata_at_the_depth_limit_round_trips(self, repository: Any) -> None:
        """The deepest metadata the model accepts (dicts and lists) is stored."""
        deep: Any = "bottom"
        for level in range(MAX_METADATA_DEPTH - 2):
            deep = [deep] if level % 2 else {"d": deep}
        message = Message.user("deep", metadata={"d": deep})
        with pytest.raises(InvalidMessageError):
            Message.user("deeper", metadata={"d": [deep]})
        _append(repository, "deep", [message])
        found = repository.find_by_conversation_id("deep")[0]
        assert found.metadata == message.metadata

    def test_metadata_numbers_keep_their_types_on_the_append_path(
        self, repository: Any
    ) -> None:
        values = {
            "above 2^53": 2**53 + 1,
            "huge": 10**30,
            "negative huge": -(10**30),
            "tenth": 0.1,
            "tiny": 5e-324,
            "negative zero": -0.0,
            "true": True,
            "false": False,
            "null": None,
            "one": 1,
            "one float": 1.0,
            "lists": [[1, [2.5, [True, None]]], []],
            "$set": "operator key",
            "a.b": "dotted key",
            "": "empty key",
        }
        _append(repository, "numbers", [Message.user("n", metadata=values)])
        found = repository.find_by_conversation_id("numbers")[0].metadata
        for key, value in values.items():
            assert type(found[key]) is type(value) or (
                isinstance(value, list) and isinstance(found[key], tuple)
            ), key
            assert found[key] == value, key
        assert str(found["negative zero"]) == "-0.0"


#: The constructor option that names what reaches a query, per backend.
NAME_OPTIONS = {
    "sqlite": "table_name",
    "duckdb": "table_name",
    "postgresql": "table_name",
    "mariadb": "table_name",
    "redis": "key_prefix",
    "mongodb": "collection",
    "cassandra": "table",
    "neo4j": "conversation_label",
}
HOSTILE_NAMES = [
    "msg; DROP TABLE x",
    'a"b',
    "a`b",
    "x'--",
    "t\n",
    "",
    "a b",
    "{tag}",
    "ü",
    "a\x00b",
]
#: Names only a table name (SQL or Cassandra) must refuse.
HOSTILE_SQL_NAMES = ["schema.table", "a" * 64, "1abc", "a-b"]
#: The options that name a table.
TABLE_OPTIONS = ("table_name", "table")


class TestHostileNames:
    """Names that reach a query are refused at construction, before any I/O."""

    @pytest.mark.parametrize("name", HOSTILE_NAMES + HOSTILE_SQL_NAMES, ids=repr)
    def test_hostile_store_names_are_rejected(self, target: Target, name: str) -> None:
        option = NAME_OPTIONS.get(target.name)
        if option is None:
            pytest.skip(f"{target.name}: no name reaches a query")
        if name in HOSTILE_SQL_NAMES and option not in TABLE_OPTIONS:
            pytest.skip(f"{name!r} is a valid {option} on {target.name}")
        hostile = Target(
            target.name, target.factory, target.args, {**target.kwargs, option: name}
        )
        with pytest.raises(InvalidNameError):
            hostile.build()
        # Nothing was created: a store under the real name is still empty.
        repository = target.build()
        try:
            assert repository.find_conversation_ids() == []
        finally:
            repository.close()
