"""Scheduled reports: claim, post, then mark posted; a claim that never became a post is tried again."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

from bot.adapters import scheduler
from bot.app.services import build_services
from bot.config import Config, HostConfig, Profile, Settings, WatchSettings
from bot.redact import Redactor
from bot.store.facade import Store
from tests.support.processes import killed_after

ROOT = Path(__file__).resolve().parents[2]


class Flaky:
    """A notifier whose first post fails (a Slack API error), then works."""

    def __init__(self, fail: int = 1) -> None:
        self.fail = fail
        self.posted: list[str] = []

    def health_report(self, host: str, report: Any, chart_png: bytes | None) -> bool:
        if self.fail:
            self.fail -= 1
            return False
        self.posted.append(host)
        return True

    def incident_opened(self, *a: Any) -> None:
        return None

    def incident_note(self, *a: Any, **k: Any) -> None:
        return None

    def incident_closed(self, *a: Any) -> None:
        return None


def config(tmp_path: Path) -> Config:
    return Config(hosts={"h1": HostConfig(address="127.0.0.1", user="u", known_hosts=tmp_path / "kh")},
                  profiles={"mtp": Profile(model="/m", method="mtp", num_speculative_tokens=3)},
                  settings=Settings(state=tmp_path / "s.db"), watch=WatchSettings(interval=60))


def test_a_failed_post_is_not_marked_and_is_posted_on_retry(tmp_path: Path) -> None:
    notifier = Flaky(fail=1)
    svc = scheduler.install(build_services(config(tmp_path), notifier=notifier))  # type: ignore[arg-type]
    try:
        assert scheduler.report_job("h1", period="2026-12-01 08:00") is False  # Slack failed
        assert not svc.store.reports.posted("report:h1", "2026-12-01 08:00")
        assert scheduler.report_job("h1", period="2026-12-01 08:00") is False  # a fresh claim is not stolen
        assert scheduler.retry_unposted() == ["report:h1 2026-12-01 08:00"]  # what a restart does
        assert svc.store.reports.posted("report:h1", "2026-12-01 08:00") and notifier.posted == ["h1"]
        assert scheduler.report_job("h1", period="2026-12-01 08:00") is False  # posted: never twice
    finally:
        svc.close()


def test_a_claim_whose_claimant_was_killed_is_posted_after_the_restart(tmp_path: Path) -> None:
    cfg = config(tmp_path)
    # killed between the claim and the post
    killed_after("import sys, threading; from bot.store.facade import Store; from bot.redact import Redactor; "
                 "s = Store(sys.argv[1], Redactor()); "
                 "s.reports.claim('report:h1', '2026-12-01 08:00'); print('claimed', flush=True); "
                 "threading.Event().wait()",
                 "claimed", str(cfg.settings.state))
    assert Store(cfg.settings.state, Redactor()).reports.unposted() == [("report:h1", "2026-12-01 08:00")]
    notifier = Flaky(fail=0)
    svc = scheduler.install(build_services(cfg, notifier=notifier))  # type: ignore[arg-type]
    try:
        assert scheduler.retry_unposted() == ["report:h1 2026-12-01 08:00"] and notifier.posted == ["h1"]
    finally:
        svc.close()


def test_schedule_run_report_prints_without_taking_the_bots_period(tmp_path: Path) -> None:
    cfg = config(tmp_path)
    path = tmp_path / "c.json"
    path.write_text(cfg.model_dump_json())
    p = subprocess.run([sys.executable, "-m", "bot", "--config", str(path), "schedule", "run", "report:h1"],
                       capture_output=True, text=True, timeout=120, cwd=ROOT)
    assert p.returncode == 0 and "Health report h1" in p.stdout, p.stderr
    assert Store(cfg.settings.state, Redactor()).reports.unposted() == []  # nothing claimed


def test_a_claimant_stopped_before_its_post_does_not_post_a_period_another_took_over(
        tmp_path: Path, monkeypatch: Any) -> None:
    """Issue 36: a leader SIGSTOPped between its claim and its post resumes after the new leader took the period
    over (its start retries unposted claims) and posted it: the resumed one must not post the period again."""
    cfg = config(tmp_path)
    notifier = Flaky(fail=0)
    svc = scheduler.install(build_services(cfg, notifier=notifier))  # type: ignore[arg-type]
    real = scheduler.health_report
    other = Store(cfg.settings.state, Redactor())  # the other replica, on the same database

    def stopped_while_building(*args: Any, **kwargs: Any) -> Any:
        # while this replica is stopped, the other one's start retakes the claim and posts the period
        assert other.reports.claim("report:h1", "2026-12-01 08:00", stale_after=0.0)
        other.reports.mark_posted("report:h1", "2026-12-01 08:00")
        return real(*args, **kwargs)

    monkeypatch.setattr(scheduler, "health_report", stopped_while_building)
    try:
        assert scheduler.report_job("h1", period="2026-12-01 08:00") is False
        assert notifier.posted == []  # posted once, by the other replica
        assert svc.store.reports.posted("report:h1", "2026-12-01 08:00")
    finally:
        svc.close()
