"""The message atlas (bot/core/atlas.py) on real log lines: each is quoted from a public thread in
tests/fixtures/kb/ or from the real vLLM 0.32.0 log in tests/fixtures/. The expected file, function and
release range are vLLM's own source (`knowledge/atlas/SOURCES.md` lists the releases read)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from bot.core.atlas import Atlas, load_atlas
from bot.core.atlas_words import split_line
from tests.support.core_views import metric_names
from tests.support.metrics_templates import metrics_templates

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"


@pytest.fixture(scope="module")
def atlas() -> Atlas:
    return load_atlas()


def test_releases_cover_what_the_atlas_promises(atlas: Atlas) -> None:
    assert {"0.6.6.post1", "0.10.2", "0.18.0", "0.18.1", "0.32.0"} <= set(atlas.releases)
    assert list(atlas.releases) == sorted(atlas.releases, key=lambda v: [int(x) for x in re.findall(r"\d+", v)])
    assert len(atlas.package_releases["transformers"]) >= 10
    assert len(atlas.package_releases["huggingface_hub"]) >= 5
    assert len(atlas) > 10_000


def test_model_registry_refusal_names_its_site_with_holes_and_the_users_tag(atlas: Atlas) -> None:
    line = ("(EngineCore_DP0 pid=3649085) ERROR 09-17 06:49:42 [core.py:718] ValueError: Model architectures "
            "['EagleQwen2ForCausalLM'] are not supported for now. Supported architectures: "
            "dict_keys(['ApertusForCausalLM', 'AquilaModel'])")
    m = atlas.match(line, version="0.10.2")
    assert m is not None
    assert (m.site.file, m.site.function) == ("vllm/model_executor/models/registry.py",
                                              "_ModelRegistry._raise_for_unsupported")
    assert m.site.part == "models" and m.site.kind == "raise" and m.site.exc == "ValueError"
    assert m.exact and m.holes["architectures"] == "['EagleQwen2ForCausalLM']"
    assert m.in_release is True and m.release == "0.10.2"
    assert m.url == f"https://github.com/vllm-project/vllm/blob/v0.10.2/vllm/model_executor/models/registry.py#L{m.line}"


def test_a_pydantic_wrapped_speculative_config_error_gets_its_json_key(atlas: Atlas) -> None:
    line = ("  Value error, num_speculative_tokens must be provided with speculative model unless the draft model "
            "config contains an n_predict parameter. [type=value_error, input_value=ArgsKwargs((), {'model': "
            "'/models/draft'}), input_type=ArgsKwargs]")
    m = atlas.match(line, version="0.11.2")
    assert m is not None
    assert m.site.file == "vllm/config/speculative.py" and m.site.part == "spec-config"
    assert m.exact and m.in_release is True
    knobs = {(k.flag, k.key): k for k in m.knobs}
    assert ("--speculative-config", "num_speculative_tokens") in knobs
    assert knobs[("--speculative-config", "num_speculative_tokens")].field == "SpeculativeConfig.num_speculative_tokens"
    assert m.condition_text is not None and "self." not in m.condition_text


def test_the_scheduler_budget_warning_gets_the_flag_of_its_release(atlas: Atlas) -> None:
    line = ("(EngineCore_DP7 pid=157911) WARNING 08-05 01:46:17 [vllm.py:1597] max_num_scheduled_tokens is set to 60 "
            "based on the speculative decoding settings. This may lead to suboptimal performance. Consider increasing "
            "max_num_batched_tokens to accommodate the additional draft token slots, or decrease "
            "num_speculative_tokens.")
    m = atlas.match(line, version="0.30.0")
    assert m is not None
    assert m.site.file == "vllm/config/vllm.py" and m.site.level is not None and m.site.level.startswith("warning")
    assert m.exact and m.holes == {"self.scheduler_config.max_num_scheduled_tokens": "60"}
    assert any(k.flag == "--max-num-scheduled-tokens" and k.field == "SchedulerConfig.max_num_scheduled_tokens"
               for k in m.knobs)
    assert all(k.help for k in m.knobs)


def test_a_line_cut_short_still_matches_but_not_exactly(atlas: Atlas) -> None:
    line = ("(EngineCore_DP0 pid=387) WARNING 03-08 16:44:29 [compilation.py:1233] Capping cudagraph capture sizes "
            "from max 512 to 352 to fit Mamba cache blocks (361 blocks available). This limits the maximum batch size "
            "that can use CUDA graph")
    m = atlas.match(line)
    assert m is not None and not m.exact
    assert m.site.file == "vllm/config/compilation.py" and m.site.part == "compilation"
    assert any(k.field == "CompilationConfig.max_cudagraph_capture_size" for k in m.knobs)


def test_a_message_built_in_a_variable_is_found(atlas: Atlas) -> None:
    line = ("[WARNING 01-23 20:32:46 [compilation.py:1148] CUDAGraphMode.FULL_AND_PIECEWISE is not supported with "
            "spec-decode for attention backend FlashInferBackend (support: "
            "AttentionCGSupport.UNIFORM_SINGLE_TOKEN_DECODE); setting cudagraph_mode=PIECEWISE")
    m = atlas.match(line)
    assert m is not None
    assert m.site.file == "vllm/config/compilation.py" and m.site.part == "compilation"
    assert m.holes.get("min_cg_attn_backend") == "FlashInferBackend"


def test_the_same_message_in_a_new_file_is_not_gone(atlas: Atlas) -> None:
    line = ("(EngineCore_DP0 pid=26283) WARNING 11-06 10:51:48 [kv_cache_utils.py:979] Add 1 padding layers, "
            "may waste at most 5.00% KV cache memory")
    old = atlas.match(line, version="0.30.0")
    new = atlas.match(split_line(line).message, version="0.33.0")  # without the prefix that names the old file
    assert old is not None and new is not None
    assert old.site.file == "vllm/v1/core/kv_cache_utils.py" and old.site.part == "kv-cache"
    assert new.site.file == "vllm/v1/core/kv_cache_planning.py"
    assert old.gone_after is None and old.fixed_in is None  # vLLM still prints it, from elsewhere


def test_a_message_a_later_release_no_longer_prints_points_at_the_upgrade(atlas: Atlas) -> None:
    m = atlas.match("ValueError: num_speculative_tokens was provided without speculative_model.",
                    version="0.6.6.post1")
    assert m is not None
    assert m.site.file == "vllm/config.py" and m.site.function == "SpeculativeConfig.maybe_create_spec_config"
    assert m.in_release is True and m.release == "0.6.6.post1"
    assert m.gone_after is not None and m.fixed_in is not None
    rel = atlas.releases
    assert rel.index(m.fixed_in) == rel.index(m.gone_after) + 1
    assert m.compare_url == f"https://github.com/vllm-project/vllm/compare/v0.6.6.post1...v{m.fixed_in}"
    later = atlas.match("ValueError: num_speculative_tokens was provided without speculative_model.",
                        version="0.32.0")
    assert later is not None and later.in_release is False and later.compare_url is None
    assert later.release == m.gone_after  # the nearest release that has it is linked


def test_source_file_and_line_pin_the_site(atlas: Atlas) -> None:
    free = atlas.match("Model architectures ['X'] are not supported for now. Supported architectures: []",
                       version="0.32.0")
    assert free is not None
    pinned = atlas.match("Model architectures ['X'] are not supported for now. Supported architectures: []",
                         version="0.32.0", source_file="registry.py", source_line=free.line)
    assert pinned is not None and pinned.site == free.site and pinned.line == free.line


def test_an_unread_release_between_two_that_agree(atlas: Atlas) -> None:
    m = atlas.match("ValueError: Model architectures ['X'] are not supported for now. Supported architectures: []",
                    version="0.14.0+cu129")  # 0.14.0 is not read; 0.13.0 and 0.14.1 are
    assert m is not None and m.in_release is True and m.release == "0.13.0"


def test_a_v0_release_gets_its_own_separate_speculative_flag(atlas: Atlas) -> None:
    m = atlas.match("ValueError: speculative_draft_tensor_parallel_size=2 cannot be other value than 1 or target "
                    "model tensor_parallel_size", version="0.6.6.post1")
    assert m is not None and m.site.file == "vllm/config.py" and m.in_release is True
    assert m.holes == {"speculative_draft_tensor_parallel_size": "2"}
    flags = {k.flag for k in m.knobs}
    assert "--speculative-draft-tensor-parallel-size" in flags and "--speculative-config" not in flags


def test_a_backend_condition_resolves_its_knob_through_the_cli_name(atlas: Atlas) -> None:
    # `self.kv_cache_dtype` in an attention backend is the value of --kv-cache-dtype (CacheConfig.cache_dtype)
    knobs = atlas.knobs_for(["self.kv_cache_dtype"], "0.32.0")
    assert [(k.flag, k.key, k.field) for k in knobs] == [("--kv-cache-dtype", None, "CacheConfig.cache_dtype")]
    assert atlas.knobs_for(["self.no_such_field_anywhere"], "0.32.0") == ()


@pytest.mark.parametrize("line", [
    "ValueError: %s",
    "(APIServer pid=1) INFO 05-06 06:11:23 [api_server.py:1] 42",
    "(Worker_TP0 pid=77) WARNING 05-09 11:38:40 [custom_all_reduce.py:1] P2P is disabled between connected GPUs 1 "
    "and 0. You can repress this message with NCCL_IGNORE_DISABLED_P2P=1.",
    "/usr/bin/ld: cannot find -lcuda: No such file or directory",
    "AttributeError: 'MLPSpeculatorConfig' object has no attribute 'num_attention_heads'",
    "TypeError: '>' not supported between instances of 'NoneType' and 'int'",
    "The quick brown fox jumps over the lazy dog while the GPU sleeps",
])
def test_lines_that_are_not_vllm_messages_do_not_match(atlas: Atlas, line: str) -> None:
    assert atlas.match(line, version="0.32.0") is None


def test_transformers_and_hub_messages_link_to_their_own_repositories(atlas: Atlas) -> None:
    m = atlas.match("OSError: /models/x does not appear to have a file named config.json. Checkout "
                    "'https://huggingface.co//models/x/tree/main' for available files.")
    assert m is not None and m.site.package == "transformers" and m.site.part == "transformers"
    assert m.url.startswith(f"https://github.com/huggingface/transformers/blob/v{m.release}/src/transformers/")
    assert m.knobs == ()


def test_frame_names_the_part_that_raised(atlas: Atlas) -> None:
    site = atlas.frame("/home/u/.venv/lib/python3.10/site-packages/vllm/v1/worker/gpu_model_runner.py",
                       "_gather_mm_embeddings", version="0.11.2")
    assert site is not None
    assert site.file == "vllm/v1/worker/gpu_model_runner.py" and site.part == "worker"
    assert site.function.endswith("._gather_mm_embeddings")
    assert atlas.frame("/usr/lib/python3/json/decoder.py", "decode") is None


@pytest.mark.parametrize(("path", "part"), [
    ("vllm/v1/spec_decode/eagle.py", "drafter"),
    ("vllm/v1/worker/gpu/spec_decode/utils.py", "drafter"),
    ("vllm/model_executor/models/llama_eagle3.py", "drafter"),
    ("vllm/model_executor/models/deepseek_mtp.py", "drafter"),
    ("vllm/config/speculative.py", "spec-config"),
    ("vllm/config/parallel.py", "parallel"),
    ("vllm/distributed/parallel_state.py", "parallel"),
    ("vllm/v1/attention/backends/flex_attention.py", "attention"),
    ("vllm/compilation/backends.py", "compilation"),
    ("vllm/v1/worker/gpu/cudagraph_utils.py", "compilation"),
    ("vllm/v1/structured_output/backend_xgrammar.py", "structured-output"),
    ("vllm/model_executor/model_loader/default_loader.py", "model-loading"),
    ("vllm/model_executor/models/llama.py", "models"),
    ("vllm/model_executor/layers/quantization/fp8.py", "quantization"),
    ("vllm/v1/core/kv_cache_utils.py", "kv-cache"),
    ("vllm/v1/core/sched/scheduler.py", "scheduler"),
    ("vllm/entrypoints/openai/api_server.py", "entrypoint"),
    ("vllm/v1/engine/core.py", "engine"),
    ("vllm/v1/worker/gpu_model_runner.py", "worker"),
    ("vllm/platforms/cuda.py", "platform"),
    ("/x/site-packages/huggingface_hub/file_download.py", "hub"),
    ("src/transformers/configuration_utils.py", "transformers"),
])
def test_part_of(atlas: Atlas, path: str, part: str) -> None:
    assert atlas.part_of(path) == part


def test_metric_names_per_release(atlas: Atlas) -> None:
    names = metric_names(atlas, "0.32.0")
    assert names["vllm:num_requests_running"] == ("model_name", "engine")
    assert any(n.startswith("vllm:spec_decode_") for n in names)
    assert "vllm:gpu_cache_usage_perc" in metric_names(atlas, "0.6.6.post1")
    assert metric_names(atlas) == metric_names(atlas, atlas.releases[-1])


def test_metrics_templates_render_the_real_spec_decoding_line() -> None:
    line = ("SpecDecoding metrics: Mean acceptance length: 3.61, Accepted throughput: 12.96 tokens/s, Drafted "
            "throughput: 13.17 tokens/s, Accepted: 60 tokens, Drafted: 61 tokens, Per-position acceptance rate: "
            "1.000, 0.984, 0.623, Avg Draft acceptance rate: 98.4%")
    templates = metrics_templates()
    assert {t.kind for t in templates} == {"v1-spec", "v0-spec", "engine"}
    (spec,) = [t for t in templates if t.kind == "v1-spec" and "0.32.0" in t.releases]
    assert spec.template % (3.61, 12.96, 13.17, 60, 61, "1.000, 0.984, 0.623", 98.4) == line
    assert len(spec.args) == spec.template.count("%") - 2 * spec.template.count("%%")
    (engine,) = [t for t in templates if t.kind == "engine" and "0.32.0" in t.releases]
    assert engine.source_style == "percent-parts" and engine.prefix == "self.log_prefix"
    assert any(p.optional and p.text.startswith("Prefix cache hit rate") for p in engine.parts)


def test_split_line_reads_the_vllm_prefix() -> None:
    parsed = split_line("(APIServer pid=13026) ERROR 05-08 16:26:29 [core.py:700] ValueError: bad thing")
    assert (parsed.level, parsed.source_file, parsed.source_line, parsed.exc, parsed.message) == (
        "error", "core.py", 700, "ValueError", "bad thing")
    old = split_line("INFO 11-29 10:00:00 file.py:123] hello there")
    assert (old.level, old.source_file, old.source_line, old.message) == ("info", "file.py", 123, "hello there")


def test_a_cold_load_places_the_first_message() -> None:
    """The load's speed is bench/diagnose.py's (the whole command pays it); here only that a cold load places."""
    load_atlas.cache_clear()
    placed = load_atlas().match(
        "ValueError: Model architectures ['X'] are not supported for now. Supported architectures: []")
    assert placed is not None and placed.site.function == "_ModelRegistry._raise_for_unsupported"


# ---- messages built in a variable ---------------------------------------------------------------------------

def test_a_message_built_in_variables_matches_its_site_with_the_flag_and_the_env_var(atlas: Atlas) -> None:
    # the real vLLM 0.32.0 log (tests/fixtures/atlas/): `msg = (f"User-specified max_model_len ...")`, `warning =
    # ("VLLM_ALLOW_LONG_MAX_MODEL_LEN must be used ...")`, then `raise ValueError(f"{msg} To allow ... {warning}")`
    log = (FIXTURES / "atlas" / "vllm-0.32.0-max-model-len-over-derived.log").read_text()
    (line,) = [x for x in log.splitlines() if x.strip().startswith("Value error, User-specified max_model_len")]
    m = atlas.match(line, version="0.32.0")
    assert m is not None
    assert (m.site.file, m.site.function) == ("vllm/config/model.py", "_get_and_verify_max_len")
    assert m.exact and m.in_release is True
    assert m.holes["max_model_len"] == "100000" and m.holes["max_len_key"] == "max_position_embeddings"
    assert "To allow overriding this maximum" in m.site.template and "{msg}" not in m.site.template
    knobs = {k.field: k for k in m.knobs}
    assert knobs["ModelConfig.max_model_len"].flag == "--max-model-len"
    env = knobs["envs.VLLM_ALLOW_LONG_MAX_MODEL_LEN"]
    assert (env.flag, env.key) == ("VLLM_ALLOW_LONG_MAX_MODEL_LEN", None) and "max sequence length" in env.help
    # the raise sits under the length check: its condition is both
    assert m.condition_text == ("(max_model_len is more than derived_max_model_len and (model_max_length is None or "
                                "max_model_len is more than model_max_length)) and the environment variable "
                                "VLLM_ALLOW_LONG_MAX_MODEL_LEN is not set")


def test_a_message_the_branches_build_differently_is_a_site_per_text(atlas: Atlas) -> None:
    # vllm/v1/engine/input_processor.py: `suggestion = (...)` differs for a multimodal model, then
    # `raise VLLMValidationError(f"The {prompt_type} prompt ... {suggestion}")`
    text_only = ("The decoder prompt (length 5000) is longer than the maximum model length of 4096. Make sure that "
                 "`max_model_len` is no smaller than the number of text tokens.")
    mm = ("The decoder prompt (length 9000) is longer than the maximum model length of 8192. Make sure that "
          "`max_model_len` is no smaller than the number of text tokens plus multimodal tokens. For image inputs, "
          "the number of image tokens depends on the number of images, and possibly their aspect ratios as well.")
    a, b = atlas.match(text_only, version="0.32.0"), atlas.match(mm, version="0.32.0")
    assert a is not None and b is not None and a.exact and b.exact
    assert a.site.file == b.site.file == "vllm/v1/engine/input_processor.py" and a.line == b.line
    assert a.site.template != b.site.template and a.holes["prompt_len"] == "5000"


def test_a_message_grown_with_plus_equals_in_branches(atlas: Atlas) -> None:
    # vllm/config/compilation.py: `msg = (f"CUDAGraphMode.{...} is not supported with spec-decode ...")`, then
    # `msg += "; setting cudagraph_mode=PIECEWISE"` or `"...=NONE"` by branch (issue 55581's line)
    line = (FIXTURES / "kb" / "flashinfer-spec-decode-cudagraph-none.txt").read_text().splitlines()[1]
    m = atlas.match(line, version="0.32.0")
    assert m is not None and m.exact and m.site.file == "vllm/config/compilation.py"
    assert m.site.template.endswith("; setting cudagraph_mode=NONE")
    assert m.holes == {"cudagraph_mode.name": "FULL_AND_PIECEWISE", "min_cg_attn_backend": "FlashInferBackend",
                       "min_cg_support": "AttentionCGSupport.UNIFORM_SINGLE_TOKEN_DECODE"}


# ---- environment variables ----------------------------------------------------------------------------------

def test_env_vars_per_release(atlas: Atlas) -> None:
    new, old = atlas.env_vars("0.32.0"), atlas.env_vars("0.6.6.post1")
    assert len(new) > 250 and len(old) > 50
    assert "communication port" in new["VLLM_PORT"] and "VLLM_PORT" in old
    assert "VLLM_ATTENTION_BACKEND" in old and "VLLM_ATTENTION_BACKEND" not in new  # gone since (--attention-backend)
    assert atlas.env_vars() == atlas.env_vars(atlas.releases[-1])
    assert atlas.env_vars("0.14.0+cu129") == atlas.env_vars("0.13.0")  # not read: the newest release before it
    # Kubernetes sets VLLM_PORT=tcp://127.0.0.1:8000 for a Service named `vllm`: vLLM reads it as its own
    user_env = {"VLLM_PORT": "tcp://127.0.0.1:8000", "VLLM_SERVICE_HOST": "127.0.0.1", "HOME": "/root"}
    assert set(user_env) & set(atlas.env_vars("0.32.0")) == {"VLLM_PORT"}


def test_env_var_knobs(atlas: Atlas) -> None:
    (k,) = atlas.knobs_for(["envs.VLLM_ALLOW_LONG_MAX_MODEL_LEN"], "0.32.0")
    assert (k.flag, k.key, k.field) == ("VLLM_ALLOW_LONG_MAX_MODEL_LEN", None, "envs.VLLM_ALLOW_LONG_MAX_MODEL_LEN")
    assert k.help and k.field.startswith("envs.")
    # a name the message spells is a knob only in a release that has such a variable
    old = atlas.knobs_for(["env.VLLM_ATTENTION_BACKEND"], "0.6.6.post1")
    assert [x.flag for x in old] == ["VLLM_ATTENTION_BACKEND"]
    assert atlas.knobs_for(["env.VLLM_ATTENTION_BACKEND"], "0.32.0") == ()
    assert atlas.knobs_for(["env.VLLM_NO_SUCH_VARIABLE"], "0.32.0") == ()


def test_a_message_that_names_an_env_var_gets_it_as_a_knob(atlas: Atlas) -> None:
    line = ("(APIServer pid=1) WARNING 12-01 10:00:00 [vllm.py:1] Whisper is known to have issues with forked "
            "workers. If startup is hanging, try setting 'VLLM_WORKER_MULTIPROC_METHOD' to 'spawn'.")
    m = atlas.match(line, version="0.32.0")
    assert m is not None and m.site.file == "vllm/config/vllm.py"
    env = [k for k in m.knobs if k.field.startswith("envs.")]
    assert [k.flag for k in env] == ["VLLM_WORKER_MULTIPROC_METHOD"] and env[0].help
