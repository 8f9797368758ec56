"""Rules from the sixty-fourth batch's misses, general: an error quoting one of vLLM's settings at its value in a
refusal's words; a request that reached the server without a body; the bare backbone class named where vLLM serves the
model with its head; a part the log announced as experimental, then a crash; a client sending `Bearer None`; the
structured-output library by its package name."""

from __future__ import annotations

from bot.core.owners import of_path
from tests.core.triage.reports import claims_of


def test_an_error_quoting_a_setting_at_its_value_is_that_setting() -> None:
    line = "ValueError: AcmeConnector cannot run with kv_cache_dtype='fp8_e5m2' (only 'auto' is taken)\n"
    (found,) = [f for f in claims_of(line, version="0.20.1") if f.id == "field-refused:kv_cache_dtype"]
    assert found.knobs == ["--kv-cache-dtype"] and "--kv-cache-dtype" in found.inputs
    # the value the message asks for is the one to set, not the one refused
    (asked,) = [f for f in claims_of("ValueError: AcmeConnector requires kv_cache_dtype='auto'\n", version="0.20.1")
                if f.id == "field-refused:kv_cache_dtype"]
    assert "takes only" in asked.title and "'auto'" not in asked.title.split("only", 1)[0]
    # no refusal's words, the value asked for, or no setting of vLLM's: nothing
    for other in ("ValueError: AcmeConnector saw kv_cache_dtype='fp8_e5m2' while starting\n",
                  "ValueError: AcmeConnector failed: please use kv_cache_dtype='auto' instead\n",
                  "ValueError: AcmeConnector cannot run with acme_cache_mode='fast'\n"):
        assert not [f for f in claims_of(other, version="0.20.1") if f.id.startswith("field-refused:")], other


def test_a_request_without_a_body_is_the_clients() -> None:
    line = ("{\"error\":{\"message\":\"1 validation error:\\n  {'type': 'missing', 'loc': ('body',), 'msg': 'Field "
            "required', 'input': None}\",\"type\":\"Bad Request\",\"code\":400}}\n")
    (found,) = [f for f in claims_of(line) if f.id == "request-body-refused"]
    assert {"request", "fix-script"} <= set(found.advice) and "without a body" in found.title
    # a field of the body missing keeps its own reading
    field = line.replace("('body',)", "('body', 'model')")
    (one,) = [f for f in claims_of(field) if f.id == "request-body-refused"]
    assert "`model`" in one.title


def test_the_backbone_class_named_where_vllm_serves_the_model_with_its_head() -> None:
    line = ("ValueError: Qwen2AudioModel has no vLLM implementation and the Transformers implementation is not "
            "compatible with vLLM.\n")
    (found,) = [f for f in claims_of(line, version="0.20.1") if f.id.startswith("architecture-backbone:")]
    assert "Qwen2AudioForConditionalGeneration" in found.title and "checkpoint" in found.advice
    # vLLM's own refusal of the name: the backbone's reading alone, not also "an out-of-tree model"
    refused = "ValueError: Model architectures ['Qwen2AudioModel'] are not supported for now.\n"
    ids = [f.id.split(":")[0] for f in claims_of(refused, version="0.20.1")]
    assert "architecture-backbone" in ids and "architecture-out-of-tree" not in ids
    # a class no head of which vLLM registers, or a registered one: nothing of the kind
    for other in ("FooBarModel", "BertModel"):
        text = line.replace("Qwen2AudioModel", other)
        assert not [f for f in claims_of(text, version="0.20.1") if f.id.startswith("architecture-backbone:")]


def _crash(path: str) -> str:
    return ("Traceback (most recent call last):\n"
            f'  File "{path}", line 30, in schedule\n'
            "    req = waiting[idx]\n"
            "IndexError: list index out of range\n")


def test_a_part_announced_experimental_then_a_crash_is_turned_off_first() -> None:
    said = "INFO 01-01 00:00:00 [config.py:10] Chunked prefill is experimental for this model.\n"
    # a file named alone that a vLLM release has (the paste dropped its path)
    (found,) = [f for f in claims_of(said + _crash("scheduler.py"), version="0.20.1") if f.id.startswith("frame:")]
    assert found.switch is not None and "chunked prefill" in found.switch.lower()
    (plain,) = [f for f in claims_of(_crash("scheduler.py"), version="0.20.1") if f.id.startswith("frame:")]
    assert plain.switch is None or "chunked prefill" not in plain.switch.lower()
    # the user's own program crashing is not explained by a part vLLM announced
    (mine,) = [f for f in claims_of(said + _crash("/home/u/app/worker.py"), version="0.20.1")
               if f.id.startswith("frame:")]
    assert mine.switch is None or "chunked prefill" not in mine.switch.lower()


def test_a_client_sending_bearer_none_has_no_key() -> None:
    (found,) = [f for f in claims_of("headers={'Authorization': 'Bearer None'} -> 401 Unauthorized error\n")
                if f.id == "client-key-none"]
    assert "OPENAI_API_KEY" in found.knobs
    assert not [f for f in claims_of("headers={'Authorization': 'Bearer sk-abc'} -> 401 Unauthorized error\n")
                if f.id == "client-key-none"]
    # the header printed while requests are answered: no refusal, nothing said
    assert not [f for f in claims_of("ERROR debug headers={'Authorization': 'Bearer None'} sent\n")
                if f.id == "client-key-none"]
    # 401 counted as something else (requests, tokens) is no refusal; an access log's status is
    assert not [f for f in claims_of("ERROR debug headers={'Authorization': 'Bearer None'} sent, 401 requests done\n")
                if f.id == "client-key-none"]
    # the Hugging Face Hub refusing a download is the hub's token, not a key to this server
    assert not [f for f in claims_of("ERROR headers={'Authorization': 'Bearer None'}\n"
                                     "huggingface_hub.errors.HfHubHTTPError: 401 Client Error: Unauthorized for url: "
                                     "https://huggingface.co/api/models/acme/m\n")
                if f.id == "client-key-none"]
    assert [f for f in claims_of("ERROR headers={'Authorization': 'Bearer None'}\n"
                                 'INFO:     127.0.0.1:5000 - "POST /v1/completions HTTP/1.1" 401\n')
            if f.id == "client-key-none"]


def test_the_structured_output_library_is_named_as_pip_names_it() -> None:
    owner = of_path("/usr/lib/python3/dist-packages/lmformatenforcer/integrations/transformers.py")
    assert owner is not None and owner.name == "lm-format-enforcer"
