"""Rules from the fiftieth batch's misses, general: a message cut after its first sentence (an issue's title, a
paste's `...`) is still placed; a refusal's own way out ("Use FP8 quantization instead", "running with
--quantization awq") comes before the part's switch; a kernel naming the SM it refuses; a check of a request's id is
the request's; the hybrid KV cache manager turned off before a KV shortfall; a KeyError of a tensor's name with no
traceback; a Unix socket path over the kernel's limit; Ray refusing a process of another Ray."""

from __future__ import annotations

from bot.core.atlas import load_atlas
from bot.core.logparse import parse_text
from tests.core.triage.reports import claims_of


def test_a_message_cut_after_its_first_sentence_is_placed_at_its_site() -> None:
    atlas = load_atlas()
    cut = atlas.match("RuntimeError: Every node should have a unique IP address.")
    assert cut is not None and cut.site.file.endswith("ray_executor.py")
    dotted = atlas.match("Turning off hybrid kv cache manager because `--kv-transfer-config` is set...")
    assert dotted is not None and dotted.site.file == "vllm/config/vllm.py"
    # a first sentence of few words, or a cut inside a sentence, proves nothing
    assert atlas.match("ValueError: Something went wrong here today.") is None
    assert atlas.match("RuntimeError: Every node should have") is None


def test_a_refusal_naming_its_way_out_is_the_fix_before_the_parts_switch() -> None:
    quant = claims_of("RuntimeError: dispatch_scaled_mm, .../w8a8/cutlass/c3x/scaled_mm_helper.hpp:34,\n"
                      "Int8 not supported on SM120. Use FP8 quantization instead, or run on older arch (SM < 100).\n")
    found = [f for f in quant if "gpu" in f.host]
    assert found and "checkpoint" in found[0].advice and "upgrade" not in found[0].advice
    marlin = claims_of("ValueError: Weight input_size_per_partition = 10944 is not divisible by min_thread_k = 128. "
                       "Consider reducing tensor_parallel_size or running with --quantization awq.\n")
    told = [f for f in marlin if "--quantization" in f.knobs]
    said = [i for i, r in enumerate(told[0].remediation if told else []) if "`--quantization awq`" in r]
    off = [i for i, r in enumerate(told[0].remediation if told else []) if "to prove it" in r]
    assert said and (not off or said[0] < off[0]) and told[0].switch is None  # its own setting, then the switch
    assert any("says to reduce `--tensor-parallel-size`" in r for r in told[0].remediation)


def test_a_check_of_a_requests_id_is_the_requests() -> None:
    claims = claims_of("ValueError: Request id 0 does not contain hostname and port\n")
    assert any("request" in f.inputs and "request" in f.advice for f in claims), [(f.id, f.inputs) for f in claims]
    other = claims_of("ValueError: Every node should have a unique IP address. Got 2 nodes with node ids [a, b] "
                      "and 1 unique IP addresses [x].\n")
    assert not any("request" in f.inputs for f in other)


def test_the_hybrid_kv_manager_turned_off_is_named_in_a_kv_shortfall() -> None:
    log = ("WARNING [config.py:1297] Turning off hybrid kv cache manager because `--kv-transfer-config` is set...\n"
           "ValueError: To serve at least one request with the models's max seq len (128000), (38.87 GiB KV cache "
           "is needed, which is larger than the available KV cache memory (20.1 GiB).\n")
    short = [f for f in claims_of(log) if f.part == "kv-cache"]
    assert short and "--no-disable-hybrid-kv-cache-manager" in short[0].knobs
    assert "--kv-transfer-config" in short[0].inputs and "upgrade" in short[0].advice
    alone = [f for f in claims_of(log.split("\n", 1)[1]) if f.part == "kv-cache"]
    assert alone and "--no-disable-hybrid-kv-cache-manager" not in alone[0].knobs


def test_a_keyerror_of_a_tensors_name_is_the_checkpoints_even_without_a_traceback() -> None:
    parsed = parse_text("KeyError: 'embed_tokens.weight'\nassert hidden_states.shape[-1] == x.shape[-1]\n")
    assert [p.message for p in parsed.problems if p.kind == "exception"] == ["'embed_tokens.weight'"]
    found = [f for f in claims_of("KeyError: 'embed_tokens.weight'\n") if f.id.startswith("unknown-weight")]
    assert found and found[0].confidence == "low" and found[0].part == "model-loading"
    assert not any(f.id.startswith("unknown-weight") for f in claims_of("KeyError: 'max_tokens'\n"))


def test_a_unix_socket_path_over_the_limit_names_the_temp_dir() -> None:
    path = "/p/scratch/" + "x" * 90 + "/engine_service_lookup_rpc_port_1"
    found = [f for f in claims_of(f'zmq.error.ZMQError: ipc path "{path}" is longer than 107 characters '
                                  "(sizeof(sockaddr_un.sun_path)).\n") if f.id == "unix-socket-path-too-long"]
    assert found and "TMPDIR" in found[0].inputs and "TMPDIR" in found[0].knobs
    assert not any(f.id == "unix-socket-path-too-long"
                   for f in claims_of('zmq.error.ZMQError: No such file or directory for ipc path "/tmp/x".\n'))


def test_ray_refusing_another_ray_or_python_is_rays_and_a_patch_warning_is_not() -> None:
    refused = claims_of("RuntimeError: Version mismatch: The cluster was started with:\n    Ray: 2.43.0\n"
                        "    Python: 3.11.10\nThis process on node 127.0.0.1 was started with:\n    Ray: 2.44.1\n"
                        "    Python: 3.11.10\n")
    assert any(f.id == "ray-cluster-version-mismatch" and f.owner == "ray" and "ray" in f.deps for f in refused)
    patch = claims_of("2025-05-26 18:00:25,881 WARNING utils.py:1591 -- Python patch version mismatch: The cluster "
                      "was started with:\n    Ray: 2.41.0\n    Python: 3.12.8\n")
    assert not any(f.id == "ray-cluster-version-mismatch" for f in patch)


def test_a_level_another_logger_printed_before_vllms_prefix_leaves_the_exception_to_the_catch_all() -> None:
    line = ("ERROR:    (Worker_TP1 pid=3534) ERROR 10-11 22:28:17 [multiproc_executor.py:694] RuntimeError: Could not "
            "find nvcc\n")
    assert any(f.id == "engine-crashed" for f in claims_of(line))


def test_a_triton_kernel_over_the_gpus_shared_memory_names_the_gpu() -> None:
    line = ("triton.runtime.autotuner.OutOfResources: out of resource: shared memory, Required: 65538, Hardware "
            "limit: 65536. Reducing block sizes or `num_stages` may help.\n")
    found = [f for f in claims_of(line) if f.id.startswith("kernel-out-of-resources")]
    assert found and "gpu" in found[0].inputs and "upgrade" in found[0].advice and "65538 > 65536" in found[0].title
    assert not any(f.id.startswith("kernel-out-of-resources")
                   for f in claims_of("RuntimeError: CUDA out of memory. Tried to allocate 2.00 GiB\n"))
