"""LangChain's fake chat model, able to call tools and to show what it was given."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Iterator, Sequence
from typing import Any

from langchain_core.callbacks import (
    AsyncCallbackManagerForLLMRun,
    CallbackManagerForLLMRun,
)
from langchain_core.language_models import BaseChatModel
from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage
from langchain_core.outputs import ChatGeneration, ChatResult
from langchain_core.tools import tool
from pydantic import Field


class ScriptedModel(GenericFakeChatModel):
    """Answers with the scripted messages in turn and notes each prompt it is given.

    ``bind_tools`` gives the model itself: the script decides the tool calls.
    An answer that is an exception is raised instead.
    """

    seen: list[list[BaseMessage]] = Field(default_factory=list)
    lock: Any = Field(default_factory=threading.Lock)

    def bind_tools(self, tools: Sequence[Any], **kwargs: Any) -> Any:
        return self

    def _next(self, messages: list[BaseMessage]) -> None:
        with self.lock:
            self.seen.append(list(messages))

    def _generate(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: CallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> ChatResult:
        self._next(messages)
        return super()._generate(messages, stop, run_manager, **kwargs)


def script(*answers: AIMessage | str | BaseException) -> Iterator[Any]:
    """The answers, an exception raised where one stands."""
    for answer in answers:
        if isinstance(answer, BaseException):
            raise answer
        yield answer


def call(name: str, call_id: str, **args: Any) -> AIMessage:
    """An answer that calls one tool."""
    return AIMessage("", tool_calls=[{"name": name, "args": args, "id": call_id}])


@tool
def weather(city: str) -> str:
    """The weather in a city."""
    return f"Sunny in {city}"


@tool
def broken(city: str) -> str:
    """A tool that fails."""
    raise RuntimeError(f"no weather service for {city}")


@tool
def interrupted(city: str) -> str:
    """A tool whose call is interrupted from the keyboard."""
    raise KeyboardInterrupt


class Hanging(ScriptedModel):
    """Waits, in its async call, until its task is cancelled."""

    started: Any = Field(default_factory=asyncio.Event)

    async def _agenerate(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: AsyncCallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> ChatResult:
        self._next(messages)
        self.started.set()
        await asyncio.Event().wait()
        raise AssertionError("not reached")


class EchoModel(BaseChatModel):
    """Answers ``re: <the last human message>``: each run's answer is its own."""

    @property
    def _llm_type(self) -> str:
        return "echo"

    def _generate(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: CallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> ChatResult:
        asked = [m for m in messages if isinstance(m, HumanMessage)][-1]
        answer = AIMessage(f"re: {asked.content}")
        return ChatResult(generations=[ChatGeneration(message=answer)])

    async def _agenerate(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: AsyncCallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> ChatResult:
        return self._generate(messages, stop)
