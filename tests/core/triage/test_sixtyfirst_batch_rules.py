"""Rules from the sixty-first batch's misses, general: a record logged as news (INFO) that shares words with a check is
not that check; an idle engine's stats line shows a running server; the V0 engine's prompt checks refuse the request;
the Hub's own cache layout in a folder the process cannot write; a repository without config.json; Ray's compiled
graph and the executor that does without it; a bare local name in an assertion is no config field; KB: a GGUF
architecture transformers cannot convert."""

from __future__ import annotations

from tests.core.triage.reports import claims_of, report_of

_STARTED = ("(APIServer pid=7) INFO:     Started server process [7]\n"
            "(APIServer pid=7) INFO:     Application startup complete.\n")


def test_a_request_logged_at_info_is_not_the_check_whose_words_it_shares() -> None:
    text = _STARTED + (
        "(APIServer pid=7) INFO 01-02 03:04:05 [logger.py:49] Received request cmpl-9f8e: params: SamplingParams(n=1, "
        "temperature=0.2, truncate_prompt_tokens=None, structured_outputs=None, extra_args=None), lora_request: None.\n"
        '(APIServer pid=7) INFO:     127.0.0.1:40000 - "POST /v1/completions HTTP/1.1" 200 OK\n')
    report = report_of(text)
    assert report.verdict == "healthy" and not [f for f in report.findings if f.severity == "critical"]
    # the check's own words, raised, still are the check
    raised = ("ValueError: truncate_prompt_tokens=64 would split or drop a(n) image item, which spans tokens 10 to 90 "
              "of the 120-token prompt. Multimodal placeholders expand after truncation is applied, so the limit must "
              "leave every multimodal item intact. Please raise truncate_prompt_tokens or shorten the multimodal "
              "input.\n")
    assert any("request" in f.inputs for f in claims_of(raised))


def test_an_idle_engines_stats_line_shows_it_running_and_a_stalled_one_does_not() -> None:
    idle = ("INFO 03-04 05:06:07 [loggers.py:123] Engine 000: Avg prompt throughput: 0.0 tokens/s, Avg generation "
            "throughput: 0.0 tokens/s, Running: 0 reqs, Waiting: 0 reqs, GPU KV cache usage: 0.0%, Prefix cache hit "
            "rate: 0.0%\n")
    assert report_of(idle).verdict == "healthy"
    held = idle.replace("Running: 0 reqs, Waiting: 0 reqs", "Running: 4 reqs, Waiting: 9 reqs")
    assert report_of(held).verdict != "healthy"


def test_the_v0_engines_prompt_check_refuses_the_request() -> None:
    found = [f for f in claims_of("ValueError: Token id 200001 is out of vocabulary\n", version="0.7.3")
             if f.site is not None and f.site.file == "vllm/engine/llm_engine.py"]
    assert found and "request" in found[0].inputs and "request" in found[0].advice


def test_the_hubs_cache_layout_on_a_read_only_volume_is_the_hub_cache() -> None:
    line = "OSError: [Errno 30] Read-only file system: '/models/hub/models--acme--tiny-model/.no_exist'\n"
    (found,) = [f for f in claims_of(line) if f.id.startswith("unwritable-cache:")]
    assert found.id == "unwritable-cache:HF_HUB_CACHE" and found.host == ["permissions"]
    assert "read-only" in found.remediation[0]
    # a folder of no cache vLLM knows is not claimed as one
    assert not [f for f in claims_of("OSError: [Errno 30] Read-only file system: '/data/output/run1'\n")
                if f.id.startswith("unwritable-cache:")]


def test_a_repository_without_config_json_is_not_a_transformers_model() -> None:
    line = ("huggingface_hub.errors.EntryNotFoundError: Entry Not Found for url: "
            "https://huggingface.co/acme/tiny-GGUF/resolve/main/config.json.\n")
    (found,) = [f for f in claims_of(line) if f.id == "hub-repository-without-config"]
    assert "checkpoint" in found.advice and "acme/tiny-GGUF" in found.title
    # another file missing at the default branch is that file's absence, not the layout
    other = line.replace("config.json", "tokenizer.model")
    assert not [f for f in claims_of(other) if f.id == "hub-repository-without-config"]


def test_a_crash_in_rays_compiled_graph_is_proven_with_the_executor_that_does_without_it() -> None:
    text = ("Traceback (most recent call last):\n"
            '  File "/usr/lib/python3/dist-packages/ray/experimental/channel/shared_memory_channel.py", line 410, '
            "in read\n"
            "    assert len(values) == self._num_readers\n"
            "AssertionError\n")
    def first_step(version: str | None) -> str:
        return report_of(text, version=version).plan[0]

    assert "off to prove it: `VLLM_USE_RAY_V2_EXECUTOR_BACKEND=1`" in first_step("0.24.0")
    # before the V2 executor, and on a release the log does not say: the multiprocessing executor, which every
    # release has (with the V2 executor named in its note)
    assert "off to prove it: `--distributed-executor-backend mp`" in first_step("0.15.1")
    unknown = first_step(None)
    assert "off to prove it: `--distributed-executor-backend mp`" in unknown and "0.20.0–0.32.0" in unknown


def test_a_bare_local_an_assertion_compares_is_no_config_field() -> None:
    text = ("Traceback (most recent call last):\n"
            '  File "/opt/venv/lib/python3.12/site-packages/somelib/blocks.py", line 88, in check\n'
            "    assert placed_blocks == set(range(len(blocks)))\n"
            "AssertionError\n")
    said = " ".join(f.summary for f in claims_of(text))
    assert "config.json" not in said and "`range`" not in said and "`placed_blocks`" in said


def test_a_gguf_architecture_transformers_cannot_convert_takes_the_base_models_config() -> None:
    (found,) = [f for f in claims_of("ValueError: GGUF model with architecture olmo2 is not supported yet.\n")
                if f.id == "gguf-architecture-transformers-cannot-read"]
    assert {"--hf-config-path", "--tokenizer"} <= set(found.knobs)


def test_a_traceback_cut_at_a_frame_header_is_placed_by_the_line_of_the_functions_only_raise() -> None:
    # (vLLM 0.10.2's ModelConfig._verify_tokenizer_mode has one raise; its sentence stands at line 921)
    head = ("Traceback (most recent call last):\n"
            '  File "/opt/venv/lib/python3.12/site-packages/vllm/config/__init__.py", line 919, in '
            "_verify_tokenizer_mode\n")
    found = [f for f in claims_of(head, version="0.10.2") if f.site is not None]
    assert found and found[0].site.function == "ModelConfig._verify_tokenizer_mode"
    assert "only raise" in found[0].title and found[0].confidence == "low"  # the frame may be a call that raised
    # a line far from it is another statement; an unknown release places nothing by line
    far = head.replace("line 919", "line 910")
    assert not [f for f in claims_of(far, version="0.10.2") if f.site is not None and "tokenizer mode" in f.title]
    assert not [f for f in claims_of(head) if f.site is not None and "tokenizer mode" in f.title]


def test_a_file_named_for_what_every_part_has_names_no_components_variables() -> None:
    line = ("Traceback (most recent call last):\n"
            '  File "/opt/venv/lib/python3.12/site-packages/vllm/config.py", line 700, in get_multimodal_config\n'
            '    raise ValueError("The model is not multimodal.")\n'
            "ValueError: The model is not multimodal.\n")
    found = claims_of(line, version="0.9.2")
    assert found and not [r for f in found for r in f.remediation if "VLLM_CONFIG_ROOT" in r]
