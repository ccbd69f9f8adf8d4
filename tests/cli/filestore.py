"""A JSON-file repository that the CLI tests install as a third-party adapter.

Example (what the tests do in a temporary folder on ``PYTHONPATH``):

    chatledger_testfile.py                     # this file's text
    chatledger_testfile-0.dist-info/entry_points.txt
        [chatledger.repositories]
        testfile = chatledger_testfile:FileChatMemoryRepository.from_url

so that ``chatledger ls testfile:///tmp/store.json`` reaches it through the same
entry-point lookup as every real adapter, and data outlives one process. It is
a test double for the command line, not a backend: one process at a time.
"""

from __future__ import annotations

import json
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from chatledger import Message, codec
from chatledger.validation import (
    stamp_messages,
    validate_conversation_id,
    validate_messages,
)

MODULE = "chatledger_testfile"
SCHEME = "testfile"


class FileChatMemoryRepository:
    """Conversations in one JSON file, rewritten whole on every change."""

    def __init__(self, path: Path) -> None:
        """Keep the conversations in ``path`` (created on first write)."""
        self.path = path

    @classmethod
    def from_url(
        cls, url: str, *, namespace: str | None = None, create_schema: bool = True
    ) -> FileChatMemoryRepository:
        """Open ``testfile:///absolute/path.json``; a namespace picks a sibling file.

        Like an adapter that creates its tables on opening, it writes an empty
        store when there is none, unless ``create_schema`` is false.
        """
        path = Path(url.partition("://")[2])
        if namespace is not None:
            path = path.with_name(f"{path.stem}.{namespace}{path.suffix}")
        repository = cls(path)
        if create_schema and not path.exists():
            repository._store({})
        return repository

    def drop_schema(self) -> None:
        """Remove the file and everything in it."""
        self.path.unlink(missing_ok=True)

    def _load(self) -> dict[str, list[dict[str, Any]]]:
        if not self.path.exists():
            return {}
        data: dict[str, list[dict[str, Any]]] = json.loads(
            self.path.read_text(encoding="utf-8")
        )
        return data

    def _store(self, data: dict[str, list[dict[str, Any]]]) -> None:
        partial = self.path.with_suffix(".partial")
        partial.write_text(json.dumps(data, ensure_ascii=False), encoding="utf-8")
        os.replace(partial, self.path)

    def find_conversation_ids(self) -> list[str]:
        """Return every stored conversation id."""
        return list(self._load())

    def find_by_conversation_id(self, conversation_id: str) -> list[Message]:
        """Return one conversation, oldest first."""
        validate_conversation_id(conversation_id)
        return [codec.from_dict(d) for d in self._load().get(conversation_id, [])]

    def save_all(self, conversation_id: str, messages: Sequence[Message]) -> None:
        """Replace one conversation; an empty list removes it."""
        validate_conversation_id(conversation_id)
        batch = stamp_messages(validate_messages(messages))
        data = self._load()
        if batch:
            data[conversation_id] = [codec.to_dict(m) for m in batch]
        else:
            data.pop(conversation_id, None)
        self._store(data)

    def delete_by_conversation_id(self, conversation_id: str) -> None:
        """Remove one conversation, if it exists."""
        validate_conversation_id(conversation_id)
        data = self._load()
        if data.pop(conversation_id, None) is not None:
            self._store(data)


def install(folder: Path) -> Path:
    """Make ``folder`` a site folder that registers this adapter; return it."""
    (folder / f"{MODULE}.py").write_text(
        Path(__file__).read_text(encoding="utf-8"), encoding="utf-8"
    )
    info = folder / f"{MODULE}-0.dist-info"
    info.mkdir(parents=True, exist_ok=True)
    (info / "METADATA").write_text(
        f"Metadata-Version: 2.1\nName: {MODULE}\nVersion: 0\n", encoding="utf-8"
    )
    (info / "entry_points.txt").write_text(
        "[chatledger.repositories]\n"
        f"{SCHEME} = {MODULE}:FileChatMemoryRepository.from_url\n",
        encoding="utf-8",
    )
    return folder
