"""A LangChain agent's memory, kept by chatledger: middleware for ``create_agent``.

Example:
    from langchain.agents import create_agent
    from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
    from langchain_core.messages import AIMessage

    from chatledger import MessageWindowChatMemory, connect
    from chatledger_langchain import ChatLedgerMiddleware

    memory = MessageWindowChatMemory(connect("sqlite:///agent.db"), max_messages=40)
    model = GenericFakeChatModel(messages=iter([AIMessage("Hello!")]))  # a chat model
    agent = create_agent(model, middleware=[ChatLedgerMiddleware(memory)])
    agent.invoke(
        {"messages": [{"role": "user", "content": "Hi"}]},
        {"configurable": {"conversation_id": "user-42"}},
    )
    memory.get("user-42")   # the question and the answer, stored in one append

What one run does, with the conversation named by ``config["configurable"]
["conversation_id"]``, else by LangGraph's ``thread_id``:

- Before the agent runs, the memory's window (its view of the stored
  conversation, system messages first) is put ahead of the new input in the
  agent's ``messages``; the model sees the window and the input. The new
  input is what the run was given, less what is stored: a message the
  window holds (by id), what comes before it (a graph that keeps every
  message hands the agent its whole thread), and, with a checkpointer, what
  earlier runs on the thread stored.
- After a run that ends normally, the new input and every message the run
  added (the model's replies, tool calls and tool results) are stored in one
  ``memory.add``: one atomic append, so concurrent runs on a conversation
  lose nothing, and no message is stored twice (the window's messages keep
  their stored ids and are left out).
- A run that fails or is interrupted (an exception, ``KeyboardInterrupt``, a
  cancelled task) stores nothing, or its new input alone with
  ``on_error="keep_prompt"``, as ``memory.turn(..., on_error=...)`` does; the
  exception propagates. A run paused by LangGraph's ``interrupt()`` (human
  in the loop) stores nothing until it is resumed and ends.

Put it first in ``middleware=[...]``: its hooks then run before the others'
before the agent, after theirs after it, and around theirs at each model and
tool call, where it sees every failure of a call. A sync memory serves
``invoke`` and ``ainvoke`` (in a thread), an async memory
(``AsyncMessageWindowChatMemory``) ``ainvoke`` and ``astream``.

With a LangGraph checkpointer, the thread's state is replaced by the window
at the start of each run, so the model sees the window and not the whole
thread; what a failed run left in the thread's state is the next run's input
on that thread, as LangGraph makes it.
"""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import Awaitable, Callable, Sequence
from typing import Annotated, Any, Literal, NotRequired, TypedDict, get_args

from langchain.agents.middleware import AgentMiddleware, AgentState
from langchain.agents.middleware.types import (
    ModelRequest,
    ModelResponse,
    OmitFromSchema,
)
from langchain_core.messages import AnyMessage, BaseMessage, RemoveMessage, ToolMessage
from langgraph.config import get_config
from langgraph.errors import GraphBubbleUp
from langgraph.graph.message import REMOVE_ALL_MESSAGES
from langgraph.prebuilt.tool_node import ToolCallRequest
from langgraph.runtime import Runtime
from langgraph.types import Command

from chatledger import (
    InvalidConversationIdError,
    InvalidMessageError,
    Message,
    Turn,
    validate_conversation_id,
)
from chatledger_langchain.convert import from_langchain, to_langchain

__all__ = ["ChatLedgerMiddleware", "ChatLedgerState", "OnError", "TurnRecord"]

#: The state key of the middleware's own record of the run.
TURN_KEY = "chatledger_turn"

#: What a failed run stores, as ``memory.turn(on_error=...)``: nothing, or
#: its new input.
OnError = Literal["discard", "keep_prompt"]


class TurnRecord(TypedDict):
    """What the middleware keeps in the agent's state between its hooks.

    It lives in the state, not in the middleware, so that a run resumed
    after an interrupt (in another process, maybe) stores the same turn.

    Attributes:
        conversation_id: The conversation the run reads and stores.
        stored_ids: The ids of the state's messages the conversation holds.
        prompt_ids: The ids of the new input, to store when a run fails
            with ``on_error="keep_prompt"``.
    """

    conversation_id: str
    stored_ids: list[str]
    prompt_ids: list[str]


class ChatLedgerState(AgentState[Any]):
    """The agent state with the middleware's record, kept out of input and output."""

    chatledger_turn: NotRequired[
        Annotated[TurnRecord, OmitFromSchema(input=True, output=True)]
    ]


def _conversation_id() -> str:
    """The run's ``conversation_id``, else its ``thread_id``, from its config."""
    configurable = get_config().get("configurable") or {}
    for key in ("conversation_id", "thread_id"):
        value = configurable.get(key)
        if value is not None:
            return validate_conversation_id(value)
    raise InvalidConversationIdError(
        "ChatLedgerMiddleware needs the conversation: invoke the agent with "
        'config={"configurable": {"conversation_id": ...}} (or a LangGraph '
        '"thread_id")'
    )


def _is_async_memory(memory: object) -> bool:
    methods = [getattr(memory, name, None) for name in ("get", "add")]
    if not all(callable(method) for method in methods):
        raise TypeError(
            "memory must be a chatledger memory (get and add, such as "
            f"MessageWindowChatMemory), not {type(memory).__name__}"
        )
    kinds = {inspect.iscoroutinefunction(method) for method in methods}
    if len(kinds) > 1:
        raise TypeError(
            f"{type(memory).__name__}'s get and add must both be coroutine "
            "functions (an async memory) or neither"
        )
    return kinds == {True}


class _Begun:
    """The start of a run before the read: its conversation and new input."""

    def __init__(self, state: dict[str, Any]) -> None:
        self.conversation_id = _conversation_id()
        record = state.get(TURN_KEY)
        stored: set[str] = set()
        if record is not None and record["conversation_id"] == self.conversation_id:
            stored = set(record["stored_ids"])
        self.given = [m for m in state["messages"] if m.id not in stored]
        # Converted now, so that a message chatledger cannot store is refused
        # before any I/O.
        self.prompt = from_langchain(self.given)

    def _unstored(self, window: Sequence[Message]) -> list[Message]:
        """The new input: what follows the last message the window holds.

        A graph that keeps every message (a parent graph's checkpoint) hands
        the agent the whole thread: what the window holds is stored, and so
        is what came before it, which the window left behind.
        """
        stored = {m.id: m for m in window}
        last = -1
        for index, message in enumerate(self.prompt):
            known = stored.get(message.id)
            if known is None:
                continue
            if known != message:
                raise InvalidMessageError(
                    f"input message {index} reuses the id {message.id!r} of a "
                    "different stored message"
                )
            last = index
        return [m for m in self.prompt[last + 1 :] if m.id not in stored]

    def update(self, window: Sequence[Message]) -> dict[str, Any]:
        """The state update that puts ``window`` ahead of the new input."""
        turn = Turn(self.conversation_id, window, self._unstored(window))
        fresh = {m.id for m in turn.prompt}
        given: dict[str | None, list[BaseMessage]] = {}
        for message in self.given:
            given.setdefault(message.id, []).append(message)
        messages: list[BaseMessage] = []
        stored_ids: list[str] = []
        for message in turn.messages:
            if message.id in fresh:
                messages.extend(given[message.id])
            else:
                messages.extend(to_langchain([message], stored_ids=True))
                stored_ids.append(message.id)
        record: TurnRecord = {
            "conversation_id": self.conversation_id,
            "stored_ids": stored_ids,
            "prompt_ids": [m.id for m in turn.prompt],
        }
        return {
            "messages": [RemoveMessage(id=REMOVE_ALL_MESSAGES), *messages],
            TURN_KEY: record,
        }


def _ended(state: dict[str, Any]) -> tuple[str, list[Message], dict[str, Any]] | None:
    """What a run that ended stores, and the record that says it is stored."""
    record = state.get(TURN_KEY)
    if record is None:
        return None
    stored = set(record["stored_ids"])
    messages: list[AnyMessage] = state["messages"]
    batch = from_langchain([m for m in messages if m.id not in stored])
    done: TurnRecord = {
        "conversation_id": record["conversation_id"],
        "stored_ids": [m.id for m in messages if m.id is not None],
        "prompt_ids": [],
    }
    return record["conversation_id"], batch, {TURN_KEY: done}


def _prompt_of(state: dict[str, Any]) -> tuple[str, list[Message]] | None:
    """The conversation and the new input of a failing run, as its state holds them."""
    record = state.get(TURN_KEY)
    if record is None or not record["prompt_ids"]:
        return None
    wanted = set(record["prompt_ids"])
    prompt = [m for m in state["messages"] if m.id in wanted]
    return record["conversation_id"], from_langchain(prompt)


class ChatLedgerMiddleware(AgentMiddleware[ChatLedgerState, Any]):
    """Conversation memory for an agent made with ``create_agent``.

    See :mod:`chatledger_langchain.middleware` for what a run reads and
    stores.

    Args:
        memory: A chatledger memory (``MessageWindowChatMemory``,
            ``TokenWindowChatMemory``) or an async one (their ``Async``
            twins): its window is what the model sees of the conversation.
        on_error: What a failed or interrupted run stores: nothing
            (``"discard"``) or its new input (``"keep_prompt"``).

    Raises:
        TypeError: ``memory`` has no ``get`` and ``add``.
        ValueError: an unknown ``on_error``.
    """

    state_schema = ChatLedgerState

    def __init__(self, memory: Any, *, on_error: OnError = "discard") -> None:
        """Keep each run's conversation in ``memory``."""
        super().__init__()
        if on_error not in get_args(OnError):
            raise ValueError(
                f"on_error must be 'discard' or 'keep_prompt', not {on_error!r}"
            )
        self.on_error = on_error
        self._async = _is_async_memory(memory)
        self.memory = memory
        self.tools = []

    def __repr__(self) -> str:
        return f"ChatLedgerMiddleware({self.memory!r}, on_error={self.on_error!r})"

    def _sync_memory(self) -> Any:
        if self._async:
            raise TypeError(
                "ChatLedgerMiddleware has an async memory: run the agent with "
                "ainvoke or astream, or give it a sync memory"
            )
        return self.memory

    async def _call(self, method: str, *args: Any) -> Any:
        call = getattr(self.memory, method)
        if self._async:
            awaitable: Awaitable[Any] = call(*args)
            return await awaitable
        return await asyncio.to_thread(call, *args)

    # Before and after the agent: read the window, store the turn.

    def before_agent(
        self, state: ChatLedgerState, runtime: Runtime[Any]
    ) -> dict[str, Any] | None:
        """Put the conversation's window ahead of the new input."""
        memory = self._sync_memory()
        begun = _Begun(dict(state))
        return begun.update(memory.get(begun.conversation_id))

    async def abefore_agent(
        self, state: ChatLedgerState, runtime: Runtime[Any]
    ) -> dict[str, Any] | None:
        """Put the conversation's window ahead of the new input."""
        begun = _Begun(dict(state))
        return begun.update(await self._call("get", begun.conversation_id))

    def after_agent(
        self, state: ChatLedgerState, runtime: Runtime[Any]
    ) -> dict[str, Any] | None:
        """Store the new input and what the run added, in one append."""
        memory = self._sync_memory()
        ended = _ended(dict(state))
        if ended is None:
            return None
        conversation_id, batch, update = ended
        if batch:
            memory.add(conversation_id, batch)
        return update

    async def aafter_agent(
        self, state: ChatLedgerState, runtime: Runtime[Any]
    ) -> dict[str, Any] | None:
        """Store the new input and what the run added, in one append."""
        ended = _ended(dict(state))
        if ended is None:
            return None
        conversation_id, batch, update = ended
        if batch:
            await self._call("add", conversation_id, batch)
        return update

    # Around each model and tool call: a failure ends the run.

    def _keep_prompt(self, state: dict[str, Any]) -> None:
        found = _prompt_of(state) if self.on_error == "keep_prompt" else None
        if found is not None and found[1]:
            self._sync_memory().add(*found)

    async def _akeep_prompt(self, state: dict[str, Any]) -> None:
        found = _prompt_of(state) if self.on_error == "keep_prompt" else None
        if found is not None and found[1]:
            await self._call("add", *found)

    def wrap_model_call(
        self,
        request: ModelRequest[Any],
        handler: Callable[[ModelRequest[Any]], ModelResponse[Any]],
    ) -> ModelResponse[Any]:
        """Call the model; when it fails, keep the prompt if asked, and re-raise."""
        try:
            return handler(request)
        except GraphBubbleUp:
            raise  # a pause or a jump of LangGraph's, not a failure
        except BaseException:
            # A write error raised here carries the call's as its __context__.
            self._keep_prompt(dict(request.state))
            raise

    async def awrap_model_call(
        self,
        request: ModelRequest[Any],
        handler: Callable[[ModelRequest[Any]], Awaitable[ModelResponse[Any]]],
    ) -> ModelResponse[Any]:
        """Call the model; when it fails, keep the prompt if asked, and re-raise."""
        try:
            return await handler(request)
        except GraphBubbleUp:
            raise
        except BaseException:
            await self._akeep_prompt(dict(request.state))
            raise

    def wrap_tool_call(
        self,
        request: ToolCallRequest,
        handler: Callable[[ToolCallRequest], ToolMessage | Command[Any]],
    ) -> ToolMessage | Command[Any]:
        """Call the tool; when it fails, keep the prompt if asked, and re-raise."""
        try:
            return handler(request)
        except GraphBubbleUp:
            raise
        except BaseException:
            self._keep_prompt(dict(request.state))
            raise

    async def awrap_tool_call(
        self,
        request: ToolCallRequest,
        handler: Callable[[ToolCallRequest], Awaitable[ToolMessage | Command[Any]]],
    ) -> ToolMessage | Command[Any]:
        """Call the tool; when it fails, keep the prompt if asked, and re-raise."""
        try:
            return await handler(request)
        except GraphBubbleUp:
            raise
        except BaseException:
            await self._akeep_prompt(dict(request.state))
            raise
