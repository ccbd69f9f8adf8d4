"""chatledger-llama-index: chatledger conversation memory as a LlamaIndex chat store.

Example:
    from llama_index.core.llms import ChatMessage

    from chatledger import connect
    from chatledger_llama_index import ChatLedgerChatStore

    store = ChatLedgerChatStore(connect("sqlite:///chat.db"))
    store.add_message("user-42", ChatMessage(role="user", content="Hi"))
    store.get_messages("user-42")

``to_llama_index`` and ``from_llama_index`` convert messages both ways.
"""

from __future__ import annotations

from chatledger_llama_index.convert import from_llama_index, to_llama_index
from chatledger_llama_index.reopening import StoreNotPicklableError
from chatledger_llama_index.store import ChatLedgerChatStore

__all__ = [
    "ChatLedgerChatStore",
    "StoreNotPicklableError",
    "from_llama_index",
    "to_llama_index",
]
