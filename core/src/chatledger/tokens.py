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

import inspect
import threading
import uuid
import weakref
from collections.abc import Callable
from typing import Any

from chatledger.errors import ChatLedgerError
from chatledger.messages import Message

__all__ = [
    "MEDIA_TOKENS",
    "MESSAGE_OVERHEAD_TOKENS",
    "TokenCounterUnavailableError",
    "counter_name",
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

    ``encoding`` is an encoding name (``"o200k_base"``) or the name of a model
    tiktoken knows (``"gpt-4o"``), which counts with that model's encoding.
    Counters of one encoding share stored sizes, whichever name made them.

    Raises:
        TokenCounterUnavailableError: if tiktoken is not installed, the name
            is neither an encoding nor a model tiktoken knows, or the
            encoding cannot be loaded (tiktoken downloads encodings on first
            use, so an offline machine needs them in its cache).
    """
    try:
        import tiktoken
    except ImportError as exc:
        raise TokenCounterUnavailableError(
            "tiktoken is not installed; pip install 'chatledger[tiktoken]'"
        ) from exc
    name = encoding
    what = f"the encoding {name!r}"
    if name not in tiktoken.list_encoding_names():
        try:
            encoding = tiktoken.encoding_name_for_model(name)
        except KeyError:
            raise TokenCounterUnavailableError(
                f"{name!r} is neither an encoding nor a model tiktoken knows: give "
                f"an encoding ({', '.join(tiktoken.list_encoding_names())}) or a "
                "model name such as 'gpt-4o'"
            ) from None
        what = f"the encoding {encoding!r} of the model {name!r}"
    try:
        encoder = tiktoken.get_encoding(encoding)
    except Exception as exc:
        raise TokenCounterUnavailableError(
            f"tiktoken cannot load {what}: {exc}. It downloads encodings on "
            "first use; set TIKTOKEN_CACHE_DIR to a folder that holds them on an "
            "offline machine, or use estimate_tokens."
        ) from exc

    def count(message: Message) -> int:
        tokens = len(encoder.encode(message_text(message), disallowed_special=()))
        return tokens + MESSAGE_OVERHEAD_TOKENS + MEDIA_TOKENS * len(message.media)

    count.__name__ = f"tiktoken_{encoding}"
    count.counter_id = f"tiktoken_{encoding}"  # type: ignore[attr-defined]
    return count


estimate_tokens.counter_id = "estimate_tokens"  # type: ignore[attr-defined]

_instance_names: weakref.WeakKeyDictionary[Any, str] = weakref.WeakKeyDictionary()
_pinned_names: dict[int, tuple[Any, str]] = {}
_names_lock = threading.Lock()


def counter_name(counter: Callable[..., Any]) -> str:
    """Return the name under which sizes measured by ``counter`` are stored.

    A ``counter_id`` attribute wins; a module-level function is named by its
    module and qualified name, the same in every process. Anything else (a
    lambda, a closure, a ``functools.partial``, a callable object, a bound
    method) gets a name of its own, unique to that object in this process:
    two such counters never share stored sizes, even under one ``__name__``.
    """
    explicit = getattr(counter, "counter_id", None)
    if isinstance(explicit, str) and explicit:
        return explicit
    if inspect.isfunction(counter) or inspect.isbuiltin(counter):
        qualified = getattr(counter, "__qualname__", "")
        if qualified and "<" not in qualified:
            return f"{counter.__module__}.{qualified}"
    if inspect.ismethod(counter):
        # A bound method is a new object at every attribute access: name it
        # by its instance and function, which stay the same.
        return f"{_instance_name(counter.__self__)}.{counter.__func__.__qualname__}"
    return _instance_name(counter)


def _instance_name(owner: Any) -> str:
    with _names_lock:
        try:
            name = _instance_names.get(owner)
            if name is None:
                name = _instance_names[owner] = f"instance-{uuid.uuid4().hex}"
            return name
        except TypeError:
            # Not weakly referable: keep it alive so its id is never reused.
            pinned = _pinned_names.get(id(owner))
            if pinned is None:
                pinned = _pinned_names[id(owner)] = (
                    owner,
                    f"instance-{uuid.uuid4().hex}",
                )
            return pinned[1]
