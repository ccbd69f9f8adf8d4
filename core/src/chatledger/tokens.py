"""Token counters for :class:`~chatledger.TokenWindowChatMemory`.

Example:
    from chatledger import InMemoryChatMemoryRepository, Message, TokenWindowChatMemory
    from chatledger.tokens import estimate_tokens

    repository = InMemoryChatMemoryRepository()
    memory = TokenWindowChatMemory(repository, max_tokens=4000)  # estimate_tokens
    estimate_tokens(Message.user("How many tokens is this?"))

The default estimator needs no dependency: about four characters a token, plus
a fixed overhead per message and per attachment. ``tiktoken_counter`` counts
exactly with OpenAI's tokenizer (``pip install chatledger[tiktoken]``).
"""

from __future__ import annotations

from collections.abc import Callable

from chatledger.errors import ChatLedgerError
from chatledger.messages import Message

__all__ = [
    "MEDIA_TOKENS",
    "MESSAGE_OVERHEAD_TOKENS",
    "TokenCounterUnavailableError",
    "estimate_tokens",
    "message_text",
    "tiktoken_counter",
]

#: Tokens added for every message (role markers and separators).
MESSAGE_OVERHEAD_TOKENS = 4
#: Tokens counted for each attachment, whatever its size.
MEDIA_TOKENS = 85


class TokenCounterUnavailableError(ChatLedgerError, RuntimeError):
    """A token counter cannot be built here (library or encoding missing)."""


def message_text(message: Message) -> str:
    """Return every piece of text of a message that a model reads."""
    parts = [message.content or ""]
    for call in message.tool_calls:
        parts += (call.name, call.arguments)
    for response in message.tool_responses:
        parts += (response.name, response.data)
    return "\n".join(parts)


def estimate_tokens(message: Message) -> int:
    """Estimate tokens without a tokenizer: ceil(characters / 4) plus overheads."""
    characters = len(message_text(message))
    return (
        -(-characters // 4)
        + MESSAGE_OVERHEAD_TOKENS
        + MEDIA_TOKENS * len(message.media)
    )


def tiktoken_counter(encoding: str = "o200k_base") -> Callable[[Message], int]:
    """Return a counter that uses tiktoken's ``encoding``.

    Raises:
        TokenCounterUnavailableError: if tiktoken is not installed or the
            encoding cannot be loaded (tiktoken downloads encodings on first
            use, so an offline machine needs them in its cache).
    """
    try:
        import tiktoken
    except ImportError as exc:
        raise TokenCounterUnavailableError(
            "tiktoken is not installed; pip install 'chatledger[tiktoken]'"
        ) from exc
    try:
        encoder = tiktoken.get_encoding(encoding)
    except Exception as exc:
        raise TokenCounterUnavailableError(
            f"tiktoken cannot load the encoding {encoding!r}: {exc}. It downloads "
            "encodings on first use; set TIKTOKEN_CACHE_DIR to a folder that holds "
            "them on an offline machine, or use estimate_tokens."
        ) from exc

    def count(message: Message) -> int:
        tokens = len(encoder.encode(message_text(message), disallowed_special=()))
        return tokens + MESSAGE_OVERHEAD_TOKENS + MEDIA_TOKENS * len(message.media)

    count.__name__ = f"tiktoken_{encoding}"
    return count
