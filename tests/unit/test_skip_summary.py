"""The skip summary of a run: ten lines at most, each saying how to run them."""

from __future__ import annotations

import re

from tests.skips import MAX_LINES, skip_lines

_SERVER = (
    "{}: no Docker daemon answers; set CHATLEDGER_TEST_{}_URL to a server URL "
    "or start a Docker daemon (testcontainers)"
)
#: What the README's test command skipped without servers: (count, node id,
#: reason), as its summary listed them in 37 lines.
RUN = [
    *[
        (
            count,
            f"tests/conformance/test_{name}.py::test_x",
            _SERVER.format(name, name.upper()),
        )
        for name, count in [
            ("cassandra", 374),
            ("mariadb", 794),
            ("mongodb", 378),
            ("mssql", 139),
            ("mysql", 139),
            ("neo4j", 455),
            ("oracle", 139),
            ("postgresql", 698),
            ("redis", 458),
        ]
    ],
    (
        318,
        "tests/redis/test_cluster.py::test_x",
        "redis_cluster: no URL set; set CHATLEDGER_TEST_REDIS_CLUSTER_URL to a "
        "server URL",
    ),
    (1, "tests/redis/test_x.py::t", "set CHATLEDGER_TEST_REDIS_CLUSTER_URL to a node"),
    (
        8,
        "tests/docs/test_examples.py::test_example_runs[a]",
        "needs a Cassandra server",
    ),
    (
        2,
        "tests/docs/test_examples.py::test_example_runs[b]",
        "needs a PostgreSQL server; the repository creates and calls it",
    ),
    (
        1,
        "tests/docs/test_examples.py::test_example_runs[c]",
        "needs your own adapter (acme_chat stands for it)",
    ),
    (
        1,
        "tests/docs/test_examples.py::test_example_runs[d]",
        "shell commands (tests/cli runs the command itself)",
    ),
    (
        16,
        "tests/install/test_readme_install.py::t",
        "installs from PyPI into fresh virtualenvs: run with --run-install",
    ),
    (
        27,
        "tests/reliability/test_stress.py::t",
        "slow stress test: run with --run-slow",
    ),
    (
        1,
        "tests/cli/test_bench.py::t",
        "matplotlib is not installed: pip install 'chatledger[plot]'",
    ),
    (
        1,
        "tests/unit/test_async_to_sync.py::t",
        "no Python 3.12+ here to tokenize f-strings as FSTRING_MIDDLE: run under "
        "Python 3.12 or later",
    ),
    (
        14,
        "tests/reliability/test_hostile_input.py::t",
        "memory: no name reaches a query",
    ),
    (
        4,
        "tests/reliability/test_faults.py::t",
        "memory: the repository has no fault points",
    ),
    (2, "tests/reliability/test_faults.py::u", "duckdb: no server connection to kill"),
    (18, "tests/unit/test_bulk.py::t", "the repository has no save_many"),
    (
        1,
        "tests/cli/test_cli.py::t",
        "every adapter is installed here (tests/unit covers it)",
    ),
]


def _skips(run: list[tuple[int, str, str]]) -> list[tuple[str, str]]:
    return [(nodeid, reason) for count, nodeid, reason in run for _ in range(count)]


def _counted(lines: list[str]) -> int:
    return sum(int(line.split()[0]) for line in lines)


def test_a_run_without_servers_fits_in_ten_lines_that_say_how() -> None:
    lines = skip_lines(_skips(RUN))
    assert len(lines) <= MAX_LINES
    assert _counted(lines) == sum(count for count, _, _ in RUN)
    how = re.compile(r"set CHATLEDGER_TEST_|run with --|run them|pip install|run under")
    for line in lines[:-1]:
        assert how.search(line), line
    assert "the backends that have it run them" in lines[-1]
    assert (
        "    16  installs from PyPI into fresh virtualenvs: run with --run-install"
        in lines
    )
    server = lines[0]
    assert server.split()[0] == str(3892 + 1)
    assert "postgresql 698" in server
    assert "redis_cluster 319" in server
    assert "CHATLEDGER_TEST_<BACKEND>_URL" in server
    assert any(
        "documentation examples" in line and line.split()[0] == "12" for line in lines
    )
    # The reasons that only say what a backend lacks are not shown one by one.
    assert not any("no name reaches a query" in line for line in lines)


def test_reasons_beyond_ten_lines_are_counted_in_the_last() -> None:
    run = [
        (1, f"tests/x.py::t{n}", f"needs {n}: pip install thing{n}") for n in range(20)
    ]
    lines = skip_lines(_skips(run))
    assert len(lines) == MAX_LINES
    assert _counted(lines) == 20
    assert "pytest -rs" in lines[-1]
