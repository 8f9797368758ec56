"""Rules from the forty-eighth batch's misses, general: a refusal in words naming a setting and the one value it
takes; a flag that keeps the whole server on the V0 engine (the platform's own fallback stays a note); a plugin vLLM's
loader failed to load is the plugin's; Python's ImportError sentence quoted without its class, and a name a plugin's
own package lacks; vLLM's benchmark client quoting the server's 404."""

from __future__ import annotations

from tests.core.triage.reports import claims_of, report_of


def test_a_refusal_naming_a_setting_and_the_one_value_it_takes_names_that_setting() -> None:
    claims = claims_of("Acme-7 MTP only supports num_speculative_tokens=2.\n")
    found = [f for f in claims if f.id == "field-refused:num_speculative_tokens"]
    assert found and "--speculative-config" in found[0].knobs and found[0].advice == ["lower-k"]
    assert found[0].confidence == "low"
    # a word that is no setting of vLLM's names nothing
    assert not any(f.id.startswith("field-refused:") for f in claims_of("This tool only supports colour=blue.\n"))


def test_a_flag_that_keeps_the_server_on_v0_degrades_it_and_the_platforms_own_fallback_is_a_note() -> None:
    flag = report_of("WARNING 05-01 09:00:00 [arg_utils.py:1700] --enable-prompt-embeds is not supported by the V1 "
                     "Engine. Falling back to V0.\n")
    found = [f for f in flag.findings if f.id == "v0-fallback:--enable-prompt-embeds"]
    assert flag.verdict == "degraded" and found and found[0].inputs == ["--enable-prompt-embeds"]
    assert "upgrade" in found[0].advice
    platform = report_of("WARNING 05-01 09:00:00 [arg_utils.py:1700] device type=cpu is not supported by the V1 "
                         "Engine. Falling back to V0.\n")
    assert platform.verdict != "degraded"


def test_a_plugin_the_loader_failed_to_load_is_the_plugins() -> None:
    text = ("INFO 04-16 13:55:44 __init__.py:30] Available plugins for group vllm.platform_plugins:\n"
            "ERROR 04-16 13:55:44 __init__.py:46] Failed to load plugin acme_npu\n")
    found = [f for f in claims_of(text) if f.owner == "plugin"]
    assert found and found[0].part == "platform" and "disable-plugin" in found[0].advice
    assert "VLLM_PLUGINS" in found[0].knobs


def test_a_name_a_plugins_own_package_lacks_quoted_without_its_class_is_the_plugins() -> None:
    claims = claims_of("cannot import name 'AcmeLinear' from 'vllm_acme.ops.linear' (/opt/vllm_acme/ops/linear.py)\n")
    found = [f for f in claims if f.id.startswith("words:ImportError:")]
    assert found and found[0].owner == "plugin" and "disable-plugin" in found[0].advice


def test_the_benchmark_client_quoting_a_404_names_the_model_name_it_sends() -> None:
    claims = claims_of("ValueError: Initial test run failed - Please make sure benchmark arguments are correctly "
                       "specified. Error: Not Found\n")
    found = [f for f in claims if f.site is not None and f.site.file.startswith("vllm/benchmarks/")]
    assert found and "--served-model-name" in found[0].knobs and "--model" in found[0].knobs
    other = claims_of("ValueError: Initial test run failed - Please make sure benchmark arguments are correctly "
                      "specified. Error: Internal Server Error\n")
    assert not any("--served-model-name" in f.knobs for f in other)
    status = claims_of("ValueError: Initial test run failed - Please make sure benchmark arguments are correctly "
                       "specified. Error: HTTP 404\n")
    assert any("--served-model-name" in f.knobs for f in status)
    # a 404 that is no status (a count) is not the server's answer
    count = claims_of("ValueError: Initial test run failed - Please make sure benchmark arguments are correctly "
                      "specified. Error: prompt of 404 tokens too long\n")
    assert not any("--served-model-name" in f.knobs for f in count)


def test_an_upload_vllms_audio_loader_cannot_decode_names_the_decoders_it_tries() -> None:
    claims = claims_of('{"error": {"message": "Invalid or unsupported audio file.", "type": "BadRequestError", '
                       '"code": 400}}\n')
    found = [f for f in claims if "soundfile" in f.deps]
    assert found and "av" in found[0].deps and any("vllm[audio]" in r for r in found[0].remediation)


def test_a_line_vllm_logs_at_critical_ends_the_engine() -> None:
    report = report_of("CRITICAL 04-16 16:34:54 [core_client.py:359] Got fatal signal from worker processes, shutting "
                       "down. See stack trace above for root cause issue.\n")
    assert report.verdict == "failing"
