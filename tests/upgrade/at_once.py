"""A process that opens, or migrates, a store at the same moment as its sibling.

Run by this environment's interpreter, two at a time (``python at_once.py
LOG``, what it says between requests going to the file ``LOG``),
it serves one request after another, each in two steps:

1. A JSON line ``{"mode": "open" | "migrate", "url": ..., "options": {...}}``:
   it imports the URL's adapter and prints ``ready``.
2. A line ``go``: ``open`` opens the store as an application does, creating
   what is missing, and reads the ids of each conversation's messages;
   ``migrate`` runs ``chatledger migrate URL -o KEY=VALUE ...``. It prints one
   JSON line: ``{"code": ..., "out": ..., "err": ...}``, what the request
   printed and its exit code (``open``'s output is the ids, as JSON).

Sent ``go`` together, the two meet the store with everything imported, so
their schema changes race; serving many requests, each pays its imports once.
"""

from __future__ import annotations

import contextlib
import io
import json
import sys
import traceback
from pathlib import Path
from typing import Any

from chatledger import connect
from chatledger.cli import main as command
from chatledger.connect import adapter_parameters


def _open(url: str, options: dict[str, Any]) -> int:
    repository: Any = connect(url, **options)
    try:
        found = {
            cid: [m.id for m in repository.find_by_conversation_id(cid)]
            for cid in repository.find_conversation_ids()
        }
    finally:
        closer = getattr(repository, "close", None)
        if closer is not None:
            closer()
    print(json.dumps(found))
    return 0


def _migrate(url: str, options: dict[str, Any]) -> int:
    given = [
        f"{key}={value if isinstance(value, str) else json.dumps(value)}"
        for key, value in options.items()
    ]
    return command(["migrate", url, *(a for o in given for a in ("-o", o))])


def _serve(request: dict[str, Any]) -> dict[str, Any]:
    run = {"open": _open, "migrate": _migrate}[request["mode"]]
    adapter_parameters(request["url"])  # imports the adapter before the race
    print("ready", flush=True)
    sys.stdin.readline()
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            code = run(request["url"], request["options"])
        except Exception:
            traceback.print_exc()
            code = 1
    return {"code": code, "out": out.getvalue(), "err": err.getvalue()}


def main(log: str) -> None:
    """Serve each request; what is said between them goes to the file ``log``."""
    with (
        Path(log).open("w", encoding="utf-8") as said,
        contextlib.redirect_stderr(said),
    ):
        for line in sys.stdin:
            print(json.dumps(_serve(json.loads(line))), flush=True)


if __name__ == "__main__":
    main(sys.argv[1])
