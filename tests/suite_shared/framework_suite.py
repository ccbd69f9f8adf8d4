"""What the runs of a framework's own test suite share.

The Agents SDK's, LangChain's and LlamaIndex's tests each run in a pytest
process of their own, in the framework's source folder, and report to a
JUnit XML file that their runner reads (:func:`junit_outcomes`). A plugin
loaded into that process keeps the framework's tests that apply and skips,
with its reason, each one that does not (:func:`select`).

In that process ``tests`` is the framework's own package, not ours: the
plugins import this module as ``framework_suite``, from :data:`FOLDER`, which
:func:`plugin_path` puts on the process's ``PYTHONPATH`` (this folder holds
nothing else, so no other name of ours shadows an installed one there). The
runners import it as ``tests.suite_shared.framework_suite``.
"""

from __future__ import annotations

import os
import xml.etree.ElementTree as ElementTree
from collections.abc import Callable, Mapping
from pathlib import Path

import pytest

#: The folder of this module, for ``import framework_suite`` in a suite's process.
FOLDER = Path(__file__).resolve().parent

#: Each test of a report (``classname::name``) -> its outcome (``passed``,
#: ``failed`` for a failure or an error, or ``skipped``) and its message.
Outcomes = dict[str, tuple[str, str]]


def plugin_path(plugin_folder: Path) -> str:
    """The ``PYTHONPATH`` of a suite's process that loads a plugin of ``plugin_folder``.

    The plugin's folder, then :data:`FOLDER`, then the ``PYTHONPATH`` of this
    process, if any.
    """
    given = os.environ.get("PYTHONPATH")
    paths = [os.fspath(plugin_folder), os.fspath(FOLDER), *filter(None, [given])]
    return os.pathsep.join(paths)


def junit_outcomes(report: Path) -> Outcomes:
    """Each test of the JUnit XML file ``report``: its outcome and message.

    The message is the element's ``message`` attribute, or its text when it
    has none; where a test has more than one (a failure, then an error in its
    teardown), the last one counts.
    """
    outcomes: Outcomes = {}
    for case in ElementTree.parse(report).getroot().iter("testcase"):
        name = f"{case.get('classname')}::{case.get('name')}"
        outcome, why = "passed", ""
        for tag in ("failure", "error", "skipped"):
            found = case.find(tag)
            if found is not None:
                outcome = "skipped" if tag == "skipped" else "failed"
                why = found.get("message") or found.text or ""
        outcomes[name] = (outcome, why)
    return outcomes


def with_outcome(outcomes: Outcomes, outcome: str) -> dict[str, str]:
    """The tests of ``outcomes`` whose outcome is ``outcome``, each with its message."""
    return {name: why for name, (found, why) in outcomes.items() if found == outcome}


def select(
    config: pytest.Config,
    items: list[pytest.Item],
    applies: Callable[[pytest.Item], bool],
    not_applicable: Mapping[str, str],
) -> None:
    """Keep the collected ``items`` that ``applies`` accepts; skip the listed ones.

    For ``pytest_collection_modifyitems``: the items ``applies`` refuses are
    deselected. An item ``not_applicable`` names gets a skip mark with the
    reason it gives. Its keys are node ids without the parameters:
    ``file::test`` for a function, ``file::Class::test`` for a method, so one
    key names every parametrized case of a test.
    """
    kept: list[pytest.Item] = []
    left: list[pytest.Item] = []
    for item in items:
        (kept if applies(item) else left).append(item)
        reason = not_applicable.get(item.nodeid.partition("[")[0])
        if reason is not None:
            item.add_marker(pytest.mark.skip(reason=reason))
    if left:
        config.hook.pytest_deselected(items=left)
        items[:] = kept
