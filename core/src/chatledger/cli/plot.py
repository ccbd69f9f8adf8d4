"""``chatledger bench --plot``: the figures drawn with matplotlib."""

from __future__ import annotations

from typing import Any

from chatledger.benchmark import OPERATIONS
from chatledger.cli.errors import UsageError

__all__ = ["PLOT_HINT", "plot", "require_matplotlib"]

PLOT_HINT = "pip install 'chatledger[plot]'"


def require_matplotlib() -> None:
    """Refuse ``--plot`` before measuring when matplotlib is missing."""
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        raise UsageError(f"--plot needs matplotlib: {PLOT_HINT}") from None


def plot(
    path: str, url: str, floor_name: str | None, results: list[dict[str, Any]]
) -> None:
    """Draw p50 (solid) and p95 (dashed) against W, one panel per operation."""
    import matplotlib

    matplotlib.use("Agg")
    from matplotlib import pyplot
    from matplotlib.ticker import NullLocator

    figure, panels = pyplot.subplots(1, len(OPERATIONS), figsize=(10, 4))
    try:
        for panel, operation in zip(panels, OPERATIONS, strict=True):
            rows = [r for r in results if r["operation"] == operation]
            for who, label in (("chatledger", "chatledger"), ("floor", floor_name)):
                points = [(r["window"], r[who]) for r in rows if r[who] is not None]
                if not points or label is None:
                    continue
                windows = [w for w, _ in points]
                line = panel.plot(
                    windows,
                    [s["p50_us"] for _, s in points],
                    "o-",
                    label=f"{label} p50",
                )
                panel.plot(
                    windows,
                    [s["p95_us"] for _, s in points],
                    "--",
                    color=line[0].get_color(),
                    label=f"{label} p95",
                )
            panel.set_xscale("log")
            panel.set_yscale("log")
            panel.xaxis.set_minor_locator(NullLocator())
            shown = sorted({r["window"] for r in rows})
            panel.set_xticks(shown, [str(w) for w in shown])
            panel.set_xlabel("window W (messages)")
            panel.set_ylabel("microseconds")
            panel.set_title(operation)
            panel.legend()
        figure.suptitle(url)
        figure.tight_layout()
        figure.savefig(path)
    finally:
        pyplot.close(figure)
