"""matplotlib PNGs (Agg backend, imported lazily: it costs ~0.3 s)."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from bot.report import Report


def acceptance_chart(report: Report, path: Path) -> Path:
    """Per-position acceptance bars, with the healthy reference for the method drawn beside them."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    ours = report.metrics.per_position
    ref = report.reference.per_position if report.reference else []
    n = max(len(ours), len(ref), 1)
    fig, ax = plt.subplots(figsize=(max(6.0, 0.55 * n + 2.5), 3.6), dpi=110)
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
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path)
    plt.close(fig)
    return path
