"""The scripted demo: a conversation with tool calls, played through a window memory.

Example:
    from chatledger import connect
    from chatledger.demo import play

    play(connect("memory://"), "memory://", max_messages=6)

After each turn it prints what the model would be sent (the window) and what
left the window with that turn: on a repository that keeps logs it is still
stored, and the end says how much of the conversation is kept. ``chatledger
demo`` runs it.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from datetime import UTC, datetime

from chatledger.memory import MessageWindowChatMemory
from chatledger.messages import Media, Message, Role, ToolCall, ToolResponse
from chatledger.repository import ChatMemoryRepository

__all__ = ["describe", "play", "script"]


def _short(text: str | None, width: int = 72) -> str:
    if text is None:
        return "(no text)"
    flat = " ".join(text.split())
    return flat if len(flat) <= width else flat[: width - 1] + "…"


def _media_label(media: Media) -> str:
    where = "url" if isinstance(media.data, str) else f"{len(media.data)} bytes"
    return f"[{media.mime_type}, {where}]"


def describe(message: Message) -> list[str]:
    """Render one message as short human lines (role first)."""
    role = f"{message.role.value:<9}"
    lines: list[str] = []
    if message.role is Role.TOOL:
        for response in message.tool_responses:
            lines.append(
                f"{role} <- {response.name} #{response.id}: {_short(response.data, 50)}"
            )
            role = " " * 9
        if message.content is not None or not lines:
            lines.append(f"{role} {_short(message.content)}")
        return lines
    if message.content is not None or not message.tool_calls:
        lines.append(f"{role} {_short(message.content)}")
        role = " " * 9
    for media in message.media:
        lines.append(f"{role} + {_media_label(media)}")
        role = " " * 9
    for call in message.tool_calls:
        lines.append(f"{role} -> {call.name}({_short(call.arguments, 50)}) #{call.id}")
        role = " " * 9
    return lines


def _print_message(write: Callable[[str], None], prefix: str, message: Message) -> None:
    lines = describe(message)
    write(prefix + lines[0])
    for line in lines[1:]:
        write(" " * len(prefix) + line)


_PHOTO = "https://example.com/photos/bridge.jpg"


def script() -> list[tuple[list[Message], list[Message]]]:
    """The demo conversation, as (what the user adds, what the model replies) pairs."""
    return [
        (
            [
                Message.system("You are a concise travel assistant."),
                Message.user("Hi! I am planning a weekend in Italy."),
            ],
            [Message.assistant("Lovely. Which cities are you considering?")],
        ),
        (
            [Message.user("What is the weather in Rome and in Florence right now?")],
            [
                Message.assistant(
                    tool_calls=[
                        ToolCall("call_rome", "get_weather", '{"city": "Rome"}'),
                        ToolCall("call_flo", "get_weather", '{"city": "Florence"}'),
                    ]
                ),
                Message.tool(
                    [
                        ToolResponse("call_rome", "get_weather", '{"temp_c": 24}'),
                        ToolResponse("call_flo", "get_weather", '{"temp_c": 19}'),
                    ]
                ),
                Message.assistant("Rome is 24 °C and sunny; Florence 19 °C, cloudy."),
            ],
        ),
        (
            [
                Message.user(
                    "Where was this photo taken?",
                    media=[Media("image/jpeg", _PHOTO, name="bridge.jpg")],
                )
            ],
            [Message.assistant("That is the Ponte Vecchio, in Florence.")],
        ),
        (
            [Message.user("Then Florence it is. Book a table for two tonight.")],
            [
                Message.assistant(
                    tool_calls=[
                        ToolCall(
                            "call_book",
                            "book_table",
                            '{"city": "Florence", "people": 2, "time": "20:00"}',
                        )
                    ]
                ),
                Message.tool(
                    ToolResponse(
                        "call_book", "book_table", '{"confirmation": "F-2024"}'
                    )
                ),
                Message.assistant("Booked for 20:00, confirmation F-2024."),
            ],
        ),
        (
            [Message.user("Thanks! Summarise my plan in one line.")],
            [Message.assistant("Weekend in Florence, dinner for two at 20:00.")],
        ),
    ]


def play(
    repository: ChatMemoryRepository,
    label: str,
    *,
    max_messages: int = 8,
    conversation_id: str | None = None,
    write: Callable[[str], None] = print,
) -> str:
    """Play the scripted conversation into ``repository``; return its id.

    Args:
        repository: Where the conversation is stored.
        label: How to name the store in the output (a redacted URL).
        max_messages: The window size.
        conversation_id: Continue this conversation; by default a new id is
            made from the time, so every run adds one conversation.
        write: Called with each line of output.
    """
    memory = MessageWindowChatMemory(repository, max_messages=max_messages)
    conversation_id = conversation_id or (
        f"demo-{datetime.now(UTC):%Y%m%d-%H%M%S}-{uuid.uuid4().hex[:4]}"
    )
    write(f"chatledger demo on {label}")
    write(
        f"conversation {conversation_id}, window of {max_messages} messages "
        "(system messages count; turns are kept whole)"
    )
    shown = memory.get(conversation_id)
    for number, (asked, replies) in enumerate(script(), start=1):
        write("")
        write(f"--- turn {number} " + "-" * 50)
        before = shown
        memory.add(conversation_id, asked)
        window = memory.get(conversation_id)
        write(f"the model is sent {len(window)} messages:")
        for message in window:
            _print_message(write, "    ", message)
        answered = memory.add(conversation_id, replies)
        write("the model replies:")
        for message in answered.appended:
            _print_message(write, "  + ", message)
        shown = memory.get(conversation_id)
        kept = {m.id for m in shown}
        left = [m for m in before if m.id not in kept]
        if not left:
            write("nothing left the window")
            continue
        write(f"{len(left)} left the window (oldest whole turns first):")
        for message in left:
            _print_message(write, "  - ", message)
    write("")
    stored = repository.find_by_conversation_id(conversation_id)
    write(
        f"stored now: {len(stored)} messages in {conversation_id}; "
        f"the window shows {len(shown)}"
    )
    ids = sorted(repository.find_conversation_ids())
    write(f"conversations in {label} ({len(ids)}):")
    for cid in ids[-10:]:
        mark = "   <- this run" if cid == conversation_id else ""
        count = len(repository.find_by_conversation_id(cid))
        write(f"  {cid}  {count} messages{mark}")
    if len(ids) > 10:
        write(f"  ... and {len(ids) - 10} older")
    write("")
    write(
        f"run it again to add a conversation; look inside with: chatledger ls {label}"
    )
    return conversation_id
