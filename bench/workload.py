"""The messages the benchmarks store: a realistic window and a steady stream.

Example:
    from bench.workload import history, stream

    prefill = history(200)            # system prompt, turns, some tool calls
    for message in stream(10):        # user, assistant, user, ...
        memory.add("c1", message)

Every call makes fresh message ids, so a stream never collides with what a
conversation already holds (an id the store has seen would be a no-op).
"""

from __future__ import annotations

import itertools
import json
from collections.abc import Iterator

from chatledger import Message, ToolCall, ToolResponse

__all__ = ["history", "stream"]

_QUESTION = (
    "Could you look at the attached order {n} and tell me whether the delivery "
    "window still holds, and if not, what the earliest alternative would be?"
)
_ANSWER = (
    "Order {n} is on schedule: it left the warehouse this morning and the carrier "
    "still shows delivery between 14:00 and 16:00 tomorrow. I will keep watching "
    "it and tell you if that changes."
)
_SYSTEM = (
    "You are a concise logistics assistant. Answer in at most three sentences, "
    "call the tracking tool when an order number is mentioned, and never invent "
    "a delivery date."
)


def _turn(n: int) -> list[Message]:
    """One turn: a question, and every third turn a tool round trip first."""
    turn = [Message.user(_QUESTION.format(n=n))]
    if n % 3 == 0:
        call_id = f"call_{n}"
        turn.append(
            Message.assistant(
                tool_calls=[
                    ToolCall(
                        id=call_id,
                        name="track_order",
                        arguments=json.dumps({"order": n, "detail": "full"}),
                    )
                ]
            )
        )
        turn.append(
            Message.tool(
                ToolResponse(
                    id=call_id,
                    name="track_order",
                    data=json.dumps(
                        {"order": n, "status": "in_transit", "eta": "14-16"}
                    ),
                )
            )
        )
    turn.append(Message.assistant(_ANSWER.format(n=n)))
    return turn


def history(size: int) -> list[Message]:
    """Return exactly ``size`` messages: a system prompt, then whole turns.

    The last turn may be cut short to hit ``size`` exactly; that does not matter
    to the window, which only needs a user message to cut on.
    """
    messages = [Message.system(_SYSTEM)]
    for n in itertools.count():
        if len(messages) >= size:
            break
        messages.extend(_turn(n))
    return messages[:size]


def stream(count: int, start: int = 0) -> Iterator[Message]:
    """Yield ``count`` fresh messages, alternating user and assistant."""
    for n in range(start, start + count):
        if n % 2 == 0:
            yield Message.user(_QUESTION.format(n=n))
        else:
            yield Message.assistant(_ANSWER.format(n=n))
