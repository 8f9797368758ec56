"""matplotlib PNGs (Agg backend, imported lazily: it costs ~0.3 s)."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from bot.core.report import Report


def acceptance_chart(report: Report, path: Path) -> Path:
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
    path = path if path.suffix.lower() == ".png" else path.with_name(path.name + ".png")
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, format="png")
    return path


def _figure(width: float, height: float) -> tuple[Any, Any]:
    """A figure of its own (no pyplot): job threads draw charts at the same time, and pyplot's global
    state is not thread-safe; a Figure that goes out of scope is simply collected."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    fig = Figure(figsize=(width, height), dpi=110)
    FigureCanvasAgg(fig)
    return fig, fig.add_subplot(1, 1, 1)


def trend_chart(host: str, samples: list[tuple[float, bool, dict[str, Any]]], baseline: float | None) -> bytes:
    """Mean acceptance length and generation throughput over time (the health report's chart)."""
    import io
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
    buf = io.BytesIO()
    fig.savefig(buf, format="png")
    return buf.getvalue()
