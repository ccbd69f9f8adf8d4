"""Print the results: one table per backend, the ratios, and the targets.

Example:
    print(render(backend_results, codec_stats))

Ratios are taken on medians (p50) of the same interleaved run. A ratio over 1
means ours is slower than the thing it is compared with, except
``rewrite/ours``, which says how many times faster ours is than a full rewrite.
"""

from __future__ import annotations

from dataclasses import dataclass

from bench.async_runner import TASKS, AsyncBackend
from bench.backends import Backend, Setup
from bench.log_size import LOG_WINDOW, SHORT_LOG, LogSizeResults
from bench.runner import REWRITE_WINDOWS, WINDOWS, Results, Stats
from chatledger.benchmark import ratio

__all__ = [
    "AsyncReport",
    "BackendReport",
    "Target",
    "async_targets",
    "log_size_ratio_name",
    "render",
    "render_async",
    "targets",
]

#: Ours read of a window / the floor's SELECT plus ``json.loads`` of every row,
#: by window size: a small window may spend a little on its view; a large one
#: must decode no slower than ``json.loads``.
READ_TARGETS = {20: 1.2, 200: 1.0, 2000: 1.0}
#: Ours append at W=2000 / at W=20: an append must not grow with the window.
GROWTH_TARGET = 1.1
REWRITE_TARGET = 10.0
ASYNC_APPEND_TARGET = 1.2
#: The window read of a long log / of a log of 100: a read must not grow
#: with the log behind the window.
LOG_SIZE_TARGET = 1.1


@dataclass
class BackendReport:
    """One backend's results with what describes it."""

    backend: Backend
    setup: Setup | None
    results: Results | None
    skipped: str | None = None


@dataclass(frozen=True)
class Target:
    """One target, its measured value and whether it is met."""

    backend: str
    what: str
    value: float | None
    limit: float
    higher_is_better: bool = False

    @property
    def met(self) -> bool | None:
        """``None`` when it could not be measured."""
        if self.value is None:
            return None
        if self.higher_is_better:
            return self.value >= self.limit
        return self.value <= self.limit

    def line(self) -> str:
        """A line of the targets section."""
        state = {True: "MET   ", False: "MISSED", None: "n/a   "}[self.met]
        sign = ">=" if self.higher_is_better else "<="
        value = "-" if self.value is None else f"{self.value:.2f}"
        return (
            f"  [{state}] {self.backend:<12} {self.what:<30} {value:>7}"
            f"  (target {sign} {self.limit:g})"
        )


def _cell(stats: Stats | None) -> str:
    if stats is None:
        return f"{'-':>17}"
    return f"{_fmt(stats.p50):>8} /{_fmt(stats.p95):>8}"


def _fmt(us: float) -> str:
    return f"{us:.1f}" if us < 100 else f"{us:.0f}"


def _rx(value: float | None) -> str:
    return f"{'-':>6}" if value is None else f"{value:>6.2f}"


def _count(messages: int) -> str:
    """``100000`` as ``100k``; a count not in thousands as it is."""
    return f"{messages // 1000}k" if messages % 1000 == 0 else str(messages)


def log_size_ratio_name(found: LogSizeResults) -> str:
    """The name of the long-log ratio: ``read 100k-log/100-log``."""
    return f"read {_count(found.size)}-log/{_count(SHORT_LOG)}-log"


def _log_size_line(found: LogSizeResults) -> str:
    """The long-log read's line under a backend's table."""
    value = "-" if found.ratio is None else f"{found.ratio:.2f}"
    reads = ""
    if found.long is not None and found.short is not None:
        reads = (
            f" (p50 {_fmt(found.long.p50)} / {_fmt(found.short.p50)} us, "
            f"client CPU {_fmt(found.long.cpu)} / {_fmt(found.short.cpu)} us, "
            f"{found.long.n:,} reads each)"
        )
    return (
        f"   {log_size_ratio_name(found)} at W={LOG_WINDOW}: {value}{reads}; "
        f"{found.size:,} messages loaded in {found.load_seconds:.1f} s "
        f"(appends of {found.batch:,}), {found.seconds:.1f} s in all"
    )


def ratios(results: Results) -> dict[str, float | None]:
    """The headline ratios of one backend."""
    lat = results.latency.get
    out: dict[str, float | None] = {}
    for w in WINDOWS:
        out[f"append/floor W={w}"] = ratio(
            lat(("ours_append", w)), lat(("floor_append", w))
        )
        out[f"bounded append/floor W={w}"] = ratio(
            lat(("ours_append_bounded", w)), lat(("floor_append", w))
        )
        out[f"read/floor W={w}"] = ratio(lat(("ours_read", w)), lat(("floor_read", w)))
        out[f"read/(floor+json) W={w}"] = ratio(
            lat(("ours_read", w)), lat(("floor_read_json", w))
        )
    for w in REWRITE_WINDOWS:
        out[f"rewrite/ours W={w}"] = ratio(
            lat(("rewrite_append", w)), lat(("ours_append", w))
        )
    out["append W=2000/W=20"] = ratio(
        lat(("ours_append", 2000)), lat(("ours_append", 20))
    )
    if results.throughput.get(1):
        out["throughput 8/1 threads"] = (
            results.throughput.get(8, 0.0) / results.throughput[1]
        )
    if results.log_size is not None:
        out[log_size_ratio_name(results.log_size)] = results.log_size.ratio
    return out


def targets(reports: list[BackendReport]) -> list[Target]:
    """Every target, for every backend that ran our repository."""
    found: list[Target] = []
    for report in reports:
        if (
            report.results is None
            or report.setup is None
            or report.setup.repository is None
        ):
            continue
        label = report.backend.label
        r = ratios(report.results)
        if report.backend.append_target is not None:
            found.extend(
                Target(
                    label,
                    f"append/floor at W={w}",
                    r[f"append/floor W={w}"],
                    report.backend.append_target,
                )
                for w in WINDOWS
            )
            found.extend(
                Target(
                    label,
                    f"append/floor at W={w}, Retention.last({w})",
                    r[f"bounded append/floor W={w}"],
                    report.backend.append_target,
                )
                for w in WINDOWS
                if r[f"bounded append/floor W={w}"] is not None
            )
        found.append(
            Target(
                label, "append W=2000 / W=20", r["append W=2000/W=20"], GROWTH_TARGET
            )
        )
        found.append(
            Target(
                label,
                "full rewrite / ours at W=200",
                r["rewrite/ours W=200"],
                REWRITE_TARGET,
                True,
            )
        )
        found.extend(
            Target(
                label,
                f"read/(floor+json) at W={w}",
                r[f"read/(floor+json) W={w}"],
                READ_TARGETS[w],
            )
            for w in WINDOWS
        )
        if report.results.log_size is not None:
            log_size = report.results.log_size
            found.append(
                Target(
                    label,
                    f"{log_size_ratio_name(log_size)} at W={LOG_WINDOW}",
                    log_size.ratio,
                    LOG_SIZE_TARGET,
                )
            )
    return found


def render(
    reports: list[BackendReport], codec_stats: dict[tuple[str, int], Stats]
) -> str:
    """The whole printout."""
    lines: list[str] = []
    head = (
        f"{'W':>5} | {'ours append':>17} | {'floor append':>17} | {'xfloor':>6} | "
        f"{'full rewrite':>17} | {'rw/ours':>7} | {'ours read':>17} | "
        f"{'floor read':>17} | {'xfloor':>6} | {'floor read+json':>17} | {'x f+j':>6}"
    )
    lines.append("Latency in microseconds, p50 / p95; ratios on p50.")
    for report in reports:
        b = report.backend
        lines.append("")
        if report.results is None or report.setup is None:
            lines.append(f"== {b.label}: skipped ({report.skipped})")
            continue
        setup, results = report.setup, report.results
        extra = f"; {', '.join(setup.notes)}" if setup.notes else ""
        lines.append(f"== {b.label} (floor: {setup.floor.name}{extra})")
        if setup.missing:
            lines.append(f"   our repository not measured: {setup.missing}")
        lines.append(head)
        lines.append("-" * len(head))
        lat = results.latency.get
        for w in WINDOWS:
            oa, fa, rw = (
                lat(("ours_append", w)),
                lat(("floor_append", w)),
                lat(("rewrite_append", w)),
            )
            orr, fr = lat(("ours_read", w)), lat(("floor_read", w))
            frd = lat(("floor_read_json", w))
            rw_ratio = ratio(rw, oa)
            rw_text = "-" if rw_ratio is None else f"{rw_ratio:.1f}x"
            lines.append(
                f"{w:>5} | {_cell(oa)} | {_cell(fa)} | {_rx(ratio(oa, fa))} | "
                f"{_cell(rw)} | {rw_text:>7} | {_cell(orr)} | {_cell(fr)} | "
                f"{_rx(ratio(orr, fr))} | {_cell(frd)} | {_rx(ratio(orr, frd))}"
            )
        r = ratios(results)
        growth = r["append W=2000/W=20"]
        summary = f"   append W=2000/W=20: {'-' if growth is None else f'{growth:.2f}'}"
        if results.throughput:
            t1, t8 = results.throughput.get(1, 0.0), results.throughput.get(8, 0.0)
            scale = t8 / t1 if t1 else 0.0
            summary += (
                f"; throughput (ours, W=20): 1 thread {t1:,.0f}/s, "
                f"8 threads {t8:,.0f}/s (x{scale:.2f})"
            )
        lines.append(summary)
        cpu = []
        for kind in ("ours_append", "floor_append", "ours_read", "floor_read"):
            values = [lat((kind, w)) for w in WINDOWS]
            if any(v is not None for v in values):
                cpu.append(
                    f"{kind} "
                    + "/".join("-" if v is None else _fmt(v.cpu) for v in values)
                )
        if cpu:
            lines.append("   client CPU us/op at W=20/200/2000: " + "; ".join(cpu))
        if results.log_size is not None:
            lines.append(_log_size_line(results.log_size))
        for error in results.errors:
            lines.append(f"   ERROR {error}")
    if codec_stats:
        lines.append("")
        lines.append(
            "Codec alone (no I/O), p50 / p95 us: "
            + ", ".join(
                f"{kind} {n}: {_fmt(s.p50)} / {_fmt(s.p95)}"
                for (kind, n), s in codec_stats.items()
            )
        )
    found = targets(reports)
    if found:
        lines.append("")
        lines.append("Targets:")
        lines.extend(t.line() for t in found)
    return "\n".join(lines)


@dataclass
class AsyncReport:
    """One backend's async results, or why it was skipped."""

    backend: AsyncBackend
    results: Results | None
    notes: list[str]
    skipped: str | None = None


def async_targets(reports: list[AsyncReport]) -> list[Target]:
    """The async targets: async append near the sync one, throughput with tasks."""
    found: list[Target] = []
    for report in reports:
        if report.results is None:
            continue
        lat = report.results.latency.get
        label = report.backend.label
        found.append(
            Target(
                label,
                "async append / sync at W=20",
                ratio(lat(("async_append", 20)), lat(("sync_append", 20))),
                ASYNC_APPEND_TARGET,
            )
        )
        if report.backend.throughput_target is not None:
            one = report.results.throughput.get(1)
            many = report.results.throughput.get(TASKS[-1])
            found.append(
                Target(
                    label,
                    f"async throughput {TASKS[-1]}/1 tasks",
                    many / one if one and many is not None else None,
                    report.backend.throughput_target,
                    True,
                )
            )
    return found


def render_async(reports: list[AsyncReport]) -> str:
    """The async section: one table per backend and its throughput line."""
    lines = ["Async twin, latency in microseconds, p50 / p95; ratios on p50."]
    head = (
        f"{'W':>5} | {'async append':>17} | {'async floor':>17} | {'xfloor':>6} | "
        f"{'sync append':>17} | {'x sync':>6} | {'async read':>17} | "
        f"{'async floor read':>17} | {'xfloor':>6}"
    )
    for report in reports:
        b = report.backend
        lines.append("")
        if report.results is None:
            lines.append(f"== {b.label} async: skipped ({report.skipped})")
            continue
        notes = f"; {', '.join(report.notes)}" if report.notes else ""
        lines.append(f"== {b.label} async (floor: {b.floor_name}{notes})")
        lines.append(head)
        lines.append("-" * len(head))
        lat = report.results.latency.get
        for w in WINDOWS:
            aa, fa, sa = (
                lat(("async_append", w)),
                lat(("async_floor_append", w)),
                lat(("sync_append", w)),
            )
            ar, fr = lat(("async_read", w)), lat(("async_floor_read", w))
            lines.append(
                f"{w:>5} | {_cell(aa)} | {_cell(fa)} | {_rx(ratio(aa, fa))} | "
                f"{_cell(sa)} | {_rx(ratio(aa, sa))} | {_cell(ar)} | {_cell(fr)} | "
                f"{_rx(ratio(ar, fr))}"
            )
        tput = report.results.throughput
        if tput:
            lines.append(
                "   throughput (ours, W=20): "
                + ", ".join(f"{n} tasks {tput[n]:,.0f}/s" for n in TASKS if n in tput)
            )
        for error in report.results.errors:
            lines.append(f"   ERROR {error}")
    return "\n".join(lines)
