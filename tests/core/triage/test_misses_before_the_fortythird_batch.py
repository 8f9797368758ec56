"""Rules written from earlier batches' misses while the forty-third batch was collected (issue 35), general: a
label a paste put before vLLM's sentence does not hide it; a package's words asking for another version of a package
than it found name that package; a bind refused in a thread Python names is that thread's component's; a URL the
HTTP client refused that is only `host:port` is a proxy set without its scheme."""

from __future__ import annotations

from tests.core.triage.reports import claims_of as _claims
from tests.core.triage.reports import report_of as _report

_PROMPT = ("The decoder prompt (length 163270) is longer than the maximum model length of 128000. Make sure that "
           "`max_model_len` is no smaller than the number of text tokens plus multimodal tokens. For image inputs, "
           "the number  of image tokens depends on the number of images, and possibly their aspect ratios as well.")


def test_a_label_before_vllms_sentence_does_not_hide_it() -> None:
    for label in ("ValueErrorr: ", "launch error: ", "# Error: "):
        f = next(c for c in _claims(label + _PROMPT + "\n", "0.10.2") if c.site is not None)
        assert f.site is not None and "--max-model-len" in f.knobs, label  # the prompt-length check of vLLM's
    # words that are no sentence of vLLM's stay unplaced, label or not
    assert not any(c.site is not None for c in _claims("Error: the frobnicator refused to start today\n"))


def test_a_packages_words_asking_for_another_version_name_it() -> None:
    text = ("Skipping import of cpp extensions due to incompatible torch version. Please upgrade to torch >= 2.11.0 "
            "(found 2.10.0+cu128).\n")
    r = _report(text)
    f = next(c for c in r.findings if c.id == "version-asked:torch")
    assert f.severity == "warning" and f.deps == ["torch"] and r.verdict == "degraded"
    refused = next(c for c in _claims("ImportError: acme requires transformers>=4.56.0 but found 4.51.3\n")
                   if c.id.startswith("version-asked:"))
    assert refused.severity == "critical" and refused.deps == ["transformers"]


def test_a_bind_refused_in_a_thread_python_names_is_that_components() -> None:
    text = ("zmq.error.ZMQError: Address already in use (addr='tcp://127.0.0.1:40009')\n"
            "Exception in thread nixl_handshake_listener\n")
    f = next(c for c in _claims(text, "0.11.2") if c.id.startswith("bind-address:"))
    assert f.knobs == ["VLLM_NIXL_SIDE_CHANNEL_PORT"]
    # a thread named for nothing vLLM configures: no variable claimed
    other = text.replace("nixl_handshake_listener", "Thread-7")
    assert not any(c.id.startswith("bind-address:") for c in _claims(other, "0.11.2"))


_PROXY = (
    "ERROR 04-21 18:26:31 [serving_chat.py:200] Error in preprocessing prompt inputs\n"
    "ERROR 04-21 18:26:31 [serving_chat.py:200] Traceback (most recent call last):\n"
    'ERROR 04-21 18:26:31 [serving_chat.py:200]   File "/opt/venv/lib/python3.10/site-packages/vllm/entrypoints/'
    'openai/serving_chat.py", line 183, in create_chat_completion\n'
    "ERROR 04-21 18:26:31 [serving_chat.py:200] raise InvalidURL(url)\n"
    "ERROR 04-21 18:26:31 [serving_chat.py:200] aiohttp.client_exceptions.InvalidURL: {url}\n")


def test_a_url_that_is_only_host_and_port_is_a_proxy_without_its_scheme() -> None:
    f = next(c for c in _claims(_PROXY.format(url="127.0.0.1:33080"), "0.8.4") if c.id == "proxy-without-scheme")
    assert "HTTP_PROXY" in f.knobs and "https_proxy" in f.inputs
    # a URL with its scheme that the client refused is something else
    assert not any(c.id == "proxy-without-scheme"
                   for c in _claims(_PROXY.format(url="http://images.example/x y.png"), "0.8.4"))
