"""A deploy cancelled (or failed) after its `stop` step has stopped the server before it: the report says plainly
that the host now serves nothing and how to bring the old one back, and the old deployment row no longer says
`serving` (issue 36). Real parts: the simulated host over SSH, a real SQLite store."""

from __future__ import annotations

import sqlite3
import threading

from bot.app.operations import ops
from bot.engine.playbook import Progress
from bot.sim.host import SimHost
from tests.support.graph import graph
from tests.support.sshd import free_port


def test_a_cancelled_deploy_says_the_host_serves_nothing_and_the_rows_match(sim: SimHost) -> None:
    cfg = sim.config(port=free_port())
    first = ops.deploy(ops.HostRequest(cfg, "a6000", "dflash", **graph(cfg)))
    assert first.operation is not None and first.operation.status == "changed", first.headline
    assert sim.server is not None
    sim.server.env["SPECOPS_SIM_STARTUP_SECONDS"] = "60"  # the new server takes its time: cancel while it waits
    cancel = threading.Event()

    def progress(p: Progress) -> None:
        if p.name == "wait for /health":
            cancel.set()

    req = ops.HostRequest(cfg, "a6000", "mtp", progress=progress, cancel=cancel, **graph(cfg))
    report = ops.deploy(req)
    said = " ".join([report.headline, *report.notes])
    assert "a6000 now serves nothing" in said and "specops deploy dflash --host a6000" in said, said
    latest = req.store.deployments.latest("a6000")
    assert latest is not None and latest.profile == "mtp" and latest.status == "failed"
    con = sqlite3.connect(cfg.settings.state)
    try:
        rows = con.execute("SELECT profile, status FROM deployments WHERE host = 'a6000' ORDER BY id").fetchall()
    finally:
        con.close()
    assert ("dflash", "stopped") in rows and not [r for r in rows if r[1] == "serving"], rows
