"""Conformance tests of removals from a log: taken back atomically, never lost.

A repository with :class:`chatledger.SupportsLogRemoval` must pass them;
others skip them.
"""

from __future__ import annotations

import threading
from typing import Any

import pytest

from chatledger.errors import InvalidMessageError, InvalidPageError
from chatledger.messages import Message, Role
from chatledger.repository import SupportsLogRemoval
from chatledger.tokens import estimate_tokens
from chatledger.window import MessageWindow, TokenWindow

__all__ = ["LogRemovalTests"]


def _removal(repository: Any) -> Any:
    if not isinstance(repository, SupportsLogRemoval):
        pytest.skip("the repository removes nothing on request (SupportsLogRemoval)")
    return repository


def _ids(messages: list[Message]) -> list[str]:
    return [m.id for m in messages]


def _page_ids(repository: Any, conversation_id: str) -> list[str]:
    ids: list[str] = []
    cursor = None
    while True:
        page = repository.find_messages_page(
            conversation_id, cursor, limit=3, newest_first=False
        )
        ids += _ids(page.messages)
        if page.next_cursor is None:
            return ids
        cursor = page.next_cursor


class LogRemovalTests:
    """Removals take messages back atomically; nothing else moves."""

    def test_remove_newest_takes_the_newest_back(self, repository: Any) -> None:
        """The newest messages come back oldest first and leave every read."""
        log = _removal(repository)
        sent = [Message.user(f"m{n}") for n in range(6)]
        log.append_to_log("popped", sent[:4])
        log.append_to_log("popped", sent[4:])
        assert _ids(log.remove_newest("popped")) == [sent[5].id]
        assert _ids(log.remove_newest("popped", 2)) == _ids(sent[3:5])
        assert _ids(log.find_by_conversation_id("popped")) == _ids(sent[:3])
        assert _page_ids(log, "popped") == _ids(sent[:3])
        assert _ids(log.find_window("popped", MessageWindow(2))) == _ids(sent[1:3])

    def test_removing_everything_empties_the_conversation(
        self, repository: Any
    ) -> None:
        """Asked for more than it holds, a log gives all; it is listed no more."""
        log = _removal(repository)
        sent = [Message.user("a"), Message.assistant("b")]
        log.append_to_log("emptied", sent)
        assert _ids(log.remove_newest("emptied", 5)) == _ids(sent)
        assert log.find_by_conversation_id("emptied") == []
        assert "emptied" not in log.find_conversation_ids()
        assert log.remove_newest("emptied") == []
        assert log.remove_newest("never-stored") == []
        assert log.remove_messages("never-stored", ["x"]) == []

    def test_remove_messages_takes_the_ids_it_holds(self, repository: Any) -> None:
        """Named ids go, in log order; unknown ids are ignored."""
        log = _removal(repository)
        sent = [Message.user(f"m{n}") for n in range(5)]
        log.append_to_log("named", sent)
        removed = log.remove_messages("named", [sent[3].id, "unknown", sent[1].id])
        assert _ids(removed) == [sent[1].id, sent[3].id]
        assert removed[0] == sent[1]
        left = [sent[0], sent[2], sent[4]]
        assert _ids(log.find_by_conversation_id("named")) == _ids(left)
        assert log.remove_messages("named", []) == []

    def test_a_removed_id_can_be_stored_again(self, repository: Any) -> None:
        """Removed ids are forgotten: appended again, the message goes last."""
        log = _removal(repository)
        first, second = Message.user("first"), Message.user("second")
        log.append_to_log("again", [first, second])
        log.remove_messages("again", [first.id])
        assert _ids(log.append_to_log("again", [first]).appended) == [first.id]
        assert _ids(log.find_by_conversation_id("again")) == [second.id, first.id]

    def test_removing_the_current_system_message_shows_the_one_before(
        self, repository: Any
    ) -> None:
        """Rule 1 over what is left: the superseded system message is current again."""
        log = _removal(repository)
        old, also = Message.system("be brief"), Message.system("use French")
        new, question = Message.system("be kind"), Message.user("hi")
        log.append_to_log("system", [Message.system("first")])
        log.append_to_log("system", [old, question, also])
        log.append_to_log("system", [new])
        window = TokenWindow(1000, estimate_tokens)
        assert _ids(log.find_window("system", window)) == [question.id, new.id]
        assert _ids(log.remove_newest("system")) == [new.id]
        shown = [old.id, question.id, also.id]
        assert _ids(log.find_window("system", window)) == shown
        assert _ids(log.find_window("system", MessageWindow(5))) == shown
        # An equal system message is stored again: the removed one is gone.
        assert _ids(log.append_to_log("system", [new]).appended) == [new.id]

    def test_removals_racing_appends_lose_nothing(self, repository: Any) -> None:
        """Pops race appends: each message is popped once or still stored."""
        log = _removal(repository)
        appenders, appends, poppers, pops = 3, 20, 2, 15
        sent: list[str] = []
        popped: list[str] = []
        failures: list[BaseException] = []
        lock = threading.Lock()

        def append(writer: int) -> None:
            try:
                for n in range(appends):
                    message = Message.user(f"w{writer}-{n}", id=f"w{writer}-{n}")
                    log.append_to_log("raced", [message])
                    with lock:
                        sent.append(message.id)
            except BaseException as error:  # reported below
                failures.append(error)

        def pop() -> None:
            try:
                for _ in range(pops):
                    got = _ids(log.remove_newest("raced"))
                    with lock:
                        popped.extend(got)
            except BaseException as error:  # reported below
                failures.append(error)

        threads = [threading.Thread(target=append, args=(w,)) for w in range(appenders)]
        threads += [threading.Thread(target=pop) for _ in range(poppers)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        assert failures == []
        stored = _ids(log.find_by_conversation_id("raced"))
        assert len(popped) == len(set(popped)), "a message was popped twice"
        assert not set(popped) & set(stored), "a popped message is still stored"
        assert sorted(popped + stored) == sorted(sent), "a message was lost"
        for writer in range(appenders):
            mine = [i for i in stored if i.startswith(f"w{writer}-")]
            assert mine == sorted(mine, key=lambda i: int(i.split("-")[1]))

    def test_bad_removals_fail_before_any_io(self, repository: Any) -> None:
        """A bad count or id list raises and removes nothing."""
        log = _removal(repository)
        kept = Message.user("kept")
        log.append_to_log("kept", [kept])
        for count in (0, -1, True, "1", 10**9):
            with pytest.raises(InvalidPageError):
                log.remove_newest("kept", count)
        for ids in ("abc", [1], [""], None):
            with pytest.raises(InvalidMessageError):
                log.remove_messages("kept", ids)
        assert _ids(log.find_by_conversation_id("kept")) == [kept.id]
        assert [m.role for m in log.find_by_conversation_id("kept")] == [Role.USER]
