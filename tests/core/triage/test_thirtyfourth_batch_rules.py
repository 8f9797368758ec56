"""What the thirty-fourth batch's misses taught, general (issue 35): a `vllm/` folder inside another package's
checkout is that package's (a plugin's), not vLLM's; an installed file's package is the folder after site-packages
(vLLM's own `models/transformers/` is vLLM's); a traceback placed by its innermost frame gets what the code's history
says of that line (a line new since the release read before the user's: pin it); the Transformers backend's own switch
is `--model-impl vllm`; a launcher's bracketed tags and a logger's milliseconds are not the line; a vLLM message naming
a drafter's model class is the drafter's. Lines in the shapes public threads show (tests/cases-thirtyfourth)."""

from __future__ import annotations

from bot.core import owners
from bot.core.history import load_history
from bot.core.logparse import parse_text
from bot.core.parts import repo_path
from bot.core.report import build_report
from bot.core.triage import diagnose
from bot.core.triage.context import Flags
from bot.core.triage.evidence import Readings
from bot.core.triage.findings import Finding


def _claims(text: str, version: str | None = None) -> list[Finding]:
    report = build_report(diagnose(Readings(parsed=parse_text(text), flags=Flags(vllm_version=version))))
    return [f for f in report.findings if f.severity in ("critical", "warning")]


def test_a_vllm_folder_inside_another_packages_checkout_is_that_packages() -> None:
    plugin = owners.of_path("/code/ArcticInference/arctic_inference/vllm/spec_dec/arctic_speculator.py")
    assert plugin is not None and (plugin.name, plugin.package) == ("plugin", "arctic_inference")
    for vllms in ("/root/code/vllm/vllm/attention/layer.py", "/app/vllm/engine/llm_engine.py"):
        owner = owners.of_path(vllms)
        assert owner is not None and owner.name == "vllm", vllms
        assert repo_path(vllms) == vllms[vllms.rindex("vllm/"):], vllms
    # the path as a repository writes it agrees with the owner: a plugin's file is no path of vLLM's
    assert repo_path("/code/ArcticInference/arctic_inference/vllm/spec_dec/arctic_speculator.py") is None


def test_an_installed_files_package_is_the_folder_after_site_packages() -> None:
    assert repo_path("/usr/local/lib/python3.12/dist-packages/vllm/model_executor/models/transformers/base.py") \
        == "vllm/model_executor/models/transformers/base.py"
    assert repo_path("/usr/lib/python3/dist-packages/transformers/models/llama/modeling_llama.py") \
        == "src/transformers/models/llama/modeling_llama.py"
    assert repo_path("/home/u/vllm/vllm/model_executor/models/transformers/base.py") \
        == "vllm/model_executor/models/transformers/base.py"
    assert repo_path("/x/site-packages/arctic_inference/vllm/a.py") is None


def test_a_release_between_two_read_ones_places_a_line_new_since_the_earlier() -> None:
    hist = load_history()
    assert hist is not None
    file, fn, code = "vllm/model_executor/models/transformers/base.py", "_recursive_replace", \
        "new_module = replace_linear_class("
    first = hist.function_releases(file, fn)[0]
    before = hist.releases[hist.releases.index(first) - 1]
    between = hist.line(file, fn, code, _between(before, first))
    assert between is not None and between.new_since == before
    assert hist.line(file, fn, code, first).new_since is None  # a release read: its own history says it


def _between(a: str, b: str) -> str:
    """A public release after `a` and before `b` (`0.10.2` and `0.11.2` -> `0.11.1`)."""
    major, minor, patch = (int(x) for x in b.split(".")[:3])
    return f"{major}.{minor}.{patch - 1}" if patch else f"{a}.1"


FRAMES = (
    "[EngineCore_DP0 pid=37] ERROR 12-12 05:05:56 [core.py:843] Traceback (most recent call last):\n"
    '[EngineCore_DP0 pid=37] ERROR 12-12 05:05:56 [core.py:843]   File "/usr/local/lib/python3.12/dist-packages/vllm/'
    'model_executor/models/transformers/base.py", line 288, in _recursive_replace\n'
    "[EngineCore_DP0 pid=37] ERROR 12-12 05:05:56 [core.py:843]     new_module = replace_linear_class(\n")


def test_a_frame_placed_crash_new_since_the_release_before_is_a_regression_to_pin_with_the_backends_switch() -> None:
    top = next(f for f in _claims(FRAMES, "0.11.1") if f.id.startswith("atlas-frame:"))
    assert top.part == "models" and "pin" in top.advice
    assert "regression candidate" in top.remediation[0]
    assert any("`--model-impl vllm`" in r for r in top.remediation)


def test_a_launchers_tags_and_a_loggers_milliseconds_are_not_the_line() -> None:
    parsed = parse_text(
        '[1/8,TP1][pid=5510] ERROR 01-28 10:47:07.623 [forward_context.py:617]   File "/usr/local/lib/python3.12/'
        'dist-packages/vllm/v1/spec_decode/eagle.py", line 1486, in dummy_run\n')
    assert [(p.kind, p.frame_function) for p in parsed.problems] == [("frame", "dummy_run")]


def test_a_vllm_message_naming_a_drafters_model_class_is_the_drafters() -> None:
    line = ("WARNING 05-08 18:36:20 [utils.py:168] The model class ArcticLSTMSpeculator has not defined "
            "`packed_modules_mapping`, this may lead to incorrect mapping of quantized or ignored modules\n")
    report = build_report(diagnose(Readings(parsed=parse_text(line), flags=Flags())))
    assert [f.part for f in report.findings if f.id.startswith("atlas:")] == ["drafter"]


def test_a_vllm_checkout_under_a_generic_folder_stays_vllms() -> None:
    owner = owners.of_path("/workspace/src/vllm/v1/attention/backends/new_backend.py")
    assert owner is not None and owner.name == "vllm"
