"""``chatledger ls --long`` pages through the records without loading a conversation."""

from __future__ import annotations

from pathlib import Path

import pytest

from chatledger import Message
from chatledger.cli import main
from chatledger_sql import SqlChatMemoryRepository
from tests.cli.test_ls_records import sql_keeps_records


def test_ls_long_counts_without_reading_a_conversation(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    if not sql_keeps_records():
        pytest.skip("the SQL adapter keeps no conversation records")
    url = f"sqlite:///{tmp_path / 'chat.db'}"
    repository = SqlChatMemoryRepository.from_url(url)
    conversations = {
        f"c{n:05d}": [Message.user("u"), Message.assistant("a")][: 1 + n % 2]
        for n in range(2_500)
    }
    try:
        repository.save_many(conversations)
    finally:
        repository.close()

    def refuse(self: object, conversation_id: str) -> list[Message]:
        raise AssertionError(f"ls --long read {conversation_id!r}")

    monkeypatch.setattr(SqlChatMemoryRepository, "find_by_conversation_id", refuse)
    assert main(["ls", url, "--long"]) == 0
    lines = capsys.readouterr().out.splitlines()
    counts = [(cells[0], int(cells[2])) for cells in (li.split("\t") for li in lines)]
    assert len(counts) == len(conversations)
    assert dict(counts) == {cid: len(batch) for cid, batch in conversations.items()}
