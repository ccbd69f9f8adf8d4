"""The stores release 0.2 wrote for the upgrade tests, and the processes writing them.

Example:
    written = Written(python, folder, urls, outcomes)
    written.start_all()                       # or let each target start on use
    store = written.store("postgresql", "read")
    store.conversations["tool rounds"].kept   # what 0.2 returned, decoded

One process of release 0.2 (``write_release_0_2.py``) writes every store of
one target, one per role, each in a namespace of its own. Targets start
writing ahead, side by side, or when a test first asks for one: under
pytest-xdist each worker writes only the targets of the tests it runs.
"""

from __future__ import annotations

import json
import subprocess
import uuid
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from chatledger import Message, codec
from chatledger.cli.stores import close, drop_namespace, open_store
from tests.upgrade.targets import TARGETS, Target

__all__ = ["RACED", "ROLES", "Conversation", "Store", "Written"]

#: The stores written per target, each opened first by one test.
ROLES = ("read", "append", "raced_open", "raced_migrate")
#: The roles of the stores two processes meet at once.
RACED = ("raced_open", "raced_migrate")
#: The script release 0.2 runs.
WRITER = Path(__file__).with_name("write_release_0_2.py")
#: How long 0.2's writer may take: a bound for a stuck server, no timing
#: the tests rely on.
WRITER_SECONDS = 600


@dataclass(frozen=True)
class Conversation:
    """One conversation as release 0.2 wrote it.

    Attributes:
        kept: What 0.2's ``find_by_conversation_id`` returned: its window.
        given: Every message 0.2's memory was given, in order.
        evicted: The ids 0.2's appends reported evicted.
        window: The window 0.2's memory kept (``kind``, ``limit``,
            ``counter_id``).
    """

    kept: list[Message]
    given: list[Message]
    evicted: list[str]
    window: dict[str, Any]


@dataclass(frozen=True)
class Store:
    """A store 0.2 wrote, and how this release opens it.

    Attributes:
        target: The backend.
        url: Its URL.
        options: The options this release opens it with (its namespace).
        ids: What 0.2's ``find_conversation_ids`` returned, sorted.
        conversations: By id.
    """

    target: Target
    url: str
    options: dict[str, Any]
    ids: list[str]
    conversations: dict[str, Conversation]


def _decoded(texts: list[str]) -> list[Message]:
    return [codec.from_json(text) for text in texts]


def _roles(target: Target) -> list[str]:
    return [role for role in ROLES if role not in RACED or target.alone is None]


class Written:
    """Release 0.2's stores of each target, written by one process per target.

    Args:
        python: Release 0.2's interpreter.
        folder: Where specs, reports and logs go (and the stores' files).
        urls: The URL of each target that can run here.
        outcomes: For each target that cannot, the skip (or failure) to
            raise in its tests.
    """

    def __init__(
        self,
        python: Path,
        folder: Path,
        urls: dict[str, str],
        outcomes: dict[str, BaseException],
    ) -> None:
        self._python = python
        self._folder = folder
        self._urls = urls
        self._outcomes = outcomes
        self._tag = uuid.uuid4().hex[:8]
        self._writing: dict[str, subprocess.Popen[bytes]] = {}
        self._stores: dict[tuple[str, str], Store] = {}

    def _namespace(self, name: str, role: str) -> dict[str, Any]:
        return TARGETS[name].namespace(self._tag, role)

    def start(self, name: str) -> None:
        """Start writing ``name``'s stores, unless started (or it cannot run)."""
        if name in self._writing or name not in self._urls:
            return
        target = TARGETS[name]
        stores = [
            {
                "name": role,
                "url": self._urls[name],
                "options": {
                    **self._namespace(name, role),
                    **target.options,
                    **target.written_with,
                },
            }
            for role in _roles(target)
        ]
        spec = self._folder / f"{name}.spec.json"
        spec.write_text(json.dumps({"stores": stores}), encoding="utf-8")
        self._writing[name] = subprocess.Popen(
            [
                str(self._python),
                "-I",
                str(WRITER),
                str(spec),
                str(self._folder / f"{name}.report.json"),
                str(self._folder / f"{name}.log"),
            ],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )

    def start_all(self) -> None:
        """Start writing every target's stores, side by side."""
        for name in self._urls:
            self.start(name)

    def store(self, name: str, role: str) -> Store:
        """The store of target ``name`` for ``role``, written first if need be.

        Skips (or fails) as the target's backend did when it cannot run here,
        and skips the raced roles of a target that one process at a time opens.
        """
        if name in self._outcomes:
            raise self._outcomes[name]
        alone = TARGETS[name].alone
        if role in RACED and alone is not None:
            pytest.skip(f"{name}: {alone}")
        if (name, role) not in self._stores:
            self.start(name)
            self._collect(name)
        return self._stores[name, role]

    def _collect(self, name: str) -> None:
        """Wait for ``name``'s writer and read its report, checked to be 0.2's."""
        process = self._writing[name]
        code = process.wait(timeout=WRITER_SECONDS)
        if code != 0:
            log = self._folder / f"{name}.log"
            said = log.read_text(encoding="utf-8") if log.exists() else ""
            pytest.fail(
                f"release 0.2 could not write the {name} stores:\n{said[-4000:]}"
            )
        report_file = self._folder / f"{name}.report.json"
        report = json.loads(report_file.read_text(encoding="utf-8"))
        assert report["version"] == "0.2.0", report["version"]
        environment = self._python.parent.parent
        assert Path(report["file"]).is_relative_to(environment), report["file"]
        target = TARGETS[name]
        for role in _roles(target):
            written = report["stores"][role]
            self._stores[name, role] = Store(
                target,
                self._urls[name],
                {**self._namespace(name, role), **target.options},
                written["ids"],
                {
                    cid: Conversation(
                        _decoded(entry["kept"]),
                        _decoded(entry["given"]),
                        entry["evicted"],
                        entry["window"],
                    )
                    for cid, entry in written["conversations"].items()
                },
            )

    def drop(self) -> None:
        """Wait for every writer, then remove each store on a server.

        Every namespace a writer was given is dropped, written whole or not;
        the stores' files go with the folder.
        """
        for process in self._writing.values():
            process.wait(timeout=WRITER_SECONDS)
        dropped = [
            (self._urls[name], {**self._namespace(name, role), **target.options})
            for name in self._writing
            if (target := TARGETS[name]).server is not None
            for role in _roles(target)
        ]
        with ThreadPoolExecutor(max_workers=len(dropped) or 1) as pool:
            for done in [pool.submit(_drop, *store) for store in dropped]:
                done.result()


def _drop(url: str, options: dict[str, Any]) -> None:
    """Remove one store's tables, keys or nodes."""
    repository = open_store(url, options, create=False)
    try:
        drop_namespace(repository)
    finally:
        close(repository)
