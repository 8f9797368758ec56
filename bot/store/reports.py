"""Idempotent reports: each (report, period) is claimed by one caller, posted once, and a claim that never became a
post is retried."""

from __future__ import annotations

import time

from bot.store.database import Database
from bot.store.engine import sql

CLAIM_STALE = 600.0  # a report claimed this long ago and not posted: its claimant died or Slack failed


class Reports:
    def __init__(self, db: Database) -> None:
        self.db = db

    def claim(self, report: str, period: str, stale_after: float = CLAIM_STALE) -> float | None:
        """The claim's time — its token (`holds_claim`) — for the one caller that should post (report,
        period): the first, or the next one after a claimant that never posted (killed, or Slack failed) once its
        claim is `stale_after` seconds old; None for every other caller."""
        now = time.time()
        key = {"report": report, "period": period, "now": now}
        with self.db.transaction() as db:
            cur = db.execute(sql("INSERT INTO report_runs(report, period, at) VALUES (:report, :period, :now) "
                                 "ON CONFLICT DO NOTHING"), key)
            if cur.rowcount == 1:
                return now
            retaken = db.execute(sql("UPDATE report_runs SET at = :now WHERE report = :report AND period = :period "
                                     "AND posted_at IS NULL AND at < :stale"), {**key, "stale": now - stale_after})
            return now if retaken.rowcount == 1 else None

    def holds_claim(self, report: str, period: str, at: float) -> bool:
        """Is the claim made at `at` still the period's, and unposted? A replica stopped between its claim and its
        post (SIGSTOP, a stalled host) may find that another took the claim over and posted meanwhile."""
        with self.db.transaction() as db:
            row = db.execute(sql("SELECT at, posted_at FROM report_runs WHERE report = :report AND period = :period"),
                             {"report": report, "period": period}).fetchone()
        return row is not None and row[1] is None and float(row[0]) == at

    def mark_posted(self, report: str, period: str) -> None:
        with self.db.transaction() as db:
            db.execute(sql("UPDATE report_runs SET posted_at = :at WHERE report = :report AND period = :period"),
                       {"at": time.time(), "report": report, "period": period})

    def posted(self, report: str, period: str) -> bool:
        with self.db.transaction() as db:
            row = db.execute(sql("SELECT posted_at FROM report_runs WHERE report = :report AND period = :period"),
                             {"report": report, "period": period}).fetchone()
        return row is not None and row[0] is not None

    def message(self, report: str, period: str) -> tuple[str, str] | None:
        """(channel, ts) of the period's message if one was posted, even if what follows it (the chart) failed."""
        with self.db.transaction() as db:
            row = db.execute(sql("SELECT channel, ts FROM report_runs WHERE report = :report AND period = :period"),
                             {"report": report, "period": period}).fetchone()
        return (str(row[0]), str(row[1])) if row is not None and row[0] and row[1] else None

    def set_message(self, report: str, period: str, channel: str, ts: str) -> None:
        with self.db.transaction() as db:
            db.execute(sql("UPDATE report_runs SET channel = :channel, ts = :ts WHERE report = :report AND "
                           "period = :period"), {"channel": channel, "ts": ts, "report": report, "period": period})

    def unposted(self) -> list[tuple[str, str]]:
        """Claims that never became a post: what a restart retries."""
        with self.db.transaction() as db:
            rows = db.execute(sql("SELECT report, period FROM report_runs WHERE posted_at IS NULL "
                                  "ORDER BY at")).fetchall()
        return [(r[0], r[1]) for r in rows]
