"""The watch's typed sample, its alert rules, the health streak and the day summary (bot.core.alerts)."""

from __future__ import annotations

import math
from dataclasses import replace
from typing import Any

import pytest

from bot.config import AlertRules
from bot.core.alerts import (
    NO_DEPLOYMENT,
    RULES,
    Alert,
    Deployed,
    WatchRules,
    WatchSample,
    acceptance_floor,
    counter_growth,
    evaluate,
    health_streak,
    latest_setting,
    summarize_day,
)
from bot.core.parsed_log import EngineSample, SpecDecodeSample
from bot.core.triage.acceptance import COLLAPSE_P1
from bot.core.triage.evidence import summarize, summarize_engine

# rows as the watch wrote them before the sample was typed: every shape it stores
STORED: dict[str, dict[str, Any]] = {
    "unreachable": {"up": False, "health": None, "errors": ["a6000: connection refused"], "reachable": False,
                    "alerts": ["down"]},
    "no deployment": {"up": False, "health": None, "errors": [], "reachable": True, "profile": None,
                      "note": "no deployment recorded", "alerts": []},
    "ssh, first scrape": {"up": True, "health": 200, "errors": [], "reachable": True, "profile": "mtp", "kv": 2.0,
                          "running": 1.0, "waiting": None, "requests_total": None, "generation_tokens_total": 900.0,
                          "drafts_total": 100.0, "accepted_total": 150.0, "gen_tps": 73.5, "single_tps": 73.5,
                          "alerts": []},
    "ssh, window": {"up": True, "health": 200, "errors": [], "reachable": True, "profile": "mtp", "kv": 97.5,
                    "running": 4.0, "waiting": 2.0, "requests_total": 12.0, "generation_tokens_total": 1900.0,
                    "drafts_total": 207.0, "accepted_total": 327.0, "mean": 2.654,
                    "per_position": [0.804, 0.514, 0.336], "drafts": 107.0, "accepted": 177, "drafted": 321,
                    "generated": 1000.0, "gen_tps": 80.1, "alerts": ["kv"]},
    "ssh, log only": {"up": True, "health": 200, "errors": ["torch.OutOfMemoryError: CUDA out of memory."],
                      "reachable": True, "profile": "mtp", "mean": 2.1, "drafts": 40.0, "accepted": 44, "drafted": 120,
                      "alerts": ["errors"]},
    "prometheus": {"up": True, "health": 200, "errors": [], "reachable": True, "profile": None, "source": "prometheus",
                   "kv": 41.2, "running": 3.0, "waiting": 0.0, "gen_tps": 120.4, "generated": 7224, "mean": 3.1,
                   "per_position": [], "drafts": 500.0, "accepted": 1050, "drafted": 1500, "alerts": []},
    "prometheus, failed": {"up": False, "health": None, "errors": ["cannot reach Prometheus"], "reachable": False,
                           "profile": "mtp", "source": "prometheus", "alerts": ["down"]},
}


@pytest.mark.parametrize("name", sorted(STORED))
def test_a_stored_row_reads_back_and_is_written_again_unchanged(name: str) -> None:
    assert WatchSample.from_dict(STORED[name]).as_dict() == STORED[name]


def test_a_row_is_read_for_what_it_says_not_what_it_holds() -> None:
    s = WatchSample.from_dict({"up": 1, "health": "200", "kv": True, "per_position": [0.5, "x"], "errors": "boom"})
    assert s.up is True and s.health is None and s.kv is None and s.per_position is None and s.errors == ()


def config(method: str = "mtp", baseline: float | None = 50.0, **rules: Any) -> WatchRules:
    return WatchRules(AlertRules(**{"down_after": 2, "low_acceptance_samples": 2} | rules),
                      profiles={"p": Deployed(method, baseline)})


UP = WatchSample(up=True, reachable=True, health=200, profile="p")


def kinds(cfg: WatchRules, *recent: WatchSample) -> list[str]:
    return [a.kind for a in evaluate(cfg, "h1", list(recent))]


def test_the_rule_table_is_in_the_order_incidents_are_titled_by() -> None:
    assert [r.__name__ for r in RULES] == ["server_down", "acceptance_collapsed", "slower_than_baseline",
                                           "kv_saturated", "new_error_lines"]


def test_down_after_so_many_failed_watches_in_a_row() -> None:
    cfg, down = config(), WatchSample(reachable=True, profile="p", errors=("/health refused",))
    assert kinds(cfg, UP, down) == ["errors"]
    [alert, _] = evaluate(cfg, "h1", [down, down])
    assert alert == Alert("down", "h1: the server is down",
                          "/health failed 2 watches in a row (/health refused)")
    unreachable = WatchSample(health=502, profile="p")
    assert evaluate(cfg, "h1", [unreachable, unreachable])[0].detail.endswith("(/health answered 502)")


def test_acceptance_below_the_floor_in_every_sample_of_the_window() -> None:
    cfg = config(first_position_floor={"mtp": 0.5})
    low, ok, idle = replace(UP, per_position=(0.3, 0.1)), replace(UP, per_position=(0.8, 0.6)), UP
    assert kinds(cfg, low, low) == ["acceptance"]
    assert kinds(cfg, low, idle, low) == ["acceptance"]  # an idle watch measures nothing: it neither counts nor breaks
    assert kinds(cfg, ok, low) == [] and kinds(cfg, low) == []
    assert "0.30, 0.30 of drafts — below the floor of 0.5 for mtp" in evaluate(cfg, "h1", [low, low])[0].detail
    assert kinds(config("none"), low, low) == []  # nothing speculates: no floor
    assert kinds(config("MTP", first_position_floor={"mtp": 0.5}), low, low) == ["acceptance"]  # normalized


def test_the_floor_is_on_position_0_so_it_holds_at_any_k() -> None:
    """A healthy k = 1 reads a mean under 2 (0.94 accepted: 1.94) and never pages; the brief's DFlash at k = 15
    (mean 1.18) does, as does any server whose mean alone bounds position 0 under the floor."""
    k1 = replace(UP, mean=1.94, per_position=(0.94,))
    assert kinds(config(), k1, k1) == []
    brief = replace(UP, mean=1.18, per_position=(0.166, 0.017) + (0.0,) * 13)
    assert kinds(config("dflash"), brief, brief) == ["acceptance"]
    bounded = replace(UP, mean=1.2)  # no per-position rates: position 0 accepts at most 0.2
    assert kinds(config(), bounded, bounded) == ["acceptance"]
    assert kinds(config(), replace(UP, mean=1.9), replace(UP, mean=1.9)) == []


def test_the_floor_is_the_triages_unless_the_config_sets_one() -> None:
    defaults = WatchRules(AlertRules())
    assert acceptance_floor(defaults, "dflash") == COLLAPSE_P1 == acceptance_floor(defaults, "no-such")
    assert acceptance_floor(WatchRules(AlertRules(first_position_floor={"dflash": 0.5})), "dflash") == 0.5
    assert acceptance_floor(WatchRules(AlertRules(first_position_floor={"eagle3": 0.5})), "EAGLE-3") == 0.5


def test_slower_than_the_baseline_with_one_request_in_every_sample() -> None:
    cfg, slow = config(baseline=50.0), replace(UP, single_tps=41.0)
    assert kinds(cfg, slow, slow) == ["slow"]
    assert evaluate(cfg, "h1", [slow, slow])[0].severity == "warning"
    assert kinds(cfg, slow, replace(UP, single_tps=55.0)) == []
    near = replace(UP, single_tps=46.0)  # 8% under: within one request's run-to-run noise, as a diagnosis says
    assert kinds(cfg, near, near) == []
    assert kinds(config(baseline=None), slow, slow) == []
    assert kinds(config("none"), slow, slow) == []


def test_kv_saturated_only_while_requests_wait() -> None:
    cfg, full = config(), replace(UP, kv=97.5, waiting=3.0)
    assert evaluate(cfg, "h1", [full]) == [
        Alert("kv", "h1: KV cache saturated", "KV cache usage 97.5% with 3 request(s) waiting", "warning")]
    assert kinds(cfg, replace(full, waiting=0.0)) == [] and kinds(cfg, replace(full, kv=80.0)) == []
    assert kinds(cfg, replace(full, kv=math.nan)) == []


def test_new_error_lines_of_a_reachable_host_the_last_five() -> None:
    lines = tuple(f"error {i}" for i in range(7))
    [alert] = evaluate(config(), "h1", [replace(UP, errors=lines)])
    assert alert.kind == "errors" and alert.detail == "\n".join(lines[-5:])


def test_nothing_is_judged_without_a_deployment() -> None:
    none = WatchSample(reachable=True, note=NO_DEPLOYMENT)
    assert evaluate(config(), "h1", [none, none, none]) == [] and evaluate(config(), "h1", []) == []


def test_alerts_come_in_the_tables_order() -> None:
    cfg = config()
    bad = replace(UP, mean=1.1, single_tps=10.0, kv=99.0, waiting=1.0, errors=("Traceback",))
    assert kinds(cfg, bad, bad) == ["acceptance", "slow", "kv", "errors"]


def test_health_streak_skips_idle_samples_and_stops_at_a_problem() -> None:
    cfg = config()
    healthy, idle, sick = replace(UP, mean=3.0, alerts=()), replace(UP, alerts=()), replace(UP, alerts=("kv",))
    assert health_streak(cfg, [sick, healthy, idle, healthy]) == 2
    assert health_streak(cfg, [healthy, WatchSample(profile="p")]) == 0
    assert health_streak(config("none"), [idle, idle]) == 2  # nothing to measure: up is healthy


def window(drafts: float, accepted: int, per_position: tuple[float, ...], at: float = 0.0) -> tuple[float, WatchSample]:
    return at, replace(UP, drafts=drafts, accepted=accepted, drafted=round(drafts * len(per_position) or drafts),
                       mean=1 + accepted / drafts, per_position=per_position)


def test_the_day_sums_every_window_and_keeps_the_latest_settings_curve() -> None:
    rows = [window(100, 150, (0.8, 0.5, 0.2), 1.0), window(100, 50, (0.3, 0.2), 2.0), (3.0, UP),
            window(300, 150, (0.4, 0.1), 4.0)]
    day = summarize_day(rows)
    assert (day.samples, day.drafts, day.accepted, day.first, day.last) == (4, 500.0, 350.0, 1.0, 4.0)
    assert day.mean_acceptance == pytest.approx(1.7)
    # k went from 3 to 2: the curve is k = 2's, weighted by drafts
    assert day.per_position == pytest.approx(((0.3 * 100 + 0.4 * 300) / 400, (0.2 * 100 + 0.1 * 300) / 400))
    assert day.up_fraction == 1.0 and day.up_now is True


def test_the_day_is_summed_as_the_diagnosis_sums_a_window() -> None:
    rows = [window(100, 150, (0.8, 0.5, 0.2)), window(50, 40, (0.5, 0.2, 0.1))]
    day, win = summarize_day(rows), summarize([s.window() for _, s in rows if s.window() is not None])
    assert win is not None and day.mean_acceptance == win.mean and day.drafts == win.num_drafts
    assert list(day.per_position) == win.per_position


def test_the_day_counts_throughput_uptime_and_requests_across_a_restart() -> None:
    rows = [(1.0, replace(UP, requests_total=10.0, gen_tps=60.0, single_tps=50.0)),
            (2.0, WatchSample(requests_total=None)),
            (3.0, replace(UP, requests_total=25.0, gen_tps=80.0)),
            (4.0, replace(UP, requests_total=5.0))]  # restarted: 5 more since
    day = summarize_day(rows)
    assert (day.requests, day.gen_tps, day.single_tps, day.up_fraction) == (20.0, 70.0, 50.0, 0.75)
    assert day.mean_acceptance is None and day.per_position == () and day.window() is None


def test_an_empty_day_and_its_dict() -> None:
    assert summarize_day([]).as_dict() == {"samples": 0}
    d = summarize_day([window(100, 150, (0.8, 0.5, 0.2), 7.0)]).as_dict()
    assert set(d) == {"samples", "up_fraction", "up_now", "mean_acceptance", "drafts", "accepted", "drafted",
                      "per_position", "requests", "gen_tps", "single_tps", "first", "last"}
    assert d["per_position"] == pytest.approx([0.8, 0.5, 0.2]) and d["drafted"] == 300.0


def test_the_days_window_is_what_the_triage_judges() -> None:
    w = summarize_day([window(100, 150, (0.8, 0.5, 0.2)), window(100, 130, (0.7, 0.4, 0.2))]).window()
    assert w is not None and w.form == "prometheus" and w.num_drafts == 200.0
    assert w.mean_acceptance_length == pytest.approx(2.4) and w.avg_draft_acceptance_rate == pytest.approx(280 / 6)


def test_latest_setting_skips_windows_without_a_curve() -> None:
    a, b = SpecDecodeSample("prometheus", 2.0, 10, 30, [0.5, 0.3, 0.2], None, num_drafts=10),\
        SpecDecodeSample("prometheus", 2.0, 10, 20, [], None, num_drafts=10)
    assert latest_setting([a, b, a]) == [a, a] and latest_setting([b]) == []


def test_counter_growth() -> None:
    assert counter_growth([10.0, None, 15.0, math.nan, 3.0, 4.0]) == 5.0 + 3.0 + 1.0
    assert counter_growth([1.0]) is None


def test_a_watch_window_from_a_scrape_and_from_log_lines() -> None:
    scrape = SpecDecodeSample("prometheus", 2.07, 107, 321, [0.8037, 0.5140, 0.3364], 55.1, num_drafts=107.0)
    s = UP.with_interval(scrape)
    assert (s.mean, s.per_position, s.drafts, s.accepted, s.drafted) == (2.07, (0.804, 0.514, 0.336), 107.0, 107, 321)
    assert UP.with_interval(replace(scrape, num_drafts=0.0)) == UP
    line = SpecDecodeSample("B", 1.5, 20, 60, [0.3, 0.15, 0.05], 33.3, num_drafts=40.0)
    logged = UP.with_log_window(summarize([line, line]))
    assert (logged.mean, logged.drafts, logged.accepted) == (1.5, 80.0, 40)
    assert s.with_log_window(summarize([line])) == s  # the scrape's window is exact: it counts
    engine = [EngineSample(1.0, 70.0, 1, 0, 2.0, "GPU", None), EngineSample(1.0, 90.0, 2, 0, 3.0, "GPU", None)]
    s = UP.with_engine(summarize_engine(engine))
    assert (s.gen_tps, s.single_tps) == (80.0, 70.0)
    assert UP.with_engine(None) == UP
