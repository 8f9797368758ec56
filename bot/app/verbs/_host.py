"""What the verbs that act on one host share: the request from the graph, the options every such command
line takes, and how its run ends."""

from __future__ import annotations

from typing import TYPE_CHECKING

from bot.app.flagcheck import worse_than
from bot.app.verbs.spec import Call, Exit, Opt
from bot.errors import InputError

__all__ = ["CHART", "DRY_RUN", "FORCE", "HOST", "report_exit", "request"]

if TYPE_CHECKING:
    from bot.app.ops import HostRequest
    from bot.core.report import Report

HOST = Opt("host", "--host", help="a host of the inventory, e.g. a6000", required=True)
CHART = Opt("chart", "--chart", "path", help="write the per-position acceptance chart (PNG)")
DRY_RUN = Opt("dry_run", "--dry-run", "bool", False, help="print every step and command; run nothing")
FORCE = Opt("force", "--force", "bool", False,
            help="deploy although a check before launch refuses it (the refusal is written to the audit and the "
                 "report)")


def request(call: Call, host: str | None, profile: str | None = None, *, dry_run: bool = False,
            probe: bool = True, force: bool = False) -> HostRequest:
    from bot.app.ops import HostRequest

    if host is None:
        raise InputError("which host? name one of the inventory")
    svc = call.graph
    return HostRequest(call.config, host, profile, dry_run=dry_run, probe=probe, force=force, owner=call.owner,
                       progress=call.progress, cancel=call.cancel, store=svc.store, hosts=svc.hosts)


def report_exit(report: Report, threshold: str = "never") -> Exit:
    """1 when the operation failed or the verdict is `threshold` or worse (`--fail-on`, for cron jobs)."""
    if report.operation is not None and report.operation.status in ("failed", "refused"):
        return Exit(1)
    return Exit(1 if worse_than(report.verdict, threshold) else 0)
