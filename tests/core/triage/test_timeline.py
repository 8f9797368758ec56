"""The verdict is about now (issue 35): startup notices and past warnings are notes; a failure after the last
healthy line is current."""

from __future__ import annotations

from bot.core.logparse import parse_text
from bot.core.report import Report, build_report
from bot.core.triage import diagnose
from bot.core.triage.context import Flags
from bot.core.triage.evidence import Readings

STARTUP = [
    "(Worker_TP0 pid=128) INFO 08-16 03:02:39 [default_loader.py:430] Loading weights took 12.21 seconds",
    "(Worker_TP0 pid=128) WARNING 08-16 03:02:39 [kv_cache.py:148] Using KV cache scaling factor 1.0 for fp8_e4m3. "
    "If this is unintended, verify that k/v_scale scaling factors are properly set in the checkpoint.",
    "(Worker_TP0 pid=128) INFO 08-16 03:02:52 [gpu_worker.py:460] Available KV cache memory: 15.72 GiB",
]
STALL = ("(EngineCore pid=107) INFO 05-18 06:17:53 [shm_broadcast.py:681] No available shared memory broadcast block "
         "found in 60 seconds. This typically happens when some processes are hanging or doing some time-consuming "
         "work (e.g. compilation).")
COMPILE = ("(Worker_TP0 pid=116) INFO 05-18 06:17:38 [backends.py:393] Compiling a graph for compile range (1, 8192) "
           "takes 34.03 s")
ENGINE = ("(APIServer pid=1) INFO 05-08 16:26:29 [loggers.py:271] Engine 000: Avg prompt throughput: 5.0 tokens/s, "
          "Avg generation throughput: 124.5 tokens/s, Running: 1 reqs, Waiting: 0 reqs, GPU KV cache usage: 7.4%, "
          "Prefix cache hit rate: 0.0%")
CRASH = ("(EngineCore pid=9) ERROR 05-08 16:27:01 [core.py:700] RuntimeError: CUDA error: an illegal memory access "
         "was encountered")


def report(lines: list[str], **flags: object) -> Report:
    return build_report(diagnose(Readings(parsed=parse_text("\n".join(lines)), flags=Flags(**flags))))  # type: ignore[arg-type]


def test_a_warning_while_starting_is_a_note_and_startup_going_on_is_healthy_so_far() -> None:
    r = report(STARTUP)
    assert r.verdict == "healthy" and not [f for f in r.findings if f.severity in ("critical", "warning")]
    assert any("Not current" in f.summary for f in r.findings)


def test_a_stall_notice_during_compilation_is_not_a_degraded_server() -> None:
    assert report([COMPILE, STALL]).verdict == "healthy"


def test_a_failure_after_the_last_healthy_line_is_current() -> None:
    r = report([*STARTUP, ENGINE, CRASH])
    assert r.verdict == "failing"


def test_a_run_without_speculation_is_not_told_about_drafters() -> None:
    r = report(["INFO 05-08 16:26:00 [api_server.py:1] non-default args: {'model': 'Qwen/Qwen3-8B'}",
                "ValueError: The model's max seq len (163840) is larger than the maximum number of tokens that can "
                "be stored in KV cache (13360). Try increasing gpu_memory_utilization or decreasing max_model_len "
                "when initializing the engine."])
    told = " ".join(step for f in r.findings for step in f.remediation) + " ".join(r.plan)
    assert r.verdict == "failing" and "--speculative-config" not in told and "drafter" not in told.lower()
    assert not [c for c in r.considered if c.id.startswith("dflash") and c.status != "not-applicable"]


def test_a_line_of_unread_level_alone_is_not_called_a_startup_notice() -> None:
    # "ERROR ..." with its time cut: the level is not read, and no startup line is around it — it stays a claim
    r = report(["ERROR ... [backend_xgrammar.py:168] Failed to advance FSM for request <id> for tokens 271. "
                "Please file an issue."], method="dflash")
    assert not any("Not current" in f.summary for f in r.findings)
    assert [f for f in r.findings if f.severity in ("critical", "warning")]
