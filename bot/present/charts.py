"""matplotlib PNGs, as bytes (Agg backend, imported lazily: it costs ~0.3 s). Where they go — a Slack upload,
a file — is the caller's."""

from __future__ import annotations

from dataclasses import dataclass
from itertools import cycle
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from bot.core.report import Report
    from bot.core.results.tune import TuneResult

TUNE_COLORS = ("#1565c0", "#2e7d32", "#6a1b9a", "#ef6c00", "#00838f")


def write_png(png: bytes, path: Path) -> Path:
    """`png` written to `path` (".png" added when the name lacks it), its folders made; the path written."""
    path = path if path.suffix.lower() == ".png" else path.with_name(path.name + ".png")
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(png)
    return path


def acceptance_png(report: Report) -> bytes:
    """Per-position acceptance bars, with the healthy reference for the method drawn beside them."""
    ours = report.metrics.per_position
    ref = report.reference.per_position if report.reference else []
    n = max(len(ours), len(ref), 1)
    fig, ax = _figure(max(6.0, 0.55 * n + 2.5), 3.6)
    width = 0.4 if ref else 0.7
    xs = list(range(n))
    if ours:
        ax.bar([x - (width / 2 if ref else 0) for x in range(len(ours))], ours, width,
               label=f"measured (mean {report.metrics.mean_acceptance_length:.2f})"
               if report.metrics.mean_acceptance_length is not None else "measured",
               color={"healthy": "#2e7d32", "degraded": "#f9a825", "failing": "#c62828"}.get(report.verdict, "#1565c0"))
    if ref and report.reference is not None:
        ax.bar([x + width / 2 for x in range(len(ref))], ref, width, label=report.reference.label,
               color="#9e9e9e", alpha=0.8)
    ax.set_xticks(xs, [str(x) for x in xs])
    ax.set_xlabel("speculative position")
    ax.set_ylabel("acceptance rate")
    ax.set_ylim(0, 1.05)
    method = report.context.get("method", "speculative decoding")
    version = report.context.get("vllm_version", "")
    ax.set_title(f"Per-position acceptance: {method} {('on vLLM ' + version) if version else ''}".strip(),
                 fontsize=10)
    ax.legend(fontsize=8, loc="upper right")
    ax.grid(axis="y", alpha=0.3)
    fig.tight_layout()
    return _png(fig)


def _figure(width: float, height: float) -> tuple[Any, Any]:
    """A figure of its own (no pyplot): job threads draw charts at the same time, and pyplot's global
    state is not thread-safe; a Figure that goes out of scope is simply collected."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    fig = Figure(figsize=(width, height), dpi=110)
    FigureCanvasAgg(fig)
    return fig, fig.add_subplot(1, 1, 1)


def _png(fig: Any) -> bytes:
    import io

    buf = io.BytesIO()
    fig.savefig(buf, format="png")
    return buf.getvalue()


def trend_chart(host: str, samples: list[tuple[float, bool, dict[str, Any]]], baseline: float | None) -> bytes:
    """Mean acceptance length and generation throughput over time (the health report's chart)."""
    from datetime import datetime

    times: list[Any] = [datetime.fromtimestamp(at) for at, _, _ in samples]  # matplotlib plots datetimes
    means = [d.get("mean") for _, _, d in samples]
    tps = [d.get("single_tps") or d.get("gen_tps") for _, _, d in samples]
    down: list[Any] = [t for t, (_, up, _) in zip(times, samples, strict=True) if not up]
    fig, ax1 = _figure(8, 3.4)
    ax1.plot(times, [m if m is not None else float("nan") for m in means], color="#1565c0", marker=".",
             label="mean acceptance length")
    ax1.set_ylabel("mean acceptance length")
    # 1.0 is the floor (nothing accepted): start the axis there so a 0.07 change does not look like a crash
    known = [m for m in means if m is not None]
    ax1.set_ylim(1.0, max([*known, 2.0]) * 1.1)
    ax1.axhline(1.0, color="#9e9e9e", linestyle=":", linewidth=1, label="1.0: nothing accepted")
    ax2 = ax1.twinx()
    ax2.plot(times, [t if t is not None else float("nan") for t in tps], color="#ef6c00", alpha=0.7,
             label="generation tok/s")
    if baseline:
        ax2.axhline(baseline, color="#ef6c00", linestyle="--", linewidth=1, label=f"baseline {baseline:g} tok/s")
    ax2.set_ylabel("tokens/s")
    known_tps = [t for t in tps if t is not None] + ([baseline] if baseline else [])
    ax2.set_ylim(0, max([*known_tps, 1.0]) * 1.15)
    for t in down:
        ax1.axvline(t, color="#c62828", alpha=0.15)
    ax1.set_title(f"{host}: acceptance and throughput", fontsize=10)
    lines = ax1.get_legend_handles_labels()[0] + ax2.get_legend_handles_labels()[0]
    labels = ax1.get_legend_handles_labels()[1] + ax2.get_legend_handles_labels()[1]
    # below the plot, not over its first points
    ax1.legend(lines, labels, fontsize=7, loc="upper center", bbox_to_anchor=(0.5, -0.22), ncol=len(labels),
               frameon=False)
    fig.autofmt_xdate()
    fig.tight_layout()
    return _png(fig)


@dataclass(frozen=True)
class _TunePoints:
    """What the tune chart draws: the lowest concurrency measured, and there each method's (k, tok/s, mean
    acceptance) by k, no speculation's tok/s, and every k measured."""

    concurrency: int
    by_method: dict[str, list[tuple[int, float, float | None]]]
    none_tps: float | None
    ks: list[int]


def _tune_points(result: TuneResult) -> _TunePoints:
    rated = [r for r in result.measured if r.tokens_per_s]
    low = min((r.concurrency for r in rated), default=1)
    rated = [r for r in rated if r.concurrency == low]
    by_method: dict[str, list[tuple[int, float, float | None]]] = {}
    for r in rated:
        if r.method != "none" and r.k is not None and r.tokens_per_s:
            by_method.setdefault(r.method, []).append((r.k, r.tokens_per_s, r.mean_acceptance_length))
    none_tps = next((r.tokens_per_s for r in rated if r.method == "none"), None)
    return _TunePoints(low, {m: sorted(by_method[m]) for m in sorted(by_method)}, none_tps,
                       sorted({r.k for r in rated if r.k is not None}))


def tune_png(result: TuneResult) -> bytes:
    """tok/s against k, one line per method at the lowest concurrency (no speculation as a flat line), with mean
    acceptance on a second axis (dashed)."""
    pts = _tune_points(result)
    fig, ax = _figure(7.0, 4.0)
    ax2 = ax.twinx()
    for color, (method, points) in zip(cycle(TUNE_COLORS), pts.by_method.items(), strict=False):
        ax.plot([p[0] for p in points], [p[1] for p in points], marker="o", color=color, label=f"{method} tok/s")
        acc = [(p[0], p[2]) for p in points if p[2] is not None]
        if acc:
            ax2.plot([a[0] for a in acc], [a[1] for a in acc], marker="s", linestyle="--", color=color, alpha=0.6,
                     label=f"{method} mean acceptance")
    if pts.none_tps is not None:
        ax.axhline(pts.none_tps, color="#9e9e9e", linestyle=":", label="no speculation")
    if pts.ks:
        ax.set_xticks(pts.ks, [str(k) for k in pts.ks])
    ax.set_xlabel("num_speculative_tokens (k)")
    ax.set_ylabel(f"generation tok/s (concurrency {pts.concurrency})")
    ax2.set_ylabel("mean acceptance length")
    ax.set_title(f"specops tune: {result.profile} on {result.host}", fontsize=10)
    lines, lines2 = ax.get_legend_handles_labels(), ax2.get_legend_handles_labels()
    ax.legend(lines[0] + lines2[0], lines[1] + lines2[1], fontsize=7, loc="best")
    ax.grid(alpha=0.3)
    fig.tight_layout()
    return _png(fig)
