"""What the verbs that act on one host share: the request from the graph, the options every such verb takes, and
how its command line ends."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from bot.app.diagnosis.flagcheck import worse_than
from bot.app.verbs.spec import Call, Exit, opt
from bot.errors import InputError

if TYPE_CHECKING:
    from bot.app.operations.ops import HostRequest
    from bot.core.report import Report
    from bot.core.results.operation import OperationResult


def host() -> Any:
    return opt("--host", help="a host of the inventory, e.g. a6000", required=True)


def chart() -> Any:
    return opt("--chart", help="write the per-position acceptance chart (PNG)", cli_only=True)


def dry_run(what: str = "print every step and command; run nothing") -> Any:
    return opt("--dry-run", False, help=what)


def force() -> Any:
    return opt("--force", False, help="deploy although a check before launch refuses it (the refusal is written to "
                                      "the audit and the report)")


def request(call: Call, host: str | None, profile: str | None = None, *, dry_run: bool = False,
            probe: bool = True, force: bool = False) -> HostRequest:
    from bot.app.operations.ops import HostRequest

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


def report_exit_of(report: Report, _args: object) -> Exit:
    return report_exit(report)


def operation_exit_of(result: OperationResult, _args: object) -> Exit:
    """1 when the operation failed (a stop has no verdict to judge by)."""
    return Exit(1 if result.failed else 0)
