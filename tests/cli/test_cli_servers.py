"""The command against live servers: copy between backends, exact round trips."""

from __future__ import annotations

import importlib.util
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from sqlalchemy import create_engine, inspect

from chatledger import connect
from tests.backends import backend_url
from tests.cli.conftest import HAVE_SQL, NO_SQL, QUICK_SUITE, Cli, file_url
from tests.cli.test_cli import _jsonl, _one_line_error, _sample
from tests.cli.test_import import DEEP_LINE

HAVE_REDIS = importlib.util.find_spec("chatledger_redis") is not None


@pytest.fixture
def redis_store(cli: Cli) -> Iterator[tuple[str, str]]:
    """A Redis URL and a key-prefix option unique to this test; emptied after."""
    if not HAVE_REDIS:
        pytest.skip(
            "chatledger-redis is not installed (pip install -e ./packages/redis)"
        )
    url = backend_url("redis")
    option = f"key_prefix=cli_{uuid.uuid4().hex[:10]}:"
    yield url, option
    for cid in cli("ls", url, "-o", option).out.splitlines():
        cli("rm", url, cid, "-o", option)


class TestRedisCli:
    def test_import_export_copy_round_trip(
        self, cli: Cli, redis_store: tuple[str, str], tmp_path: Path
    ) -> None:
        url, option = redis_store
        text = _jsonl(_sample())
        assert cli("import", url, "-", "-o", option, stdin=text).code == 0
        exported = cli("export", url, "-o", option)
        assert exported.code == 0, exported.err
        assert exported.out == text
        target = file_url("testfile", tmp_path / "copy")
        for _ in range(2):
            copied = cli("copy", url, target, "-o", option)
            assert copied.code == 0, copied.err
            assert cli("export", target).out == text

    def test_ls_of_an_empty_prefix_says_so(
        self, cli: Cli, redis_store: tuple[str, str]
    ) -> None:
        # A typo in the prefix finds nothing: the command says where it looked.
        url, option = redis_store
        prefix = option.partition("=")[2]
        done = cli("ls", url, "-o", option)
        assert done.code == 0, done.err
        assert done.out == ""
        assert done.err == (
            f"no conversation is stored under the key prefix {prefix!r} in {url}\n"
        )
        assert cli("import", url, "-", "-o", option, stdin=_jsonl(_sample())).code == 0
        listed = cli("ls", url, "-o", option, "--times")
        assert (listed.code, listed.err) == (0, "")
        assert len(listed.out.splitlines()) == 2

    @pytest.mark.parametrize("twin", [(), ("--async",)], ids=["sync", "async"])
    def test_conformance_runs_the_ttl_cases(
        self, cli: Cli, redis_store: tuple[str, str], twin: tuple[str, ...]
    ) -> None:
        url, _ = redis_store
        done = cli(
            "conformance",
            *twin,
            url,
            "--namespace-option",
            "key_prefix",
            "--",
            "-k",
            "expires_whole or slides_on_every_write",
        )
        assert done.code == 0, done.out + done.err
        summary = done.out.strip().splitlines()[-1]
        assert summary.endswith("(atomic window append; TTL): 2 passed"), summary

    def test_conformance_in_a_namespace(
        self, cli: Cli, redis_store: tuple[str, str]
    ) -> None:
        url, _ = redis_store
        done = cli("conformance", url, "--namespace-option", "key_prefix", *QUICK_SUITE)
        assert done.code == 0, done.out + done.err
        summary = done.out.strip().splitlines()[-1]
        assert "(atomic window append;" in summary
        assert "failed" not in summary
        assert "error" not in summary


@pytest.mark.skipif(not HAVE_SQL, reason=NO_SQL)
class TestPostgresqlCli:
    def test_copy_sqlite_to_postgresql_exports_identically(
        self, cli: Cli, tmp_path: Path
    ) -> None:
        source = file_url("sqlite", tmp_path / "a")
        target = backend_url("postgresql")
        table = f"cli_{uuid.uuid4().hex[:12]}"
        option = f"table_name={table}"
        text = _jsonl(_sample())
        assert cli("import", source, "-", stdin=text).code == 0
        try:
            for _ in range(2):
                copied = cli("copy", source, target, "--target-option", option)
                assert copied.code == 0, copied.err
                assert "copied 2 conversations" in copied.out
            assert cli("export", target, "-o", option).out == cli("export", source).out
            assert cli("export", source).out == text
        finally:
            repository = connect(target, table_name=table)
            repository.drop_schema()  # type: ignore[attr-defined]
            repository.close()  # type: ignore[attr-defined]

    def test_reading_a_missing_table_names_it_and_creates_none(self, cli: Cli) -> None:
        url = backend_url("postgresql")
        table = f"cli_{uuid.uuid4().hex[:12]}"
        for command in (["ls", url], ["show", url, "c1"], ["export", url]):
            done = cli(*command, "-o", f"table_name={table}")
            assert done.code == 1, done.err
            assert f"table '{table}' does not exist" in done.err
        engine = create_engine(url)
        try:
            assert not inspect(engine).has_table(table)
        finally:
            engine.dispose()

    def test_a_deeply_nested_line_is_named_and_nothing_is_written(
        self, cli: Cli, tmp_path: Path
    ) -> None:
        url = backend_url("postgresql")
        table = f"cli_{uuid.uuid4().hex[:12]}"
        good = _jsonl(_sample())
        (tmp_path / "in.jsonl").write_text(good + DEEP_LINE, encoding="utf-8")
        done = cli("import", url, "in.jsonl", "-o", f"table_name={table}")
        assert done.code == 1, done.err
        number = len(good.splitlines()) + 1
        line = _one_line_error(done.err)
        assert f"in.jsonl:{number}: JSON text nests deeper than 65 levels" in line
        assert "Recursion" not in line
        assert "postgresql" not in line  # the database is not blamed
        engine = create_engine(url)
        try:
            assert not inspect(engine).has_table(table)
        finally:
            engine.dispose()

    def test_postgres_scheme_reaches_postgresql(self, cli: Cli, tmp_path: Path) -> None:
        url = backend_url("postgresql")
        scheme, rest = url.split("://", 1)
        assert scheme.partition("+")[0] == "postgresql"
        table = f"cli_{uuid.uuid4().hex[:12]}"
        option = f"table_name={table}"
        text = _jsonl(_sample())
        try:
            done = cli("import", f"postgres://{rest}", "-", "-o", option, stdin=text)
            assert done.code == 0, done.err
            assert cli("export", url, "-o", option).out == text
        finally:
            repository = connect(url, table_name=table)
            repository.drop_schema()  # type: ignore[attr-defined]
            repository.close()  # type: ignore[attr-defined]


HAVE_CASSANDRA = importlib.util.find_spec("chatledger_cassandra") is not None


@pytest.fixture
def cassandra_store(required: set[str]) -> Iterator[tuple[str, list[str]]]:
    """A Cassandra URL and the options of a table unique to this test; dropped after."""
    if not HAVE_CASSANDRA:
        pytest.skip(
            "chatledger-cassandra is not installed "
            "(pip install -e ./packages/cassandra)"
        )
    url = backend_url("cassandra", required)
    table = f"cli_{uuid.uuid4().hex[:12]}"
    yield url, ["-o", f"table={table}", "-o", "create_keyspace=true"]
    repository = connect(url, table=table, create_schema=False)
    try:
        repository.drop_schema()  # type: ignore[attr-defined]
    finally:
        repository.close()  # type: ignore[attr-defined]


class TestCassandraCli:
    def test_import_export_copy_round_trip(
        self, cli: Cli, cassandra_store: tuple[str, list[str]], tmp_path: Path
    ) -> None:
        url, options = cassandra_store
        text = _jsonl(_sample())
        imported = cli("import", url, "-", *options, stdin=text)
        assert imported.code == 0, imported.err
        exported = cli("export", url, *options)
        assert exported.code == 0, exported.err
        assert exported.out == text
        target = file_url("testfile", tmp_path / "copy")
        for _ in range(2):
            copied = cli("copy", url, target, *options)
            assert copied.code == 0, copied.err
            assert cli("export", target).out == text

    def test_conformance_in_a_namespace(
        self, cli: Cli, cassandra_store: tuple[str, list[str]]
    ) -> None:
        url, _ = cassandra_store
        # Each of its ~170 tests makes and drops two tables: about a second
        # apiece on Cassandra, more on a loaded machine.
        done = cli(
            "conformance",
            url,
            "--namespace-option",
            "table",
            "-o",
            "create_keyspace=true",
            *QUICK_SUITE,
            timeout=600,
        )
        assert done.code == 0, done.out + done.err
        summary = done.out.strip().splitlines()[-1]
        assert "(atomic window append;" in summary
        assert "failed" not in summary
        assert "error" not in summary
