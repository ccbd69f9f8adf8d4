"""chatledger: conversation memory for LLM applications, kept in your database.

Example:
    from chatledger import Message, MessageWindowChatMemory, connect

    memory = MessageWindowChatMemory(connect("sqlite:///chat.db"), max_messages=20)
    memory.add("c1", Message.user("Hello"))
    memory.get("c1")

With asyncio, the same names start with ``Async`` and ``connect_async`` opens
a URL: ``AsyncMessageWindowChatMemory(connect_async(url))``, then ``await
memory.add(...)``.
"""

from __future__ import annotations

from chatledger.async_connect import connect_async
from chatledger.async_in_memory import AsyncInMemoryChatMemoryRepository
from chatledger.async_memory import (
    AsyncChatMemory,
    AsyncMessageWindowChatMemory,
    AsyncTokenWindowChatMemory,
    AsyncWindowChatMemory,
)
from chatledger.async_repository import (
    AsyncChatMemoryRepository,
    AsyncSupportsConversationInfo,
    AsyncSupportsConversationPages,
    AsyncSupportsCountMessages,
    AsyncSupportsLog,
    AsyncSupportsLogRemoval,
    AsyncSupportsSaveMany,
    AsyncSupportsSchemaUpgrade,
    AsyncSupportsWindowAppend,
    is_async_repository,
)
from chatledger.async_turn import AsyncTurnContext
from chatledger.connect import connect, redact_url
from chatledger.conversation_info import ConversationInfo, ConversationInfoPage
from chatledger.errors import (
    ChatLedgerError,
    ContentionError,
    InvalidConversationIdError,
    InvalidConversationInfoError,
    InvalidMessageError,
    InvalidNameError,
    InvalidOptionError,
    InvalidPageError,
    InvalidRetentionError,
    InvalidTTLError,
    InvalidUrlError,
    MessageTooLargeError,
    MissingDriverError,
    StoreNotFoundError,
    UnknownBackendError,
)
from chatledger.in_memory import InMemoryChatMemoryRepository
from chatledger.memory import (
    CONVERSATION_ID,
    ChatMemory,
    MessageWindowChatMemory,
    TokenWindowChatMemory,
    WindowChatMemory,
)
from chatledger.messages import Media, Message, Role, ToolCall, ToolResponse
from chatledger.repository import (
    AppendResult,
    ChatMemoryRepository,
    ConversationPage,
    MessagePage,
    SupportsConversationInfo,
    SupportsConversationPages,
    SupportsCountMessages,
    SupportsLog,
    SupportsLogRemoval,
    SupportsSaveMany,
    SupportsSchemaUpgrade,
    SupportsWindowAppend,
)
from chatledger.retention import Retention
from chatledger.turn import StaleToolCallError, Turn, TurnClosedError, TurnContext
from chatledger.validation import validate_conversation_id
from chatledger.window import MessageWindow, TokenWindow, Window

__version__ = "0.3.0.dev0"

__all__ = [
    "CONVERSATION_ID",
    "AppendResult",
    "AsyncChatMemory",
    "AsyncChatMemoryRepository",
    "AsyncInMemoryChatMemoryRepository",
    "AsyncMessageWindowChatMemory",
    "AsyncSupportsConversationInfo",
    "AsyncSupportsConversationPages",
    "AsyncSupportsCountMessages",
    "AsyncSupportsLog",
    "AsyncSupportsLogRemoval",
    "AsyncSupportsSaveMany",
    "AsyncSupportsSchemaUpgrade",
    "AsyncSupportsWindowAppend",
    "AsyncTokenWindowChatMemory",
    "AsyncTurnContext",
    "AsyncWindowChatMemory",
    "ChatLedgerError",
    "ChatMemory",
    "ChatMemoryRepository",
    "ContentionError",
    "ConversationInfo",
    "ConversationInfoPage",
    "ConversationPage",
    "InMemoryChatMemoryRepository",
    "InvalidConversationIdError",
    "InvalidConversationInfoError",
    "InvalidMessageError",
    "InvalidNameError",
    "InvalidOptionError",
    "InvalidPageError",
    "InvalidRetentionError",
    "InvalidTTLError",
    "InvalidUrlError",
    "Media",
    "Message",
    "MessagePage",
    "MessageTooLargeError",
    "MessageWindow",
    "MessageWindowChatMemory",
    "MissingDriverError",
    "Retention",
    "Role",
    "StaleToolCallError",
    "StoreNotFoundError",
    "SupportsConversationInfo",
    "SupportsConversationPages",
    "SupportsCountMessages",
    "SupportsLog",
    "SupportsLogRemoval",
    "SupportsSaveMany",
    "SupportsSchemaUpgrade",
    "SupportsWindowAppend",
    "TokenWindow",
    "TokenWindowChatMemory",
    "ToolCall",
    "ToolResponse",
    "Turn",
    "TurnClosedError",
    "TurnContext",
    "UnknownBackendError",
    "Window",
    "WindowChatMemory",
    "__version__",
    "connect",
    "connect_async",
    "is_async_repository",
    "redact_url",
    "validate_conversation_id",
]
