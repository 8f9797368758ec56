"""The general rules the seventeenth blind batch's first sight asked for (issue 35): a pasted traceback
hard-wrapped at the terminal's width is read whole; a worker named with its rank is a process of its own, and the
ranks of one group share their fullest traceback; a package that holds a `vllm/` folder is a plugin; the settings a
message says to raise or lower are its fix; a warning a later release words otherwise is not fixed by upgrading; a
feature a refusal names is the part at fault; a transformers processor is built from the checkpoint's files; an
`assert` on vLLM's own state is a defect; a flag some releases have, release unknown, is explained both ways. Lines
as vLLM prints them (the source beside each), none of them a line of the evaluation cases."""

from __future__ import annotations

from bot.core import owners
from bot.core.logparse import parse_text
from bot.core.parts import repo_path
from bot.core.report import Report, build_report
from bot.core.triage import diagnose
from bot.core.triage.atlas_readers.named_in_words import named_in_words
from bot.core.triage.context import Flags
from bot.core.triage.evidence import Readings

WORKER = "(VllmWorker rank={r} pid=40{r}1) ERROR 07-01 10:00:0{r} [multiproc_executor.py:527] "


def report(lines: list[str], **flags: object) -> Report:
    return build_report(diagnose(Readings(parsed=parse_text("\n".join(lines)), flags=Flags(**flags))))


def test_a_frame_cut_inside_its_path_is_joined_with_the_next_line() -> None:
    # Python's traceback format, pasted from a terminal 80 columns wide
    parsed = parse_text("\n".join([
        "Traceback (most recent call last):",
        '  File "/usr/local/lib/python3.12/site-packages/vllm/v1/executor/multip',
        'roc_executor.py", line 520, in worker_busy_loop',
        "    output = func(*args, **kwargs)",
        "ValueError: operands could not be broadcast together with shapes (8",
        ",) (6,)",
    ]))
    frames = [p for p in parsed.problems if p.kind == "frame"]
    assert frames and frames[0].frame_file is not None
    assert frames[0].frame_file.endswith("vllm/v1/executor/multiproc_executor.py")
    exc = next(p for p in parsed.problems if p.kind == "exception")
    assert exc.message.endswith("shapes (8,) (6,)")


def test_a_worker_named_with_its_rank_is_a_process_of_its_own() -> None:
    # vLLM 0.9–0.10 tag a worker's lines `(VllmWorker rank=N pid=…)`
    parsed = parse_text(WORKER.format(r=1) + "Traceback (most recent call last):")
    assert parsed.stats.lines == 1
    from bot.core.line_kinds import split_prefix

    origin, body = split_prefix(WORKER.format(r=1) + "boom")
    assert origin.proc == "VllmWorker rank=1" and origin.level == "ERROR" and body == "boom"


def test_interleaved_ranks_share_their_fullest_traceback() -> None:
    # two ranks fail alike; the paste holds rank 0's exception under a cut traceback and rank 1's frames in full
    plugin = "/usr/local/lib/python3.12/site-packages/acme_spec/vllm/proposer.py"
    r = report([
        WORKER.format(r=0) + "Traceback (most recent call last):",
        WORKER.format(r=1) + "Traceback (most recent call last):",
        WORKER.format(r=0) + '  File "/usr/local/lib/python3.12/site-packages/torch/utils/_contextlib.py", '
                             'line 116, in decorate_context',
        WORKER.format(r=1) + '  File "/usr/local/lib/python3.12/site-packages/vllm/v1/worker/gpu_worker.py", '
                             'line 276, in execute_model',
        WORKER.format(r=1) + f'  File "{plugin}", line 91, in propose',
        WORKER.format(r=1) + "    self.buffer[i, start:end] = ids",
        WORKER.format(r=0) + "ValueError: could not broadcast input array from shape (5,) into shape (4,)",
    ])
    top = next(f for f in r.findings if f.severity == "critical")
    assert top.owner == "plugin" and "acme_spec" in top.title
    assert "disable-plugin" in top.advice


def test_a_package_holding_a_vllm_folder_is_a_plugin() -> None:
    path = "/opt/venv/lib/python3.11/site-packages/acme_spec/vllm/model_runner.py"
    assert owners.of_path(path) == owners.Owner("plugin", "acme_spec")
    assert repo_path(path) is None  # not vLLM's file: the atlas and the history are not asked about it
    assert repo_path("/opt/venv/lib/python3.11/site-packages/vllm/v1/worker/gpu_worker.py") == \
        "vllm/v1/worker/gpu_worker.py"


def test_the_settings_a_warning_says_to_raise_are_its_fix_and_no_upgrade_is_claimed() -> None:
    # V0's preemption warning (https://github.com/vllm-project/vllm/blob/v0.6.3/vllm/core/scheduler.py)
    r = report(["WARNING 08-01 12:00:00 scheduler.py:1481] Sequence group 7 is preempted by PreemptionMode.RECOMPUTE "
                "mode because there is not enough KV cache space. This can affect the end-to-end performance. "
                "Increase gpu_memory_utilization or tensor_parallel_size to provide more KV cache memory. "
                "total_num_cumulative_preemption=101"])
    f = next(f for f in r.findings if f.severity == "warning")
    assert {"--gpu-memory-utilization", "--tensor-parallel-size"} <= set(f.knobs)
    assert any("says to increase `--gpu-memory-utilization`" in x for x in f.remediation)
    assert "upgrade" not in f.advice


def test_a_feature_a_refusal_names_is_the_part_at_fault() -> None:
    named = named_in_words("Model FooForCausalLM does not support LoRA, but LoRA is enabled.", None, "model-loading")
    assert named.feature == ("lora", "--enable-lora")
    assert named_in_words("The prompt holds an image item longer than the encoder cache", None, None).concern == \
        "multimodal"
    assert named_in_words("Weights loaded in 3.2 s", None, None).feature is None


def test_an_assert_on_vllms_own_state_is_a_defect() -> None:
    # an invariant of vLLM's scheduler (a bare assert over its own queues), raised in its file
    r = report(["Traceback (most recent call last):",
                '  File "/usr/local/lib/python3.12/site-packages/vllm/v1/core/sched/scheduler.py", line 420, '
                'in schedule',
                "    assert len(self.running) <= self.max_num_running_reqs",
                "AssertionError"])
    f = next(f for f in r.findings if f.severity == "critical")
    assert "upgrade" in f.advice and any("invariant" in x for x in f.remediation)


def test_a_flag_some_releases_have_is_explained_both_ways_when_the_release_is_unknown() -> None:
    # argparse's refusal as `vllm serve` prints it; `--task` is a flag of some releases only
    r = report(["vllm: error: unrecognized arguments: --task embed"])
    f = next(f for f in r.findings if f.id == "cli-refused")
    assert "is not a flag of this vLLM" in f.title and "upgrade" in f.advice
    assert "vllm --version" in f.remediation[0]


def test_the_nvml_assert_in_torchs_caching_allocator_names_the_allocator_switch() -> None:
    # PyTorch's assert as its allocator prints it (https://github.com/pytorch/pytorch/issues/112377)
    r = report(['RuntimeError: NVML_SUCCESS == r INTERNAL ASSERT FAILED at "/pytorch/c10/cuda/'
                'CUDACachingAllocator.cpp":838, please report a bug to PyTorch.'])
    f = next(f for f in r.findings if f.severity == "critical")
    assert f.owner == "torch" and any("PYTORCH_CUDA_ALLOC_CONF" in x for x in f.remediation)
    assert any("expandable_segments:False" in x for x in f.remediation)


def test_a_crash_in_vllms_code_that_names_nothing_of_yours_is_a_defect_of_the_release() -> None:
    # an exception inside vLLM's sampler, no setting, package or input named on the line
    r = report(["Traceback (most recent call last):",
                '  File "/usr/local/lib/python3.12/site-packages/vllm/v1/sample/sampler.py", line 88, in '
                '_scaled_widths',
                "    scale = total / count",
                "ZeroDivisionError: float division by zero"])
    f = next(f for f in r.findings if f.id.startswith("frame:"))
    assert f.owner == "vllm" and "upgrade" in f.advice
    assert any("defect of this vLLM release" in x for x in f.remediation), f.remediation
    # a refusal of what was given is not a defect: no upgrade is added to it
    refusal = report(["ValueError: max_model_len (9000) must be less than or equal to max_position_embeddings"])
    assert not any("defect of this vLLM release" in x for f in refusal.findings for x in f.remediation)


def test_a_traceback_copied_out_of_a_json_string_keeps_its_frames() -> None:
    parsed = parse_text("\n".join([
        'ERROR 04-04 03:08:52 [core.py:343]   File \\"/usr/local/lib/python3.12/dist-packages/vllm/v1/engine/'
        'core.py\\", line 336, in run_engine_core',
        "ValueError: boom",
        "Exception in ASGI application",
    ]))
    frame = next(p for p in parsed.problems if p.kind == "frame")
    assert frame.frame_function == "run_engine_core"
    assert next(p for p in parsed.problems if p.kind == "exception").message == "boom"


def test_a_wheel_that_needs_a_newer_glibc_is_answered_by_the_os_or_another_release() -> None:
    # glibc's loader message (elf/dl-version.c) for vLLM's compiled module
    r = report(["ImportError: /lib/x86_64-linux-gnu/libc.so.6: version `GLIBC_2.32' not found (required by "
                "/opt/venv/lib/python3.10/site-packages/vllm/_C.abi3.so)"])
    f = next(f for f in r.findings if f.severity == "critical")
    assert "library" in f.host and "upgrade" in f.advice
