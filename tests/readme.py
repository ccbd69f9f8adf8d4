"""The Python examples of the README, by section, for tests that run them."""

from __future__ import annotations

import re
from pathlib import Path

README = Path(__file__).resolve().parent.parent / "README.md"


def python_examples(heading: str) -> list[str]:
    """The ```python blocks of the README section titled ``## {heading}``."""
    text = README.read_text(encoding="utf-8")
    match = re.search(rf"^## {re.escape(heading)}\n(.*?)(?=^## |\Z)", text, re.M | re.S)
    if match is None:
        raise LookupError(f"README.md has no section '## {heading}'")
    return re.findall(r"^```python\n(.*?)^```", match.group(1), re.M | re.S)
