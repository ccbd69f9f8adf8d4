"""The command against a live Neo4j: exact round trips and the conformance run."""

from __future__ import annotations

import importlib.util
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from chatledger import connect
from tests.backends import backend_url
from tests.cli.conftest import QUICK_SUITE, Cli, file_url
from tests.cli.test_cli import _jsonl, _sample

HAVE_NEO4J = importlib.util.find_spec("chatledger_neo4j") is not None


@pytest.fixture
def neo4j_store(required: set[str]) -> Iterator[tuple[str, dict[str, str]]]:
    """A Neo4j URL and a label pair unique to this test; dropped after."""
    if not HAVE_NEO4J:
        pytest.skip(
            "chatledger-neo4j is not installed (pip install -e ./packages/neo4j)"
        )
    url = backend_url("neo4j", required)
    tag = uuid.uuid4().hex[:10]
    labels = {"conversation_label": f"CliConv{tag}", "message_label": f"CliMsg{tag}"}
    yield url, labels
    repository = connect(url, **labels)
    repository.drop_schema()  # type: ignore[attr-defined]
    repository.close()  # type: ignore[attr-defined]


def _options(labels: dict[str, str]) -> list[str]:
    return [arg for key, value in labels.items() for arg in ("-o", f"{key}={value}")]


class TestNeo4jCli:
    def test_import_export_copy_round_trip(
        self, cli: Cli, neo4j_store: tuple[str, dict[str, str]], tmp_path: Path
    ) -> None:
        url, labels = neo4j_store
        options = _options(labels)
        text = _jsonl(_sample())
        assert cli("import", url, "-", *options, stdin=text).code == 0
        exported = cli("export", url, *options)
        assert exported.code == 0, exported.err
        assert exported.out == text
        target = file_url("testfile", tmp_path / "copy")
        for _ in range(2):
            copied = cli("copy", url, target, *options)
            assert copied.code == 0, copied.err
            assert cli("export", target).out == text

    def test_conformance_in_a_namespace(
        self, cli: Cli, neo4j_store: tuple[str, dict[str, str]]
    ) -> None:
        """The run gets its own conversation label; the message label is ours."""
        url, labels = neo4j_store
        done = cli(
            "conformance",
            url,
            "--namespace-option",
            "conversation_label",
            "-o",
            f"message_label={labels['message_label']}",
            *QUICK_SUITE,
            timeout=600,
        )
        assert done.code == 0, done.out + done.err
        summary = done.out.strip().splitlines()[-1]
        assert "(atomic window append;" in summary
        assert "failed" not in summary
        assert "error" not in summary
