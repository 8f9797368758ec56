"""The sourced catalogs below vLLM (CUDA, NCCL, the loader, container runtimes) and the switch table."""

from __future__ import annotations

import re
from re import _parser as parser  # type: ignore[attr-defined]

import pytest

from bot.core import switches
from bot.core.catalogs import load_catalogs

_REPEATS = {parser.MAX_REPEAT, parser.MIN_REPEAT, parser.POSSESSIVE_REPEAT}


def _nested_repeat(tree: object, inside: bool = False) -> bool:
    for op, av in tree:  # type: ignore[attr-defined]
        if op in _REPEATS:
            _lo, hi, sub = av
            if inside and hi == parser.MAXREPEAT:
                return True
            if _nested_repeat(sub, inside or hi == parser.MAXREPEAT):
                return True
        elif op in (parser.SUBPATTERN,):
            if _nested_repeat(av[-1], inside):
                return True
        elif op == parser.BRANCH and any(_nested_repeat(b, inside) for b in av[1]):
            return True
    return False


def test_every_entry_has_a_source_and_every_regex_is_linear() -> None:
    cat = load_catalogs()
    assert len(cat.entries) > 60 and cat.nccl_env
    for e in cat.entries:
        assert e.sources and all(s.startswith("https://") for s in e.sources), e.name
        if e.regex is not None:
            assert not _nested_repeat(parser.parse(e.regex.pattern)), e.name


@pytest.mark.parametrize(("line", "kind", "fix"), [
    ("ImportError: libcuda.so.1: cannot open shared object file: No such file or directory", "loader",
     "host:container-toolkit"),
    ("version `GLIBC_2.32' not found (required by /x/site-packages/vllm/_C.abi3.so)", "loader", "host:library"),
    ("RuntimeError: CUDA error: no kernel image is available for execution on the device", "cuda", "dep:torch"),
    ("docker: Error response from daemon: could not select device driver \"\" with capabilities: [[gpu]].",
     "container", "host:container-toolkit"),
    ("NCCL WARN Error while creating shared memory segment /dev/shm/nccl-x (size 9637888)", "nccl-hint", "host:shm"),
])
def test_a_line_finds_its_entry_and_the_kind_of_fix(line: str, kind: str, fix: str) -> None:
    hits = load_catalogs().hits(line)
    assert hits and hits[0].entry.kind == kind and fix in hits[0].fix


def test_an_nccl_line_holds_the_cuda_error_inside_it() -> None:
    hits = load_catalogs().hits("NCCL WARN Cuda failure 'invalid argument'")
    nccl = next(h for h in hits if h.entry.kind.startswith("nccl"))
    assert nccl.nested and nccl.nested[0].entry.name == "cudaErrorInvalidValue"


def test_every_switch_has_a_way_off_with_its_source_and_a_real_prefix() -> None:
    table = switches.load_switches()
    assert len(table) >= 30
    for sw in table:
        assert sw.off and sw.gone and sw.stays, sw.id
        for off in sw.off:
            assert off.sources and off.knob, (sw.id, off.how)
        assert all(re.match(r"^(vllm|csrc)/", f) for f in sw.files), sw.id


def test_a_frame_finds_its_switch_on_the_users_release() -> None:
    sw = switches.for_frame("vllm/distributed/device_communicators/custom_all_reduce.py", "all_reduce")
    assert sw is not None and sw.id == "custom-all-reduce"
    off = sw.for_release("0.4.1")  # older than the table was read from: the switch is older still
    assert off is not None and off.knob == "--disable-custom-all-reduce"
    text = sw.advice("0.20.1")
    assert text is not None and "--disable-custom-all-reduce" in text and "If the failure goes away" in text
    sampler = switches.for_frame("vllm/v1/sample/ops/topk_topp_sampler.py", "flashinfer_sample")
    assert sampler is not None and sampler.for_release("0.20.1") is not None
    assert sampler.for_release("0.20.1").knob == "VLLM_USE_FLASHINFER_SAMPLER"  # type: ignore[union-attr]
