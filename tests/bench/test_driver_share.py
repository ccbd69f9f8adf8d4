"""The driver's share of an append or a read: what it times, and its lines.

Nothing is held to a figure: the timings are the benchmark's business. These
tests check that the wrappers time the driver's part of the operations the
memory really runs (more than nothing, less than the whole), and that a run
prints one line per backend.
"""

from __future__ import annotations

import re

import pytest

from bench.driver_share import _measure, main

LINE = re.compile(
    r"^sqlite +(?P<floor>[\d.]+) +(?P<ours>[\d.]+) +(?P<driver>[\d.]+) "
    r"+[\d.]+ +[\d.]+ +-?[\d.]+$",
    re.M,
)


@pytest.mark.parametrize("reads", [False, True], ids=["appends", "reads"])
def test_the_driver_part_is_timed_inside_each_operation(reads: bool) -> None:
    found = _measure("sqlite", 5, 20, reads=reads)
    assert found is not None
    assert 0 < found["driver"] < found["ours"]
    assert found["floor"] > 0


def test_a_run_prints_one_line_for_the_backend(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert main(["sqlite", "-n", "3", "--read", "-w", "5"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("W = 5, reads, p50 us\n")
    line = LINE.search(out)
    assert line is not None, out
    assert 0 < float(line["driver"]) < float(line["ours"])


def test_an_unknown_backend_is_refused_before_any_run(
    capsys: pytest.CaptureFixture[str],
) -> None:
    with pytest.raises(SystemExit):
        main(["sqlite", "nosuch"])
    assert "unknown backends: nosuch" in capsys.readouterr().err
