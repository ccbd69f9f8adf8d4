"""chatledger-openai-agents: an OpenAI Agents SDK session in a chatledger repository.

Example:
    import asyncio

    from agents import Agent, RunConfig, Runner
    from agents.testing import ScriptedModel, assistant_message

    from chatledger import connect_async
    from chatledger_openai_agents import ChatLedgerSession

    async def main():
        repository = connect_async("sqlite+aiosqlite:///chat.db")
        model = ScriptedModel([[assistant_message("Hello!")]])  # stands for a model
        agent = Agent(name="Assistant", instructions="Be terse.", model=model)
        session = ChatLedgerSession("user-42", repository)
        config = RunConfig(tracing_disabled=True)
        await Runner.run(agent, "Hi", session=session, run_config=config)
        await session.get_items()   # the question and the answer, as the SDK added them
        await repository.aclose()

    asyncio.run(main())

``items_to_messages`` and ``messages_to_items`` are the mapping the session
stores through: one message per item, the exact item under :data:`ITEM_KEY`.
"""

from __future__ import annotations

from chatledger_openai_agents.items import (
    ITEM_KEY,
    ForeignMessageError,
    items_to_messages,
    messages_to_items,
)
from chatledger_openai_agents.session import ChatLedgerSession

__all__ = [
    "ITEM_KEY",
    "ChatLedgerSession",
    "ForeignMessageError",
    "items_to_messages",
    "messages_to_items",
]
