"""What the thirty-eighth batch's misses taught, general (issue 35): a program outside vLLM passing an engine argument
vLLM removed is the program's age, named by its frame; Python's `Exception ignored in` starts a record of its own (not
the rest of the message above it), and one note covers the same exception ignored again; a script of vLLM's
repository run from a checkout (`benchmarks/`, `examples/`) is the user's program, not the package; a traceback cut
at the call into spawn's preparation is the missing main guard's. Lines in the shapes public threads show
(tests/cases-thirtyeighth)."""

from __future__ import annotations

from bot.core import owners
from bot.core.logparse import parse_text
from bot.core.parts import repo_path
from bot.core.report import build_report
from bot.core.triage import diagnose
from bot.core.triage.context import Flags
from bot.core.triage.evidence import Readings
from bot.core.triage.findings import Finding


def _report(text: str, version: str | None = None) -> list[Finding]:
    return build_report(diagnose(Readings(parsed=parse_text(text), flags=Flags(vllm_version=version)))).findings


def _claims(text: str, version: str | None = None) -> list[Finding]:
    return [f for f in _report(text, version) if f.severity in ("critical", "warning")]


_CALLED_FROM = ('Traceback (most recent call last):\n'
                '  File "/opt/venv/lib/python3.11/site-packages/trainer_kit/rollout/engine.py", line 88, in build\n'
                '    self.llm = LLM(**engine_kwargs)\n'
                '  File "/opt/venv/lib/python3.11/site-packages/vllm/entrypoints/llm.py", line 240, in __init__\n'
                '    engine_args = EngineArgs(\n')


def test_a_program_passing_an_engine_argument_vllm_removed_is_the_programs_age() -> None:
    text = _CALLED_FROM + "TypeError: EngineArgs.__init__() got an unexpected keyword argument 'worker_use_ray'\n"
    f = next(c for c in _claims(text, "0.8.5") if c.id.startswith("removed-argument:"))
    assert f.deps == ["trainer_kit"] and f.inputs == ["worker_use_ray"] and f.advice == ["pin"]
    assert "`trainer_kit`" in f.remediation[0] and "0.6.6.post1" in f.remediation[0]
    # the release that still takes it is no removal; vLLM's own frames alone are files of two versions
    assert not any(c.id.startswith("removed-argument:") for c in _claims(text, "0.6.3"))
    own = text.replace("site-packages/trainer_kit/rollout/engine.py", "site-packages/vllm/entrypoints/cli/serve.py")
    assert not any(c.id.startswith("removed-argument:") for c in _claims(own, "0.8.5"))


def test_exception_ignored_in_is_a_record_of_its_own_and_one_note_covers_the_same_exception_again() -> None:
    block = ('Exception ignored in: <function Engine.__del__ at 0x7f00>\nTraceback (most recent call last):\n'
             '  File "/srv/venv/lib/python3.10/site-packages/vllm/executor/ray_distributed_executor.py", line 131, in '
             'shutdown\nAttributeError: \'NoneType\' object has no attribute \'info\'\n')
    parsed = parse_text(block + block.replace("Engine.__del__", "Executor.__del__"))
    exceptions = [p for p in parsed.problems if p.kind == "exception"]
    assert [p.message for p in exceptions] == ["'NoneType' object has no attribute 'info'"] * 2
    assert {p.traceback_id for p in exceptions} <= parsed.ignored
    assert not _claims(block + block.replace("Engine.__del__", "Executor.__del__"))


def test_a_script_of_vllms_repository_run_from_a_checkout_is_the_users_program() -> None:
    for path in ("/root/vllm/benchmarks/benchmark_serving.py", "/home/me/vllm/examples/offline_inference/basic.py"):
        owner = owners.of_path(path)
        assert owner is not None and owner.name == "user-script" and repo_path(path) is None, path
    # the package's own benchmarks (since 0.8.5) stay vLLM's
    assert repo_path("/root/vllm/vllm/benchmarks/serve.py") == "vllm/benchmarks/serve.py"
    owner = owners.of_path("/root/vllm/vllm/benchmarks/serve.py")
    assert owner is not None and owner.name == "vllm"


def test_a_traceback_cut_at_the_call_into_spawns_preparation_is_the_missing_main_guard() -> None:
    text = ('  File "/envs/llm/lib/python3.10/multiprocessing/process.py", line 121, in start\n'
            '    self._popen = self._Popen(self)\n'
            '  File "/envs/llm/lib/python3.10/multiprocessing/popen_spawn_posix.py", line 42, in _launch\n'
            '    prep_data = spawn.get_preparation_data(process_obj._name)\n')
    f = next(c for c in _claims(text) if c.id == "main-guard-missing")
    assert f.owner == "user-script" and f.confidence == "low"
