"""chatledger-llama-index: chatledger conversation memory as LlamaIndex chat stores.

Example:
    from llama_index.core.llms import ChatMessage
    from llama_index.core.memory import Memory

    from chatledger_llama_index import ChatLedgerMemoryStore

    store = ChatLedgerMemoryStore.from_url("sqlite:///chat.db")
    memory = Memory.from_defaults(session_id="user-42", chat_store=store)
    await memory.aput(ChatMessage(role="user", content="Hi"))
    await memory.aget()

``ChatLedgerMemoryStore`` is the store of LlamaIndex's ``Memory``;
``ChatLedgerChatStore`` that of ``ChatMemoryBuffer``. ``to_llama_index`` and
``from_llama_index`` convert messages both ways.
"""

from __future__ import annotations

from chatledger_llama_index.convert import from_llama_index, to_llama_index
from chatledger_llama_index.memory_store import ChatLedgerMemoryStore
from chatledger_llama_index.reopening import StoreNotPicklableError
from chatledger_llama_index.store import ChatLedgerChatStore

__all__ = [
    "ChatLedgerChatStore",
    "ChatLedgerMemoryStore",
    "StoreNotPicklableError",
    "from_llama_index",
    "to_llama_index",
]
