"""Watches, incidents, scheduled reports and the Alertmanager receiver — on the simulated host, with
the Slack Web API emulator, the real scheduler and its SQLite job store."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest

from bot.adapters import alertmanager, scheduler
from bot.adapters.slack.bot import SpecopsBot
from bot.adapters.slack.http_server import SlackHTTPServer
from bot.adapters.slack.settings import SlackSecrets
from bot.app.operations import ops
from bot.app.services import Services, build_services
from bot.app.watching import watch as watching
from bot.app.watching.health import window_sample
from bot.config import AlertRules, Config, HostConfig, Profile, SlackSettings, WatchSettings
from bot.core.alerts import WatchSample, summarize_day
from bot.core.prom_samples import split_scrapes
from bot.engine.hosts import HostError, RemoteLayout
from bot.redact import Redactor
from bot.sim.host import SimHost
from tests.support.graph import graph
from tests.support.served import wait_for
from tests.support.slack_emulator import SlackEmulator
from tests.support.sshd import free_port

ROOT = Path(__file__).resolve().parents[2]
ONCALL, REPORTS = "C0ONCALL", "C0REPORT"


@dataclass
class World:
    sim: SimHost
    cfg: Config
    emu: SlackEmulator
    bot: SpecopsBot
    rt: Services

    def traffic(self, requests: int = 2) -> None:
        port = self.cfg.profiles["mtp"].port
        for _ in range(requests):
            httpx.post(f"http://127.0.0.1:{port}/v1/completions", timeout=30,
                       json={"model": "Qwen/Qwen3.6-27B", "prompt": "hello", "max_tokens": 48})

    def watch(self, times: int = 1) -> None:
        for _ in range(times):
            self.traffic()
            scheduler.watch_job("a6000")

    def oncall(self) -> list[dict[str, object]]:
        return [m for m in self.emu.messages(ONCALL) if not m.get("thread_ts")]


@pytest.fixture
def world() -> Iterator[World]:
    for var in ("HTTP_PROXY", "HTTPS_PROXY", "http_proxy", "https_proxy"):
        os.environ.pop(var, None)
    sim = SimHost(stats_interval=0.3, startup_seconds=0.3, max_request_seconds=0.3).start()
    cfg = sim.config(port=free_port())
    cfg.slack = SlackSettings(channel=REPORTS)
    cfg.watch = WatchSettings(interval=1, oncall_channel=ONCALL, oncall_usergroup="S0ONCALL", report_channel=REPORTS,
                              rules=AlertRules(down_after=2, low_acceptance_samples=2, resolve_after=2))
    emu = SlackEmulator().start()
    svc = build_services(cfg, redactor=Redactor())
    bot = SpecopsBot(cfg, SlackSecrets(slack_bot_token="xoxb-watch-test-1", slack_signing_secret="watch-secret-1",
                                       specops_slack_api_url=emu.base_url), services=svc)
    rt = scheduler.install(svc)
    world = World(sim, cfg, emu, bot, rt)
    try:
        report = ops.deploy(ops.HostRequest(cfg, "a6000", "mtp", **graph(cfg)))
        assert report.operation is not None and report.operation.status == "changed"
        yield world
    finally:
        bot.shutdown()
        rt.close()
        emu.stop()
        sim.cleanup()


def test_a_collapse_opens_one_incident_a_second_alert_joins_it_recovery_resolves_it(world: World) -> None:
    # the sim's tok/s follows the machine's load: with the reference set, a busy CI machine opened a "slow"
    # incident this test did not inject (the slow rule has its own tests in tests/core/test_alerts.py)
    world.cfg.profiles["mtp"].baseline_tps = None
    world.watch(3)
    assert world.rt.store.incidents.unresolved() == [] and world.oncall() == []
    world.sim.control(acceptance_scale=0.05)  # the injected collapse
    world.watch(3)
    incidents = world.rt.store.incidents.unresolved()
    assert len(incidents) == 1
    inc = incidents[0]
    parents = world.oncall()
    assert len(parents) == 1 and "<!subteam^S0ONCALL>" in json.dumps(parents[0]["blocks"])
    assert "acceptance collapsed" in parents[0]["text"]
    buttons = {e["action_id"] for b in parents[0]["blocks"] if b["type"] == "actions" for e in b["elements"]}
    assert buttons == {"incident_ack", "incident_rediagnose", "incident_rollback", "incident_resolve"}
    # the diagnosis runs on the incident manager's pool beside the watches: it is in the thread soon, not at once
    wait_for("the automatic diagnosis in the incident's thread", lambda: any(
        "Automatic diagnosis" in m["text"] for m in world.emu.thread(str(parents[0]["ts"]))))
    # a second, different alert goes into the same thread
    with open(world.sim.root / "srv/specops/server.log", "a") as log:
        log.write("torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 1.50 GiB. GPU 0 has a total "
                  "capacity of 47.41 GiB of which 812.00 MiB is free.\n")
    world.watch(1)
    assert len(world.rt.store.incidents.unresolved()) == 1 and len(world.oncall()) == 1
    thread = world.emu.thread(str(parents[0]["ts"]))
    assert any("CUDA out of memory" in m["text"] for m in thread)
    # recovery resolves it
    world.sim.control(acceptance_scale=1.0)
    world.watch(4)
    assert world.rt.store.incidents.unresolved() == []
    closed = world.rt.store.incidents.get(inc.id)
    assert closed is not None and closed.state == "resolved"
    assert "resolved" in world.emu.message(str(parents[0]["ts"]))["text"]
    assert closed.timeline[0]["event"] == "opened" and closed.timeline[-1]["event"] == "resolved"


def test_a_dead_server_opens_an_incident(world: World) -> None:
    pid = int((world.sim.root / "srv/specops/server.pid").read_text())
    os.killpg(pid, signal.SIGKILL)
    scheduler.watch_job("a6000")
    scheduler.watch_job("a6000")
    incidents = world.rt.store.incidents.unresolved()
    assert len(incidents) == 1 and "down" in incidents[0].title


def test_a_report_fired_twice_for_the_same_period_posts_once(world: World) -> None:
    world.watch(3)
    results: list[bool] = []
    threads = [threading.Thread(target=lambda: results.append(scheduler.report_job("a6000", period="2026-11-29")))
               for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=60)
    assert sorted(results) == [False, True]
    posts = [m for m in world.emu.messages(REPORTS) if "Health report a6000" in m["text"]]
    assert len(posts) == 1
    assert "requests" in json.dumps(posts[0]["blocks"]) and "73.5" in json.dumps(posts[0]["blocks"])
    assert world.emu.completed_uploads  # the trend chart
    assert scheduler.report_job("a6000", period="2026-11-30") is True


def test_report_period_is_the_last_scheduled_fire() -> None:
    from datetime import datetime
    from zoneinfo import ZoneInfo

    tz = ZoneInfo("UTC")
    assert scheduler.report_period("0 8 * * *", "UTC", datetime(2026, 11, 29, 9, 30, tzinfo=tz)) == "2026-11-29 08:00"
    assert scheduler.report_period("0 8 * * *", "UTC", datetime(2026, 11, 29, 7, 0, tzinfo=tz)) == "2026-11-28 08:00"


def test_alertmanager_receiver(world: World) -> None:
    token = "am-token-123456"
    server = SlackHTTPServer(world.bot.app, "127.0.0.1", 0, {
        "/alertmanager": lambda h, b: alertmanager.receive(world.cfg, world.rt.manager, token, h, b)}).start()
    url = f"http://127.0.0.1:{server.port}/alertmanager"
    good = {"Authorization": f"Bearer {token}"}
    firing = {"version": "4", "status": "firing", "groupKey": "g", "alerts": [
        {"status": "firing", "labels": {"alertname": "SpecDecodeAcceptanceCollapsed", "specops_host": "a6000"},
         "annotations": {"summary": "acceptance collapsed on a6000"}}]}
    try:
        assert httpx.post(url, json=firing).status_code == 401
        assert httpx.post(url, json=firing, headers={"Authorization": "Bearer wrong"}).status_code == 401
        for bad in (b"not json", b"{}", json.dumps({"status": "firing", "alerts": []}).encode(),
                    json.dumps({"status": "boom", "alerts": [{"status": "x", "labels": {}}]}).encode()):
            resp = httpx.post(url, content=bad, headers=good)
            assert resp.status_code == 400 and resp.json()["ok"] is False
        assert world.rt.store.incidents.recent() == []  # nothing changed
        resp = httpx.post(url, json=firing, headers=good)
        assert resp.status_code == 200 and len(resp.json()["incidents"]) == 1
        assert len(world.rt.store.incidents.unresolved("a6000")) == 1
        resolved = {**firing, "status": "resolved", "alerts": [{**firing["alerts"][0], "status": "resolved"}]}
        assert httpx.post(url, json=resolved, headers=good).json()["resolved"] == resp.json()["incidents"]
        assert world.rt.store.incidents.unresolved() == []
    finally:
        server.stop()


def test_schedules_and_open_incidents_survive_sigkill(tmp_path: Path) -> None:
    cfg_path = tmp_path / "specops.yaml"
    cfg = {"hosts": {"h1": {"address": "127.0.0.1", "port": 9, "user": "x", "known_hosts": str(tmp_path / "kh")}},
           "profiles": {"mtp": {"model": "/m", "method": "mtp", "num_speculative_tokens": 3}},
           "settings": {"state": str(tmp_path / "specops.db")},
           "watch": {"interval": 3600, "report_cron": "0 8 * * *"}}
    cfg_path.write_text(json.dumps(cfg))
    code = ("import sys, threading; from bot.config import load_config; from bot.adapters import scheduler; "
            "from bot.app.services import build_services; "
            "c = load_config(sys.argv[1]); scheduler.install(build_services(c)); s = scheduler.Scheduler(c).start(); "
            "rt = scheduler.runtime(); rt.store.incidents.open('h1', 'h1', 'acceptance collapsed', {}); "
            "rt.store.reports.claim('report:h1', '2026-11-29 08:00'); print('ready', flush=True); "
            "threading.Event().wait()")  # until SIGKILL
    for round_ in range(2):  # start, SIGKILL, start again, SIGKILL
        proc = subprocess.Popen([sys.executable, "-c", code, str(cfg_path)], cwd=ROOT, stdout=subprocess.PIPE,
                                text=True, start_new_session=True)
        try:
            assert proc.stdout is not None and proc.stdout.readline().strip() == "ready", round_
        finally:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(timeout=10)
    from bot.config import load_config
    from bot.store.facade import Store

    c = load_config(cfg_path)
    sched = scheduler.Scheduler(c).start(paused=True)
    try:
        ids = [j.id for j in sched.jobs()]
    finally:
        sched.shutdown()
    assert sorted(ids) == ["prune:samples", "report:h1", "watch:h1"]  # no copies after two restarts
    store = Store(c.settings.state, Redactor())
    assert len(store.incidents.unresolved()) == 1  # one per key, remembered
    assert store.reports.claim("report:h1", "2026-11-29 08:00") is None  # already posted: not again


def test_cli_schedule_incidents_history(world: World, tmp_path: Path) -> None:
    world.watch(3)
    cfg_path = tmp_path / "c.yaml"
    cfg_path.write_text(world.cfg.model_dump_json())
    run = lambda *a: subprocess.run([sys.executable, "-m", "bot", "--config", str(cfg_path), *a],  # noqa: E731
                                    capture_output=True, text=True, timeout=120, cwd=ROOT)
    p = run("schedule", "list")
    assert p.returncode == 0 and "watch:a6000" in p.stdout and "report:a6000" in p.stdout, p.stderr
    p = run("history", "a6000", "--out", str(tmp_path / "h.png"))
    assert p.returncode == 0 and (tmp_path / "h.png").read_bytes()[:4] == b"\x89PNG", p.stderr
    p = run("schedule", "run", "nope")
    assert p.returncode == 2 and "unknown job" in p.stderr
    p = run("incidents")
    assert p.returncode == 0


def test_a_restart_does_not_reopen_incidents_for_lines_already_seen(world: World) -> None:
    world.watch(2)
    with open(world.sim.root / "srv/specops/server.log", "a") as log:
        log.write("torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 1.50 GiB. GPU 0 has a total "
                  "capacity of 47.41 GiB of which 812.00 MiB is free.\n")
    world.watch(1)
    [inc] = world.rt.store.incidents.unresolved("a6000")
    world.rt.manager.resolve_incident(inc.id, "fixed by hand", "test")
    # the bot restarts: new watch state, same store (the cursor is there)
    for watch in world.rt.watches.values():
        watch.close()
    world.rt.watches.clear()
    world.watch(2)
    assert world.rt.store.incidents.unresolved("a6000") == []
    assert world.rt.store.cursors.get("a6000") is not None
    # a new error line after the restart still opens one
    with open(world.sim.root / "srv/specops/server.log", "a") as log:
        log.write("ValueError: No available memory for the cache blocks. Try increasing `gpu_memory_utilization` "
                  "when initializing the engine.\n")
    world.watch(1)
    assert len(world.rt.store.incidents.unresolved("a6000")) == 1


# --- one sample, over a host that is only files and an HTTP server -------------------------------------

SPEC_LINE = ("(APIServer pid=998) INFO 11-29 19:49:{s:02d} [metrics.py:120] SpecDecoding metrics: Mean acceptance "
             "length: 3.50, Accepted throughput: 6.66 tokens/s, Drafted throughput: 6.66 tokens/s, Accepted: 40 "
             "tokens, Drafted: 40 tokens, Per-position acceptance rate: 1.000, 0.750, 0.750, Avg Draft acceptance "
             "rate: 100.0%")
ENGINE_LINE = ("(APIServer pid=998) INFO 11-29 19:49:{s:02d} [loggers.py:335] Engine 000: Avg prompt throughput: 0.0 "
               "tokens/s, Avg generation throughput: {tps} tokens/s, Running: {running} reqs, Waiting: 0 reqs, GPU KV "
               "cache usage: 2.0%, Prefix cache hit rate: 0.0%")


class FakeSession:
    """The session calls a watch makes, over in-memory files; its forward leads to `url`."""

    def __init__(self, files: dict[str, bytes], url: str) -> None:
        self.files, self.url = files, url
        self.closed = False
        self.forwarded: list[int] = []

    def connect(self) -> FakeSession:
        return self

    def transport_alive(self) -> bool:
        return not self.closed

    def read_file(self, path: str, max_bytes: int = 1 << 20) -> bytes | None:
        return self.files.get(path)

    def read_from(self, path: str, offset: int, max_bytes: int = 1 << 20) -> tuple[bytes, int]:
        data = self.files.get(path, b"")
        start = max(0, len(data) + offset) if offset < 0 else min(offset, len(data))
        chunk = data[start:start + max_bytes]
        return chunk, start + len(chunk)

    def forward(self, port: int) -> FakeSession:
        self.forwarded.append(port)
        return self

    def close(self) -> None:
        self.closed = True


class FakePool:
    def __init__(self, session: FakeSession) -> None:
        self.opened: list[str] = []
        self.session_ = session

    def session(self, name: str) -> FakeSession:
        self.opened.append(name)
        return self.session_


class Server:
    """vLLM's /health and /metrics on 127.0.0.1: the status given, then the scrapes in turn."""

    def __init__(self, scrapes: list[str], health: int) -> None:
        from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

        answers = iter(scrapes)

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                status, body = (health, b"") if self.path == "/health" else (200, next(answers).encode())
                self.send_response(status)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args: object) -> None:
                pass

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}"
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()

    def stop(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


def unit_config() -> Config:
    return Config(hosts={"h1": HostConfig(address="127.0.0.1", user="u", workdir="/srv/w")},
                  profiles={"mtp": Profile(model="/m", method="mtp", num_speculative_tokens=3, port=8123)})


@pytest.fixture
def servers() -> Iterator[list[Server]]:
    started: list[Server] = []
    yield started
    for s in started:
        s.stop()


def watched(servers: list[Server], scrapes: list[str], health: int = 200) -> tuple[
        Config, watching.HostWatch, FakeSession, FakePool]:
    """A HostWatch whose pool opens a fake session, forwarded to a local server answering from `scrapes`."""
    servers.append(Server(scrapes, health))
    layout = RemoteLayout("/srv/w")
    session = FakeSession({layout.meta_file: json.dumps({"profile": "mtp"}).encode(), layout.log_file: b""},
                          servers[-1].url)
    pool = FakePool(session)
    return unit_config(), watching.HostWatch(pool=pool), session, pool  # type: ignore[arg-type]


def test_a_watch_reaches_the_host_through_its_pool_and_reads_the_layouts_files(servers: list[Server]) -> None:
    scrapes = split_scrapes((ROOT / "tests/fixtures/metrics-0.32.0.prom").read_text())
    cfg, state, session, pool = watched(servers, scrapes)
    first = watching.collect(cfg, "h1", state)
    assert pool.opened == ["h1"] and session.forwarded == [8123]  # the profile's port, through the session
    # vLLM's KV gauge is a ratio (0.02): the sample keeps the percent the Engine line prints
    assert (first.up, first.health, first.profile, first.kv, first.running) == (True, 200, "mtp", 2.0, 1.0)
    assert first.mean is None and first.drafts_total == 100.0  # one scrape: no window yet
    session.files[RemoteLayout("/srv/w").log_file] += "\n".join([
        ENGINE_LINE.format(s=1, tps=60.0, running=1), SPEC_LINE.format(s=2),
        ENGINE_LINE.format(s=3, tps=90.0, running=2), ""]).encode()
    second = watching.collect(cfg, "h1", state)
    # the scrapes' window counts (exact counters); the log's throughput is averaged as a diagnosis averages it
    assert (second.mean, second.drafts, second.accepted) == (round(1 + 177 / 107, 3), 107.0, 177)
    assert (second.gen_tps, second.single_tps) == (75.0, 60.0)
    assert pool.opened == ["h1"]  # the session stays open from one watch to the next


def test_without_a_scrape_window_the_log_lines_give_acceptance(servers: list[Server]) -> None:
    cfg, state, session, _ = watched(servers, [], health=503)
    session.files[RemoteLayout("/srv/w").log_file] = "\n".join([SPEC_LINE.format(s=s) for s in (1, 2)] + [""]).encode()
    s = watching.collect(cfg, "h1", state)
    assert (s.up, s.health, s.metrics_read) == (False, 503, False)
    assert (s.mean, s.accepted, s.drafted, s.per_position) == (3.5, 80, 80, (1.0, 0.75, 0.75))
    assert "kv" not in s.as_dict()  # not read: not stored as read-and-absent either


def test_an_unreachable_host_is_a_sample_not_an_exception(servers: list[Server]) -> None:
    cfg, state, _, pool = watched(servers, [])

    def refuse(name: str) -> FakeSession:
        raise HostError(name, "connection refused")

    pool.session = refuse  # type: ignore[method-assign]
    s = watching.collect(cfg, "h1", state)
    assert (s.up, s.reachable, len(s.errors)) == (False, False, 1) and "connection refused" in s.errors[0]
    assert s.as_dict() == {"up": False, "health": None, "errors": list(s.errors), "reachable": False}


def test_no_deployment_record_is_a_note_and_raises_nothing(servers: list[Server]) -> None:
    cfg, state, session, _ = watched(servers, [])
    session.files[RemoteLayout("/srv/w").meta_file] = b"{}"
    s = watching.collect(cfg, "h1", state)
    assert s.as_dict() == {"up": False, "health": None, "errors": [], "reachable": True, "profile": None,
                           "note": "no deployment recorded"}
    assert watching.evaluate(cfg, "h1", [s, s, s]) == []


def test_the_store_keeps_the_sample_as_json_and_the_callers_read_dicts(tmp_path: Path) -> None:
    from bot.store.facade import Store

    store = Store(tmp_path / "s.db", Redactor())
    sample = WatchSample(up=True, reachable=True, health=200, profile="mtp", mean=2.5, drafts=100.0, accepted=150,
                         drafted=300, per_position=(0.8, 0.5, 0.2), gen_tps=70.0, alerts=())
    store.samples.add("h1", sample.up, sample.as_dict(), at=10.0)
    store.samples.add("h1", False, WatchSample(errors=("gone",), alerts=("down",)).as_dict(), at=20.0)
    rows = store.samples.for_host("h1")
    assert WatchSample.from_dict(rows[0][2]) == sample
    day = watching.summarize_day(rows)  # what health.py and the CLI's history call today
    assert (day["samples"], day["up_fraction"], day["mean_acceptance"], day["first"], day["last"]) == (
        2, 0.5, 2.5, 10.0, 20.0)
    assert watching.health_streak(unit_config(), [d for _, _, d in rows]) == 0
    # the core's summary, typed, is the same numbers; its window is the one health.py builds from the dict
    core_day = summarize_day([(at, WatchSample.from_dict(d)) for at, _, d in rows])
    assert core_day.as_dict() == day and core_day.window() == window_sample(day)
