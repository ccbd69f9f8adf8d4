"""Run Python code as a reader would, noting every warning it emits.

Run as a program in a fresh interpreter, so that LangChain, which warns once
per process, warns here if the code makes it warn: ``python -m
tests.langchain.readme_run README.md`` runs the README's ``python`` blocks in
order, in one namespace, in the current folder; ``--code TEXT`` runs TEXT.
It prints a JSON object: ``stdout``, ``warnings`` (category, message, where)
and ``error`` (a traceback, or ``null``).
"""

from __future__ import annotations

import contextlib
import io
import json
import sys
import traceback
import warnings
from pathlib import Path

from tests.docs.examples import ROOT, readme_examples


def _blocks(readme: str) -> list[tuple[str, str]]:
    group = Path(readme).resolve().relative_to(ROOT).as_posix()
    return [(e.name, e.code) for e in readme_examples() if e.group == group]


def run(blocks: list[tuple[str, str]]) -> dict[str, object]:
    """Run ``blocks`` (name, code) in one namespace; what they printed and warned."""
    namespace: dict[str, object] = {"__name__": "__main__"}
    printed = io.StringIO()
    error = None
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with contextlib.redirect_stdout(printed):
            try:
                for name, code in blocks:
                    exec(compile(code, name, "exec"), namespace)
            except BaseException:
                error = traceback.format_exc()
    return {
        "stdout": printed.getvalue(),
        "warnings": [
            {
                "category": w.category.__name__,
                "deprecation": issubclass(w.category, DeprecationWarning),
                "message": str(w.message),
                "where": f"{w.filename}:{w.lineno}",
            }
            for w in caught
        ],
        "error": error,
    }


if __name__ == "__main__":
    if sys.argv[1] == "--code":
        found = run([("<code>", sys.argv[2])])
    else:
        found = run(_blocks(sys.argv[1]))
    print(json.dumps(found))
