"""A pytest plugin: LangChain's own chat-history tests, run on ChatLedgerMessageHistory.

Loaded (``-p langchain_suite_plugin``) into a pytest run of the test files of
langchain-core's source distribution, it changes one thing: how the history
under test is built. ``InMemoryChatMessageHistory`` becomes a
:class:`ChatLedgerMessageHistory` on a conversation of its own in the SQL
database or the Redis server that ``CHATLEDGER_SUITE_URL`` names (a table or
key prefix of its own, dropped at the end); ``messages=`` given to it are
added first, two of them are equal when they hold equal messages (the tests
compare a history with one built from the messages expected), and its
docstring is the class's. The suite's ``async def`` tests run in
``asyncio.run``, which pytest-asyncio does for LangChain.
"""

from __future__ import annotations

import asyncio
import inspect
import os
import uuid
from collections.abc import Sequence
from typing import Any

import pytest
from langchain_core import chat_history
from langchain_core.messages import BaseMessage

from chatledger_langchain import ChatLedgerMessageHistory
from chatledger_redis import RedisChatMemoryRepository
from chatledger_sql import SqlChatMemoryRepository


def _repository(url: str) -> SqlChatMemoryRepository | RedisChatMemoryRepository:
    """A store on ``url`` in a table (or under a key prefix) of the run's own."""
    name = f"cl_suite_{uuid.uuid4().hex[:12]}"
    if url.startswith("redis"):
        return RedisChatMemoryRepository.from_url(url, key_prefix=f"{name}:")
    return SqlChatMemoryRepository.from_url(url, table_name=name)


REPOSITORY = _repository(os.environ["CHATLEDGER_SUITE_URL"])


class StoredHistory(ChatLedgerMessageHistory):
    __doc__ = ChatLedgerMessageHistory.__doc__

    def __init__(self, messages: Sequence[BaseMessage] = (), **fields: Any) -> None:
        if fields:
            raise TypeError(f"unexpected fields: {', '.join(fields)}")
        super().__init__(REPOSITORY, f"suite-{uuid.uuid4()}")
        if messages:
            self.add_messages(messages)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, ChatLedgerMessageHistory):
            return NotImplemented
        return self.messages == other.messages

    __hash__ = None  # type: ignore[assignment]


chat_history.InMemoryChatMessageHistory = StoredHistory  # type: ignore[misc,assignment]


@pytest.hookimpl(tryfirst=True)
def pytest_pyfunc_call(pyfuncitem: pytest.Function) -> bool | None:
    """Run a coroutine test function in an event loop of its own."""
    if not inspect.iscoroutinefunction(pyfuncitem.obj):
        return None
    names = pyfuncitem._fixtureinfo.argnames
    arguments = {name: pyfuncitem.funcargs[name] for name in names}
    asyncio.run(pyfuncitem.obj(**arguments))
    return True


def pytest_unconfigure(config: pytest.Config) -> None:
    """Drop the run's table."""
    REPOSITORY.drop_schema()
    REPOSITORY.close()
