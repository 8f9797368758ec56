"""Faults during a deploy: the host vanishes mid-step; the bot that held the lock is killed."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from bot.app.operations import ops
from bot.config import Config, Settings
from bot.engine.playbook import Progress
from bot.errors import InputError
from bot.redact import Redactor
from bot.sim.host import SimHost
from bot.store.facade import Store
from tests.support.graph import graph, services
from tests.support.openssh_sim import sim_behind_openssh
from tests.support.processes import killed_after
from tests.support.sshd import Sshd, TcpRelay, free_port

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def openssh(tmp_path: Path) -> Iterator[tuple[SimHost, Sshd]]:
    with sim_behind_openssh(tmp_path) as both:
        yield both


@pytest.mark.parametrize("fault", ["reset", "blackhole"])
def test_the_host_vanishing_mid_deploy_names_the_step_records_it_and_releases_the_lock(
        openssh: tuple[SimHost, Sshd], tmp_path: Path, fault: str) -> None:
    host, sshd = openssh
    relay = TcpRelay(sshd.port)  # sshd killed: the relay resets; the network gone: it stops relaying
    known = tmp_path / "known_hosts.relay"
    kind, blob = sshd.host_key.with_suffix(".pub").read_text().split()[:2]
    known.write_text(f"[127.0.0.1]:{relay.port} {kind} {blob}\n")
    cfg = Config(hosts={"a6000": host.host_config(port=relay.port).model_copy(update={
        "user": sshd.user, "key": sshd.client_key, "known_hosts": known, "connect_timeout": 5.0})},
        profiles=host.profiles(port=free_port()), settings=Settings(state=tmp_path / "specops.db"))
    cut: list[str] = []

    def progress(p: Progress) -> None:
        if p.name == "wait for /health" and p.status == "running" and not cut:
            cut.append(p.name)
            # the host is gone: its SSH connection resets (sshd killed), or nothing answers any more
            relay.close() if fault == "reset" else relay.pause()

    try:
        t0 = time.monotonic()
        report = ops.deploy(ops.HostRequest(cfg, "a6000", "mtp", progress=progress, **graph(cfg)))
        took = time.monotonic() - t0
    finally:
        relay.close()
    assert cut, "the deploy never reached the wait"
    assert took < 60
    op = report.operation
    assert op.status == "failed"
    assert op.failed_step is not None and "wait for /health" in op.failed_step
    assert report.diagnosis is not None and report.diagnosis.verdict == "failing"
    assert "wait for /health" in report.headline
    # what is left on the host, and how to stop it
    assert any("may still be running" in n and "specops stop --host a6000" in n for n in report.notes), report.notes
    store = Store(cfg.settings.state, Redactor())
    dep = store.deployments.latest("a6000")
    assert dep is not None and dep.status == "failed" and dep.finished_at is not None
    assert dep.detail["step"] == "wait for /health" and "may still be running" in dep.detail["left"]
    assert store.locks.holder("a6000") is None  # released
    if fault == "reset":  # the host answers again: status says what the failed deploy left, not just "down"
        relay2 = TcpRelay(sshd.port)
        known.write_text(f"[127.0.0.1]:{relay2.port} {kind} {blob}\n")
        cfg.hosts["a6000"] = cfg.hosts["a6000"].model_copy(update={"port": relay2.port})
        try:
            with pytest.raises(InputError) as info:
                ops.status(ops.HostRequest(cfg, "a6000", **graph(cfg)))
        finally:
            relay2.close()
        assert "failed at step 'wait for /health'" in str(info.value) and "may still be running" in str(info.value)


def test_a_lock_whose_holder_was_killed_is_stale_at_once(sim: SimHost, tmp_path: Path) -> None:
    cfg = sim.config(port=free_port())
    # a bot process takes the lock and is SIGKILLed while it holds it
    killed_after("import sys, threading; from bot.store.facade import Store; from bot.redact import Redactor; "
                 "s = Store(sys.argv[1], Redactor()); "
                 "s.locks.acquire('a6000', 'U1 via slack', 'deploy mtp'); print('held', flush=True); "
                 "threading.Event().wait()",
                 "held", str(cfg.settings.state))
    store = Store(cfg.settings.state, Redactor())
    assert store.locks.holder("a6000") is not None and store.locks.stale("a6000")
    # stop (and deploy) work at once, without waiting hours for the lock to age
    stopped = ops.stop(ops.HostRequest(cfg, "a6000", **graph(cfg)))
    assert not stopped.failed, stopped.headline
    assert store.locks.holder("a6000") is None


def test_unlock_from_chat_is_planned_then_confirmed(sim: SimHost) -> None:
    """One behaviour in chat and on the command line: a young lock whose holder is alive is broken only with
    --force; the plan says so, and says who holds it."""
    from bot.app.chat import ChatDispatcher, Who
    from bot.errors import OperationError

    cfg = sim.config(port=free_port())
    svc = services(cfg)
    store = svc.store
    store.locks.acquire("a6000", "someone", "deploy mtp")  # this process holds it: not stale
    chat = ChatDispatcher(svc)
    decision = chat.decide("unlock a6000", Who("console", "me"))
    assert decision.next == "confirm" and decision.command is not None
    with pytest.raises(OperationError, match="Only `unlock a6000 --force` breaks it"):
        chat.plan(decision.command, "me")  # nothing to confirm: the plan says why
    with pytest.raises(OperationError, match="--force"):
        chat.run(decision.command, decision.audit, "me")
    assert store.locks.holder("a6000") is not None
    forced = chat.decide("unlock a6000 --force", Who("console", "me"))
    assert forced.next == "confirm" and forced.command is not None
    assert "would break the lock on a6000: deploy mtp by someone" in chat.plan(forced.command, "me").text
    done = chat.run(forced.command, forced.audit, "me")
    assert done.text.startswith("lock on a6000 broken (held by someone for deploy mtp")
    assert store.locks.holder("a6000") is None
