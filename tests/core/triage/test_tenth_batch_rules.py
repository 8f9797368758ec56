"""The general rules the tenth blind batch's first sight asked for (issue 35): the link-time linker, torch's Gloo
group, a kernel refusing a GPU by its SM number, a packed int checkpoint loaded unquantized, a class missing a method
its base requires, a drafter's class under vLLM's shared loader, and vLLM passing over a backend it cannot use."""

from __future__ import annotations

from bot.core.logparse import parse_text
from bot.core.report import Report, build_report
from bot.core.triage import diagnose
from bot.core.triage.context import Flags
from bot.core.triage.evidence import Readings


def report(lines: list[str], **flags: object) -> Report:
    return build_report(diagnose(Readings(parsed=parse_text("\n".join(lines)), flags=Flags(**flags))))  # type: ignore[arg-type]


def top(r: Report):  # type: ignore[no-untyped-def]
    return next(f for f in r.findings if f.severity == "critical")


def test_the_linker_not_finding_a_versioned_library_is_the_loaders() -> None:
    f = top(report(["/usr/bin/ld: cannot find -l:libcuda.so.1", "collect2: error: ld returned 1 exit status"]))
    assert f.owner == "loader" and "library" in f.host and "LIBRARY_PATH" in f.knobs


def test_glooss_mesh_failure_is_torchs_network_not_the_all_reduce_path() -> None:
    f = top(report(["RuntimeError: Gloo connectFullMesh failed with [/pytorch/third_party/gloo/gloo/transport/tcp/"
                    "pair.cc:152] timed out connecting: SO_ERROR: Connection refused, remote=[127.0.0.1]:29500"]))
    assert f.owner == "torch" and f.part == "parallel" and "network" in f.host
    assert any(k.startswith("GLOO_SOCKET_IFNAME") for k in f.knobs) and "--disable-custom-all-reduce" not in f.knobs
    assert not any(k.startswith("NCCL_P2P") for k in f.knobs)
    t = top(report(["RuntimeError: [/pytorch/third_party/gloo/gloo/transport/tcp/unbound_buffer.cc:78] Timed out "
                    "waiting 1800000ms for recv operation to complete"]))
    assert t.owner == "torch" and t.part == "parallel"


def test_a_kernel_refusing_the_device_by_its_sm_number_names_the_gpu_and_the_upgrade() -> None:
    f = top(report(["RuntimeError: SomeLib-CUTLASS grouped GEMM kernel does not support current device sm_121"]))
    assert f.id == "gpu-not-in-kernel-build" and "gpu" in f.inputs and "upgrade" in f.advice


def test_a_packed_int_tensor_the_loader_lacks_points_at_the_quantization_method() -> None:
    f = next(f for f in report(["KeyError: 'model.layers.3.self_attn.o_proj.qweight'"]).findings
             if f.severity == "critical" and "checkpoint" in f.inputs)
    assert "--quantization" in f.knobs
    g = next(f for f in report(["KeyError: 'model.layers.3.self_attn.o_proj.weight'"]).findings
             if f.severity == "critical" and "checkpoint" in f.inputs)
    assert "--quantization" not in g.knobs


def abstract(r: Report):  # type: ignore[no-untyped-def]
    return next(f for f in r.findings if f.id.startswith("abstract-class:"))


def test_a_class_missing_a_method_its_base_requires() -> None:
    f = abstract(report(["TypeError: Can't instantiate abstract class NeuronWorker with abstract method "
                         "execute_worker"]))
    assert f.owner == "vllm" and f.part == "worker" and {"pin", "upgrade"} <= set(f.advice)
    g = abstract(report(["TypeError: Can't instantiate abstract class SomePluginWorkerXyz without an implementation "
                         "for abstract method 'execute_model'"]))
    assert g.owner == "plugin" and "disable-plugin" in g.advice


def test_the_shared_loader_failing_for_a_drafters_class_blames_the_drafter() -> None:
    r = report(["ValueError: There is no module or parameter named 'layers.0.some_new_conv' in SomeDFlashQwenModel."])
    assert any(f.part == "drafter" for f in r.findings if f.severity == "critical")


def test_vllm_passing_over_a_backend_it_cannot_use_is_a_note() -> None:
    r = report(["(EngineCore pid=1) ERROR 10-13 11:36:41 [fa_utils.py:57] Cannot use FA version 2 is not supported "
                "due to FA2 is only supported on devices with compute capability >= 8"])
    assert r.verdict in ("healthy", "unknown")
    assert not [f for f in r.findings if f.severity in ("critical", "warning")]


def test_a_sentence_raised_in_two_files_is_not_placed_with_high_confidence_by_its_words() -> None:
    from bot.core.atlas import load_atlas

    m = load_atlas().match("bitsandbytes version is wrong. Please install bitsandbytes>=0.46.1.", exc="ImportError")
    assert m is not None and m.rivals
    r = report(["ImportError: bitsandbytes version is wrong. Please install bitsandbytes>=0.46.1."])
    placed = [f for f in r.findings if f.id.startswith("atlas:")]
    assert placed and all(f.confidence != "high" for f in placed)


def test_pytorchs_driver_api_wording_points_at_the_paths_that_call_the_driver_directly() -> None:
    f = top(report(["RuntimeError: CUDA driver error: operation not supported"], tensor_parallel_size=2))
    assert f.owner == "torch" and any(k.startswith("VLLM_ALLREDUCE_USE_SYMM_MEM") for k in f.knobs)
