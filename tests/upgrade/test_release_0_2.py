"""Stores that release 0.2 wrote, opened by this release: nothing lost, nothing twice.

Release 0.2 kept only each conversation's window; this release keeps each
as a log and reads the window as a view of it. On every backend, a store 0.2
wrote (:mod:`tests.upgrade.stores`) must:

- read back exactly as 0.2 returned it (ids and ``created_at`` too), whole,
  page by page in both directions, as a window view and through a memory;
- take appends that continue its sequence: a retry of a message 0.2 stored
  or evicted changes nothing, the new messages follow the old ones, and the
  window shows what the same history shows in the in-memory repository;
- be upgraded once, and safely, by two processes that open it at the same
  moment, or that run ``chatledger migrate`` on it at the same moment; then
  ``migrate`` finds it current.
"""

from __future__ import annotations

import contextlib
import io
import json
import logging
from typing import Any

import pytest

from chatledger import (
    InMemoryChatMemoryRepository,
    Message,
    MessageWindow,
    MessageWindowChatMemory,
    SupportsCountMessages,
    SupportsLog,
    TokenWindow,
    TokenWindowChatMemory,
    Window,
)
from chatledger.cli import main as command
from chatledger.cli.stores import close, open_store
from chatledger.connect import redact_url
from chatledger.tokens import estimate_tokens
from tests.upgrade.racing import RacingPair
from tests.upgrade.stores import Conversation, Store, Written
from tests.upgrade.targets import TARGETS

#: Page size of the walks through a log: several pages per conversation.
PAGE = 3


@pytest.fixture(scope="module", params=list(TARGETS))
def target(request: pytest.FixtureRequest) -> str:
    name: str = request.param
    return name


def _window(spec: dict[str, Any]) -> Window:
    if spec["kind"] == "messages":
        return MessageWindow(spec["limit"])
    return TokenWindow(spec["limit"], estimate_tokens, spec["counter_id"])


def _memory(repository: Any, spec: dict[str, Any]) -> Any:
    if spec["kind"] == "messages":
        return MessageWindowChatMemory(repository, max_messages=spec["limit"])
    return TokenWindowChatMemory(
        repository, spec["limit"], estimate_tokens, spec["counter_id"]
    )


def _exact(messages: list[Message]) -> list[tuple[str, Any, Message]]:
    """What must read back: the message, its id and its ``created_at``."""
    return [(m.id, m.created_at, m) for m in messages]


def _walk(repository: SupportsLog, cid: str, *, newest_first: bool) -> list[Message]:
    """The whole log, a few messages a page, oldest first whichever way read."""
    walked: list[Message] = []
    cursor = None
    while True:
        page = repository.find_messages_page(cid, cursor, PAGE, newest_first)
        walked += page.messages
        if page.next_cursor is None:
            return walked[::-1] if newest_first else walked
        cursor = page.next_cursor


def _opened(store: Store) -> Any:
    """The store opened as an application opens it (creating what is missing)."""
    return open_store(store.url, store.options)


def _migrate(store: Store) -> tuple[int, str]:
    """``chatledger migrate`` on the store, in this process."""
    options = [
        f"{key}={value if isinstance(value, str) else json.dumps(value)}"
        for key, value in store.options.items()
    ]
    given = ["migrate", store.url, *(a for o in options for a in ("-o", o))]
    shown = io.StringIO()
    root = logging.getLogger()
    handlers = list(root.handlers)
    try:
        with contextlib.redirect_stdout(shown):
            code = command(given)
    finally:
        root.handlers[:] = handlers  # the command sets up logging its way
    return code, shown.getvalue()


def _current(store: Store) -> str:
    """What ``migrate`` prints on a store with nothing left to change."""
    where = redact_url(store.url)
    if store.target.changes is None:
        return (
            f"{where}: already current: this backend keeps no schema to upgrade "
            "(every release reads its stores as they are)\n"
        )
    return f"{where}: already current\n"


def test_every_message_0_2_kept_reads_back(
    release_0_2_stores: Written, target: str
) -> None:
    store = release_0_2_stores.store(target, "read")
    repository = _opened(store)
    try:
        assert sorted(repository.find_conversation_ids()) == store.ids
        assert "deleted" not in store.ids
        for cid, conversation in store.conversations.items():
            kept = _exact(conversation.kept)
            assert kept, cid
            window = _window(conversation.window)
            assert _exact(repository.find_by_conversation_id(cid)) == kept, cid
            assert _exact(_walk(repository, cid, newest_first=False)) == kept, cid
            assert _exact(_walk(repository, cid, newest_first=True)) == kept, cid
            assert _exact(repository.find_window(cid, window)) == kept, cid
            memory = _memory(repository, conversation.window)
            assert _exact(memory.get(cid)) == kept, cid
            if isinstance(repository, SupportsCountMessages):
                assert repository.count_messages(cid) == len(kept), cid
    finally:
        close(repository)


def _reference(conversation: Conversation) -> InMemoryChatMemoryRepository:
    """The same history in the in-memory repository, written whole as 0.2's is."""
    reference = InMemoryChatMemoryRepository()
    reference.save_all("c", conversation.kept)
    return reference


def _ids(messages: list[Message]) -> list[str]:
    return [m.id for m in messages]


def test_appends_continue_where_0_2_stopped(
    release_0_2_stores: Written, target: str
) -> None:
    store = release_0_2_stores.store(target, "append")
    repository = _opened(store)
    try:
        for cid, conversation in store.conversations.items():
            _continue(repository, cid, conversation)
    finally:
        close(repository)


def _continue(repository: Any, cid: str, conversation: Conversation) -> None:
    kept = conversation.kept
    window = _window(conversation.window)
    reference = _reference(conversation)
    # A retry of what 0.2 stored, and of what its appends evicted, is a no-op.
    assert repository.append_to_log(cid, kept, window).appended == [], cid
    evicted = set(conversation.evicted)
    gone = [m for m in conversation.given if m.id in evicted]
    assert repository.append_to_log(cid, gone, window).appended == [], cid
    shown_system = [m for m in kept if m.role.value == "system"]
    if shown_system:
        again = Message.system(shown_system[-1].content or "")
        assert repository.append_to_log(cid, [again], window).appended == [], cid
    assert _exact(_walk(repository, cid, newest_first=False)) == _exact(kept), cid
    # New messages follow, a changed system message among them.
    batches = [
        [Message.user(f"after 0.2: {cid}"), Message.assistant("continued")],
        [Message.system("A system message of this release."), Message.user("and?")],
        [Message.assistant("the view shows it")],
    ]
    added: list[Message] = []
    for batch in batches:
        appended = repository.append_to_log(cid, batch, window).appended
        assert _ids(appended) == _ids(batch), cid
        assert _ids(reference.append_to_log("c", batch, window).appended) == _ids(batch)
        added += appended
    memory = _memory(repository, conversation.window)
    through_memory = [Message.user("through the memory"), Message.assistant("yes")]
    assert _ids(memory.add(cid, through_memory).appended) == _ids(through_memory)
    _memory(reference, conversation.window).add("c", through_memory)
    log = _walk(repository, cid, newest_first=False)
    assert _ids(log) == _ids([*kept, *added, *through_memory]), cid
    assert _exact(log[: len(kept) + len(added)]) == _exact([*kept, *added]), cid
    assert _exact(repository.find_by_conversation_id(cid)) == _exact(log), cid
    assert _ids(repository.find_window(cid, window)) == _ids(
        reference.find_window("c", window)
    ), cid
    assert _ids(memory.get(cid)) == _ids(reference.find_window("c", window)), cid


def test_two_processes_open_a_0_2_store_at_once(
    release_0_2_stores: Written, target: str, racing_pair: RacingPair
) -> None:
    store = release_0_2_stores.store(target, "raced_open")
    expected = {cid: _ids(c.kept) for cid, c in store.conversations.items()}
    for opened in racing_pair.run("open", store.url, store.options):
        assert opened.code == 0, opened.err
        assert json.loads(opened.out) == expected
    assert _migrate(store) == (0, _current(store))


def test_two_migrations_of_a_0_2_store_at_once(
    release_0_2_stores: Written, target: str, racing_pair: RacingPair
) -> None:
    store = release_0_2_stores.store(target, "raced_migrate")
    where = redact_url(store.url)
    made: list[str] = []
    for migrated in racing_pair.run("migrate", store.url, store.options):
        assert migrated.code == 0, migrated.err
        *changes, summary = migrated.out.splitlines()
        made += changes
        if not changes:
            assert f"{summary}\n" == _current(store)
        elif len(changes) == 1:
            assert summary == f"{where}: upgraded (1 change)"
        else:
            assert summary == f"{where}: upgraded ({len(changes)} changes)"
    expected = store.target.changes
    # Each change made once, by one of the two, and said by the one that made it.
    assert sorted(made) == sorted(
        [] if expected is None else expected(store.url, store.options)
    )
    assert _migrate(store) == (0, _current(store))
    repository = open_store(store.url, store.options, create=False)
    try:
        for cid, conversation in store.conversations.items():
            found = repository.find_by_conversation_id(cid)
            assert _exact(found) == _exact(conversation.kept), cid
    finally:
        close(repository)
