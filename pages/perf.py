"""Performance plots: latency (raw and quantiles) and throughput, nemesis intervals shaded.

Headless (matplotlib's Agg backend), so they render on CI and in containers.
Files: plots/latency-raw.png, plots/latency-quantiles.png, plots/rate.png.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from faultline.checkers.ops import has_times, nemesis_intervals, op_time, pairs
from faultline.core import Op

COLOURS = {"ok": "#2e8b3a", "fail": "#c0392b", "info": "#c98a00"}
NEMESIS_COLOUR = "#888888"


def _shade(ax: Any, history: list[Op], t0: float, t_end: float) -> None:
    intervals, _ = nemesis_intervals(history)
    labelled = False
    for iv in intervals:
        end = iv.end if iv.end is not None else t_end
        ax.axvspan(
            iv.start - t0,
            end - t0,
            color=NEMESIS_COLOUR,
            alpha=0.18,
            lw=0,
            label=None if labelled else "nemesis",
        )
        labelled = True


def _quantile(sorted_xs: list[float], q: float) -> float:
    if not sorted_xs:
        return float("nan")
    i = min(len(sorted_xs) - 1, max(0, round(q * (len(sorted_xs) - 1))))
    return sorted_xs[i]


def _figure() -> tuple[Any, Any]:
    """One 10x4-inch figure with fixed margins. Built without pyplot (whose import and global state cost
    about 1.5 s per run) and without tight_layout (about 0.5 s per plot): the labels here are short and
    the same in every plot, so fixed margins fit them."""
    from matplotlib.figure import Figure

    fig = Figure(figsize=(10, 4), dpi=90)
    fig.subplots_adjust(left=0.07, right=0.98, bottom=0.13, top=0.91)
    return fig, fig.add_subplot()


def _save(fig: Any, path: Path) -> Path:
    """Renders `fig` to PNG (a Figure made without pyplot draws with the headless Agg canvas)."""
    fig.savefig(path)
    return path


@dataclass
class _Frame:
    """What the three plots share: the completed client ops, the time axis and its buckets."""

    history: list[Op]
    ps: list[Any]  # pairs with a completion
    timed: bool
    t0: float
    t_end: float
    span: float
    bucket: float
    title: str | None

    @property
    def unit(self) -> str:
        return "s" if self.timed else "op index"

    def finish(self, ax: Any, drawn: bool, log: bool, ylabel: str, title: str, **legend_opts: Any) -> None:
        """Shades the nemesis intervals, and when anything was `drawn` puts a legend (and a log y axis
        if `log`); then labels the axes."""
        _shade(ax, self.history, self.t0, self.t_end)
        if drawn:
            if log:
                ax.set_yscale("log")
            ax.legend(loc="upper right", **legend_opts)
        ax.set_xlabel(f"time ({self.unit})")
        ax.set_ylabel(ylabel)
        ax.set_title(title)


def write_plots(
    history: list[Op],
    out_dir: str | Path,
    test: Mapping[str, Any] | None = None,
    bucket_s: float | None = None,
) -> list[Path]:
    """Draws the three plots into `out_dir` (created if needed); returns the paths written."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    timed = has_times(history)
    t0 = min((op_time(op) for op in history), default=0.0)
    t_end = max((op_time(op) for op in history), default=0.0)
    span = max(t_end - t0, 1e-9)
    frame = _Frame(
        history=history,
        ps=[p for p in pairs(history) if p.completion is not None],
        timed=timed,
        t0=t0,
        t_end=t_end,
        span=span,
        bucket=bucket_s or max(span / 100, 1e-3 if timed else 1.0),
        title=str((test or {}).get("name", "")) or None,
    )
    return [
        _save(_latency_raw(frame), out / "latency-raw.png"),
        _save(_latency_quantiles(frame), out / "latency-quantiles.png"),
        _save(_rate(frame), out / "rate.png"),
    ]


def _latency_raw(fr: _Frame) -> Any:
    """One point per completed op, by f and outcome."""
    fig, ax = _figure()
    groups: dict[tuple[str, str], tuple[list[float], list[float]]] = defaultdict(lambda: ([], []))
    for p in fr.ps:
        lat = op_time(p.done) - op_time(p.invoke)
        xs, ys = groups[(str(p.f), p.type)]
        xs.append(op_time(p.invoke) - fr.t0)
        ys.append(max(lat * (1000 if fr.timed else 1), 1e-3))
    markers = ["o", "s", "^", "v", "D", "x", "+", "*"]
    fs = sorted({f for f, _ in groups})
    for (f, ty), (xs, ys) in sorted(groups.items()):
        ax.scatter(
            xs,
            ys,
            s=4,
            alpha=0.6,
            color=COLOURS.get(ty, "#555"),
            marker=markers[fs.index(f) % 8],
            label=f"{f} {ty}",
        )
    ylabel = "latency (ms)" if fr.timed else "latency (ops)"
    fr.finish(ax, bool(groups), True, ylabel, fr.title or "latency", fontsize=7, markerscale=3, ncol=2)
    return fig


def _latency_quantiles(fr: _Frame) -> Any:
    """Per bucket, 0.5 / 0.95 / 0.99 / max of ok latencies."""
    fig, ax = _figure()
    buckets: dict[int, list[float]] = defaultdict(list)
    for p in fr.ps:
        if p.type == "ok":
            lat = (op_time(p.done) - op_time(p.invoke)) * (1000 if fr.timed else 1)
            buckets[int((op_time(p.invoke) - fr.t0) // fr.bucket)].append(max(lat, 1e-3))
    keys = sorted(buckets)
    for q, style in ((0.5, "-"), (0.95, "--"), (0.99, ":"), (1.0, "-.")):
        ys = [_quantile(sorted(buckets[k]), q) for k in keys]
        ax.plot([k * fr.bucket for k in keys], ys, style, label=f"p{int(q * 100)}" if q < 1 else "max")
    ylabel = "ok latency (ms)" if fr.timed else "ok latency (ops)"
    fr.finish(
        ax, bool(keys), True, ylabel, (fr.title + ": " if fr.title else "") + "latency quantiles", fontsize=8
    )
    return fig


def _rate(fr: _Frame) -> Any:
    """Completions per second by outcome."""
    fig, ax = _figure()
    counts: dict[str, dict[int, int]] = defaultdict(lambda: defaultdict(int))
    for p in fr.ps:
        counts[p.type][int((op_time(p.done) - fr.t0) // fr.bucket)] += 1
    nb = int(fr.span // fr.bucket) + 1
    for ty in ("ok", "info", "fail"):
        if ty in counts:
            ax.plot(
                [i * fr.bucket for i in range(nb)],
                [counts[ty].get(i, 0) / fr.bucket for i in range(nb)],
                color=COLOURS[ty],
                label=ty,
            )
    ylabel = "ops / s" if fr.timed else "ops / op"
    fr.finish(
        ax, bool(counts), False, ylabel, (fr.title + ": " if fr.title else "") + "throughput", fontsize=8
    )
    return fig
