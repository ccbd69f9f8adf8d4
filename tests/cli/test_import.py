"""import checks the whole file before its first write, and says where it fails."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from chatledger import Message, codec
from tests.cli.conftest import HAVE_SQL, NO_SQL, Cli, file_url
from tests.cli.test_cli import _jsonl, _one_line_error, _sample


def _line(cid: str, message: Message) -> str:
    return json.dumps({"conversation_id": cid, **codec.to_dict(message)}) + "\n"


def _first_nine() -> str:
    return "".join(_line("first", Message.user(f"turn {i}")) for i in range(9))


def test_a_bad_second_conversation_changes_nothing(
    cli: Cli, store_kind: str, tmp_path: Path
) -> None:
    url = file_url(store_kind, tmp_path / "store")
    assert cli("import", url, "-", stdin=_first_nine()).code == 0
    before = cli("export", url).out
    repeated = Message.user("again", id="dup")
    text = (
        _line("first", Message.user("replacement"))
        + _line("second", Message.user("one", id="dup"))
        + _line("second", repeated)
    )
    (tmp_path / "bad.jsonl").write_text(text, encoding="utf-8")
    done = cli("import", url, "bad.jsonl")
    assert done.code == 1
    line = _one_line_error(done.err)
    assert "bad.jsonl:3: conversation 'second': message id 'dup' repeats" in line
    assert "line 2" in line
    assert cli("export", url).out == before
    assert len(before.splitlines()) == 9


@pytest.mark.parametrize(
    ("bad", "expected"),
    [
        ('{"conversation_id": " padded", "v": 1}', "conversation ' padded': "),
        ('{"conversation_id": "c9", "v": 1, "role": "robot"}', "conversation 'c9': "),
        ('{"conversation_id": "c9", "v": 99}', "conversation 'c9': "),
        ('{"role": "user"}', "expected a JSON object with a conversation_id"),
        ("{not json", "not JSON"),
    ],
)
def test_every_error_names_file_line_and_conversation(
    cli: Cli, tmp_path: Path, bad: str, expected: str
) -> None:
    url = file_url("testfile", tmp_path / "store")
    good = _jsonl(_sample())
    (tmp_path / "in.jsonl").write_text(good + bad + "\n", encoding="utf-8")
    done = cli("import", url, "in.jsonl")
    assert done.code == 1
    number = len(good.splitlines()) + 1
    assert f"in.jsonl:{number}: {expected}" in _one_line_error(done.err)
    assert not (tmp_path / "store.json").exists()


def test_a_binary_file_is_named(cli: Cli, tmp_path: Path) -> None:
    url = file_url("testfile", tmp_path / "store")
    (tmp_path / "chat.db").write_bytes(b"SQLite format 3\x00\x10\x00\x01\x01\xff\xfe")
    done = cli("import", url, "chat.db")
    assert done.code == 1
    line = _one_line_error(done.err)
    assert "chat.db:1: binary data: chat.db is not a chatledger export" in line
    assert not (tmp_path / "store.json").exists()


@pytest.mark.parametrize("fmt", ["openai", "openai-responses", "anthropic"])
def test_a_request_shape_export_is_export_only(
    cli: Cli, tmp_path: Path, fmt: str
) -> None:
    source = file_url("testfile", tmp_path / "source")
    assert cli("import", source, "-", stdin=_jsonl(_sample())).code == 0
    exported = cli("export", source, "beta", "--format", fmt, "--output", "x.jsonl")
    assert exported.code == 0, exported.err
    target = file_url("testfile", tmp_path / "target")
    done = cli("import", target, "x.jsonl")
    assert done.code == 1
    line = _one_line_error(done.err)
    assert "x.jsonl:1: " in line
    assert "export-only" in line
    assert "import reads export --format jsonl" in line
    assert not (tmp_path / "target.json").exists()


@pytest.mark.skipif(not HAVE_SQL, reason=NO_SQL)
def test_a_store_that_refuses_a_conversation_is_named(cli: Cli, tmp_path: Path) -> None:
    # An id over the SQL adapter's 255-byte column passes the file's checks.
    url = file_url("sqlite", tmp_path / "store")
    text = _line("ok", Message.user("fine")) + _line(
        "long", Message.user("too long", id="x" * 300)
    )
    done = cli("import", url, "-", stdin=text)
    assert done.code == 1
    line = _one_line_error(done.err)
    assert (
        "<stdin>:1: conversations 'ok' to 'long' (one batch of 2, none of it "
        "written) were not imported into sqlite:///" in line
    )
    assert "(lines 1-2): conversation 'long': messages[0] has an id longer" in line
    assert line.endswith("the 0 conversations before them were")
    assert cli("ls", url).out == ""


def test_a_store_without_batches_is_named_per_conversation(
    cli: Cli, tmp_path: Path
) -> None:
    # The test adapter refuses nothing by itself: make its file unwritable.
    url = file_url("testfile", tmp_path / "store")
    assert cli("import", url, "-", stdin=_line("ok", Message.user("fine"))).code == 0
    (tmp_path / "store.partial").mkdir()
    text = _line("a", Message.user("one")) + _line("b", Message.user("two"))
    done = cli("import", url, "-", stdin=text)
    assert done.code == 1
    line = _one_line_error(done.err)
    assert "<stdin>:1: conversation 'a' was not imported into testfile://" in line
    assert "(line 1): IsADirectoryError: " in line
    assert line.endswith("the 0 conversations before it were")
    assert cli("ls", url).out.splitlines() == ["ok"]


@pytest.mark.parametrize(
    "url", ["memory://", "sqlite://", "sqlite:///", "sqlite:///:memory:", "duckdb://"]
)
def test_writing_where_nothing_outlives_the_process_is_refused(
    cli: Cli, tmp_path: Path, url: str
) -> None:
    source = file_url("testfile", tmp_path / "source")
    assert cli("import", source, "-", stdin=_jsonl(_sample())).code == 0
    for command in (["import", url, "-"], ["copy", source, url]):
        done = cli(*command, stdin=_jsonl(_sample()))
        assert done.code == 2, done.out
        line = _one_line_error(done.err)
        assert f"{url} keeps data in this process only" in line
        assert done.out == ""


#: A line whose metadata nests far beyond any recursion limit.
DEEP_LINE = (
    '{"conversation_id":"c9","v":1,"id":"m9","role":"user","content":"x",'
    '"metadata":{"k":' + "[" * 500_000 + "]" * 500_000 + "}}\n"
)


@pytest.mark.parametrize("good_before", [False, True], ids=["first", "after good"])
def test_a_line_nested_beyond_any_recursion_limit_is_named(
    cli: Cli, store_kind: str, tmp_path: Path, good_before: bool
) -> None:
    url = file_url(store_kind, tmp_path / "store")
    good = _jsonl(_sample()) if good_before else ""
    (tmp_path / "in.jsonl").write_text(good + DEEP_LINE, encoding="utf-8")
    done = cli("import", url, "in.jsonl")
    assert done.code == 1
    number = len(good.splitlines()) + 1
    line = _one_line_error(done.err)
    assert f"in.jsonl:{number}: JSON text nests deeper than 65 levels" in line
    assert "Recursion" not in done.err
    assert str(tmp_path / "store") not in line  # the store is not blamed
    assert not (tmp_path / "store.json").exists()
    assert not (tmp_path / "store.db").exists()
