"""chatledger-langchain: chatledger conversation memory as a LangChain chat history.

Example:
    from langchain_core.messages import AIMessage, HumanMessage

    from chatledger import MessageWindowChatMemory, connect
    from chatledger_langchain import ChatLedgerMessageHistory

    memory = MessageWindowChatMemory(connect("sqlite:///chat.db"), max_messages=40)
    history = ChatLedgerMessageHistory(memory, "user-42")
    history.add_messages([HumanMessage("Hi"), AIMessage("Hello!")])
    history.messages

``to_langchain`` and ``from_langchain`` convert messages both ways.
"""

from __future__ import annotations

from chatledger_langchain.convert import from_langchain, to_langchain
from chatledger_langchain.history import ChatLedgerMessageHistory

__all__ = ["ChatLedgerMessageHistory", "from_langchain", "to_langchain"]
