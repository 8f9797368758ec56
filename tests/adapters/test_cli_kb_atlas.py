"""`specops kb atlas LINE`: where vLLM's released source prints a pasted line, through the real CLI process."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def specops(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "bot", "kb", "atlas", *args], capture_output=True, text=True,
                          timeout=120, cwd=ROOT)


def test_a_line_is_placed_with_site_releases_condition_knobs_and_link() -> None:
    line = ("(APIServer pid=1) ERROR 12-01 18:40:51 [core.py:700]   Value error, prompt_lookup_min=5 must be <= "
            "prompt_lookup_max=2 [type=value_error, input_value=ArgsKwargs((), {}), input_type=ArgsKwargs]")
    p = specops(line, "--vllm-version", "0.32.0")
    assert p.returncode == 0, p.stderr
    assert "spec-config · ValueError in vllm/config/speculative.py:" in p.stdout
    assert "`SpeculativeConfig.__post_init__`" in p.stdout
    assert "link: https://github.com/vllm-project/vllm/blob/v0.32.0/vllm/config/speculative.py#L" in p.stdout
    assert "when: method in ('ngram', 'ngram_gpu') and prompt_lookup_min is more than prompt_lookup_max" in p.stdout
    assert "knob: --speculative-config (key prompt_lookup_min)" in p.stdout
    out = json.loads(specops(line, "--vllm-version", "0.32.0", "--format", "json").stdout)
    assert out["found"] and out["part"] == "spec-config" and out["in_your_release"] is True
    assert {k["key"] for k in out["knobs"]} >= {"prompt_lookup_min", "prompt_lookup_max"}


def test_a_message_later_releases_do_not_print_says_upgrade_with_the_compare_link() -> None:
    line = ("ValueError: Bfloat16 is only supported on GPUs with compute capability of at least 8.0. Your Tesla "
            "V100-SXM2-32GB GPU has compute capability 7.0.")
    out = json.loads(specops(line, "--vllm-version", "0.6.6.post1", "--format", "json").stdout)
    assert out["found"] and out["condition_text"] == ("torch_dtype is torch.bfloat16 and the GPU's compute "
                                                      "capability is below 8.0")
    assert "--dtype" in [k["flag"] for k in out["knobs"]]


def test_bad_input_gets_one_short_line_and_exit_2_and_an_unknown_line_exit_1() -> None:
    empty = specops("")
    assert empty.returncode == 2 and "paste one line" in empty.stderr and "Traceback" not in empty.stderr
    bad = specops("x", "--vllm-version", "banana")
    assert bad.returncode == 2 and "not a version" in bad.stderr and "Traceback" not in bad.stderr
    unknown = specops("the coffee machine is out of beans again")
    assert unknown.returncode == 1 and unknown.stdout.startswith("not in the atlas:")
    fmt = specops("x", "--format", "yaml")
    assert fmt.returncode == 2 and "text or json" in fmt.stderr
