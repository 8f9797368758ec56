"""Rules from the sixtieth batch's misses, general: a fallback entry about speculation's share of a general failure
is a guess when the log shows no speculation; a bare `No module named` line; an exception whose module path names
another package than the matched library site's; pydantic 1's error line; a refusal naming the variable to set after
what it sets; KB: the harmony encoding's vocabulary download."""

from __future__ import annotations

from tests.core.triage.reports import claims_of

_OOM = ("torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 1029.51 GiB. GPU 0 has a total capacity of "
        "79.35 GiB of which 19.23 GiB is free.\n")


def test_a_drafters_share_of_an_oom_is_a_guess_without_speculation() -> None:
    found = [f for f in claims_of(_OOM) if f.id == "cuda-out-of-memory-with-drafter"]
    assert found and found[0].confidence == "low"


def test_a_bare_no_module_line_is_the_missing_package() -> None:
    found = [f for f in claims_of("No module named 'triton'\n") if f.id.startswith("words:ModuleNotFoundError:")]
    assert found and found[0].deps == ["triton"]


def test_another_packages_exception_at_a_library_site_is_low() -> None:
    line = ("openai_harmony.HarmonyError: error downloading or loading vocab file: failed to download or load vocab "
            "file。\n")
    hub = [f for f in claims_of(line) if f.site is not None and f.site.package == "huggingface_hub"]
    assert all(f.confidence == "low" for f in hub)
    found = [f for f in claims_of(line) if f.id == "harmony-vocab-download-failed"]
    assert found and "TIKTOKEN_ENCODINGS_BASE" in found[0].knobs


def test_pydantic_ones_error_line_and_a_variable_named_after_what_it_sets() -> None:
    line = ("Please use Flashinfer backend for models withlogits_soft_cap (i.e., Gemma-2). Otherwise, the output might "
            "be wrong. Set Flashinfer backend by export VLLM_ATTENTION_BACKEND=FLASHINFER. (type=value_error)\n")
    found = [f for f in claims_of(line) if f.id == "told-variable:VLLM_ATTENTION_BACKEND"]
    assert found and "`VLLM_ATTENTION_BACKEND=FLASHINFER`" in found[0].title
    # a debug switch named so is a way to see more, not the way out
    assert not [f for f in claims_of("ValueError: Set verbose output by export VLLM_LOGGING_LEVEL=DEBUG. "
                                     "(type=value_error)\n") if f.id.startswith("told-variable:")]


def test_review_bounds_and_narrowings() -> None:
    import time

    from bot.core import owners

    started = time.perf_counter()
    owners.of_shared_object("RuntimeError: failed: " + "xx.so" * 800 + ": cannot open shared object file")
    assert time.perf_counter() - started < 0.5  # a run of `x.so` words must not backtrack
    # a limit of 0 the user set is theirs, not the model's implementation
    set_zero = ("INFO 01-01 00:00:00 [utils.py:1] non-default args: {'limit_mm_per_prompt': {'image': 0}}\n"
                "ValueError: At most 0 image(s) may be provided in one prompt.\n")
    placed = [f for f in claims_of(set_zero) if f.site is not None]
    assert placed and "upgrade" not in placed[0].advice
    assert not any("no image input" in " ".join(f.remediation) for f in placed)
    # pydantic 1's `field required` is no refusal of a value, and a logger's line is its own record
    from bot.core.logparse import parse_text

    assert not parse_text("model\n  field required (type=value_error.missing)\n").problems
    assert not [p for p in parse_text("INFO 01-01 00:00:00 [x.py:1] bad value for x here (type=value_error)\n").problems
                if p.kind == "exception"]
