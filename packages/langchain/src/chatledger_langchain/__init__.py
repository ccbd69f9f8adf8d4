"""chatledger-langchain: chatledger conversation memory for LangChain.

Example:
    from langchain.agents import create_agent
    from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
    from langchain_core.messages import AIMessage

    from chatledger import MessageWindowChatMemory, connect
    from chatledger_langchain import ChatLedgerMiddleware

    memory = MessageWindowChatMemory(connect("sqlite:///chat.db"), max_messages=40)
    model = GenericFakeChatModel(messages=iter([AIMessage("Hello!")]))  # a chat model
    agent = create_agent(model, middleware=[ChatLedgerMiddleware(memory)])
    agent.invoke(
        {"messages": [{"role": "user", "content": "Hi"}]},
        {"configurable": {"conversation_id": "user-42"}},
    )

``ChatLedgerMiddleware`` is an agent's memory (:mod:`chatledger_langchain.middleware`);
``ChatLedgerMessageHistory`` is a chat history for LangChain 0.3-style code;
``to_langchain`` and ``from_langchain`` convert messages both ways.
"""

from __future__ import annotations

from chatledger_langchain.convert import from_langchain, to_langchain
from chatledger_langchain.history import ChatLedgerMessageHistory
from chatledger_langchain.middleware import ChatLedgerMiddleware

__all__ = [
    "ChatLedgerMessageHistory",
    "ChatLedgerMiddleware",
    "from_langchain",
    "to_langchain",
]
