"""Write conversations with release 0.2, as its users did, and say what it kept.

Run by the interpreter of an environment that holds release 0.2's wheels
and nothing of this checkout (``python -I``)::

    python -I write_release_0_2.py SPEC.json REPORT.json LOG

``SPEC.json`` holds ``{"stores": [{"name": ..., "url": ..., "options": {...}}]}``.
Each store is opened with 0.2's ``connect`` (which makes 0.2's schema) and
given the same conversations through 0.2's window memories: system
messages and their replacement, tool rounds, windows that evicted messages,
a token window with stored sizes, odd payloads, a conversation saved whole
and one deleted. Written to ``REPORT.json``: 0.2's version and where it was
imported from, and per store and conversation what 0.2's
``find_by_conversation_id`` returned (``kept``), every message given
(``given``), the ids 0.2's appends reported evicted (``evicted``) and the
window (``window``), messages in 0.2's codec. What goes wrong (a traceback,
a driver's warnings) goes to ``LOG``.
"""

from __future__ import annotations

import json
import sys
import traceback
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from contextlib import ExitStack, redirect_stderr
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import chatledger
from chatledger import (
    Media,
    Message,
    MessageWindowChatMemory,
    TokenWindowChatMemory,
    ToolCall,
    ToolResponse,
    codec,
    connect,
)

#: The stored sizes' counter of the token window (0.2's estimate).
COUNTER_ID = "estimate-0.2"
_Memory = MessageWindowChatMemory | TokenWindowChatMemory


def _tool_round(city: str, n: int) -> list[Message]:
    """A user question, the model's tool call, the tool's answer, the reply."""
    call = ToolCall(
        id=f"call-{city}-{n}", name="weather", arguments=json.dumps({"city": city})
    )
    return [
        Message.user(f"Weather in {city}?"),
        Message.assistant(tool_calls=[call]),
        Message.tool(
            ToolResponse(id=call.id, name="weather", data=json.dumps({"c": 20 + n}))
        ),
        Message.assistant(f"{city}: {20 + n} C and sunny."),
    ]


def _odd_payloads() -> list[Message]:
    """What a codec or a column may get wrong: nesting, big numbers, text, media."""
    stamped = datetime(2025, 1, 2, 3, 4, 5, 678901, tzinfo=UTC)
    return [
        Message.user(
            "héllo wörld 🌍 \u2028 'quoted' \"double\" \\ back",
            metadata={"big": 2**70, "nested": {"a": [1, None, {"b": True}]}, "f": 1.5},
        ),
        replace(Message.assistant(""), created_at=stamped),
        Message.user(
            "see attached",
            media=[
                Media("image/png", b"\x89PNG\r\n\x00\xff", name="dot.png"),
                Media("text/uri-list", "https://example.com/a.txt"),
            ],
        ),
        Message.assistant("nul \x00 inside"),
        Message.assistant("x" * 3000),
    ]


def _write(repository: Any) -> dict[str, dict[str, Any]]:
    """Give the store its conversations; return what each was given and reported."""
    written: dict[str, dict[str, Any]] = {}

    def converse(
        cid: str,
        memory: _Memory,
        window: dict[str, Any],
        batches: list[list[Message]],
    ) -> None:
        given: list[Message] = []
        evicted: list[str] = []
        for batch in batches:
            given += batch
            evicted += memory.add(cid, batch).evicted_ids
        written[cid] = {"given": given, "evicted": evicted, "window": window}

    tools = MessageWindowChatMemory(repository, max_messages=8)
    rounds = [_tool_round(city, n) for n, city in enumerate(["Rome", "Oslo", "Lima"])]
    converse(
        "tool rounds",
        tools,
        {"kind": "messages", "limit": 8},
        [[Message.system("You are a weather bot."), *rounds[0]], *rounds[1:]],
    )

    systems = MessageWindowChatMemory(repository, max_messages=6)
    converse(
        "system changes",
        systems,
        {"kind": "messages", "limit": 6},
        [
            [Message.system("Answer in English."), Message.user("hi")],
            [Message.assistant("hello")],
            # Replaces the first system message (0.2 deletes it).
            [Message.system("Answer in French."), Message.user("again")],
            [Message.assistant("bonjour")],
            # Equal to the one kept: 0.2 stores nothing for it.
            [Message.system("Answer in French."), Message.user("more")],
            [Message.assistant("encore")],
            [Message.user("last"), Message.assistant("fin")],
        ],
    )

    tokens = TokenWindowChatMemory(repository, max_tokens=60, counter_id=COUNTER_ID)
    converse(
        "token window",
        tokens,
        {"kind": "tokens", "limit": 60, "counter_id": COUNTER_ID},
        [
            [Message.system("Be terse.")],
            *([m] for m in _odd_payloads()),
            [Message.user("short"), Message.assistant("ok")],
        ],
    )

    long = MessageWindowChatMemory(repository, max_messages=10)
    converse(
        "long",
        long,
        {"kind": "messages", "limit": 10},
        [
            [Message.user(f"question {n}"), Message.assistant(f"answer {n}")]
            for n in range(12)
        ],
    )

    start = datetime(2024, 6, 1, 12, 0, tzinfo=UTC)
    saved = [
        replace(Message.system("Saved whole."), created_at=start),
        replace(Message.user("q"), created_at=start + timedelta(seconds=1)),
        replace(Message.assistant("a"), created_at=start + timedelta(seconds=2)),
    ]
    repository.save_all("saved whole", saved)
    written["saved whole"] = {
        "given": saved,
        "evicted": [],
        "window": {"kind": "messages", "limit": 20},
    }

    gone = MessageWindowChatMemory(repository, max_messages=4)
    gone.add("deleted", [Message.user("soon gone"), Message.assistant("yes")])
    gone.clear("deleted")
    return written


def _encoded(messages: list[Message]) -> list[str]:
    return [codec.to_json(m) for m in messages]


def _store(repository: Any) -> dict[str, Any]:
    """Write one store and read back what 0.2 kept of each conversation."""
    written = _write(repository)
    conversations = {
        cid: {
            "kept": _encoded(repository.find_by_conversation_id(cid)),
            "given": _encoded(entry["given"]),
            "evicted": entry["evicted"],
            "window": entry["window"],
        }
        for cid, entry in written.items()
    }
    return {
        "ids": sorted(repository.find_conversation_ids()),
        "conversations": conversations,
    }


def _write_all(spec_path: str) -> dict[str, Any]:
    """Write every store of the spec, each in a thread (they wait on servers).

    The stores are opened one after the other: 0.2 makes its schema then,
    and what is tested is how this release meets a store, not how 0.2's
    schema creation raced itself.
    """
    spec = json.loads(Path(spec_path).read_text(encoding="utf-8"))
    with ExitStack() as opened:
        repositories = {}
        for store in spec["stores"]:
            repository: Any = connect(store["url"], **store["options"])
            close: Callable[[], None] | None = getattr(repository, "close", None)
            if close is not None:
                opened.callback(close)
            repositories[store["name"]] = repository
        with ThreadPoolExecutor(max_workers=len(repositories) or 1) as pool:
            futures = {
                name: pool.submit(_store, repository)
                for name, repository in repositories.items()
            }
            stores = {name: future.result() for name, future in futures.items()}
    return {
        "version": chatledger.__version__,
        "file": chatledger.__file__,
        "stores": stores,
    }


def main(spec_path: str, report_path: str, log_path: str) -> int:
    """Write the spec's stores and the report; what goes wrong goes to the log."""
    with (
        Path(log_path).open("w", encoding="utf-8") as log,
        redirect_stderr(log),
    ):
        try:
            report = _write_all(spec_path)
        except Exception:
            traceback.print_exc()
            return 1
    Path(report_path).write_text(json.dumps(report), encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main(*sys.argv[1:]))
