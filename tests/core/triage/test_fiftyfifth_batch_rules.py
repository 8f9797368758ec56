"""Rules from the fifty-fifth batch's misses, general: a chat template's own refusal (`raise_exception`) is the
request's messages; a template joining a list of content parts to a string is the content format; an attention
kernel's shape check raised through a compiled operator is the attention backend's; a CUDA error NCCL printed in one
of its transports is NCCL's, with the transport's switch; a capture invalidated by an earlier error is CUDA graphs'."""

from __future__ import annotations

from tests.core.triage.reports import claims_of

_TEMPLATE_TB = """Traceback (most recent call last):
  File "/opt/venv/lib/python3.12/site-packages/jinja2/environment.py", line 1295, in render
    self.environment.handle_exception()
  File "<template>", line 2, in top-level template code
  File "/opt/venv/lib/python3.12/site-packages/transformers/utils/chat_template_utils.py", line 400, in raise_exception
    raise jinja2.exceptions.TemplateError(message)
jinja2.exceptions.TemplateError: System role not supported
"""


def test_a_templates_own_refusal_is_the_requests_messages() -> None:
    found = [f for f in claims_of(_TEMPLATE_TB) if f.id == "chat-template-refused"]
    assert found and found[0].confidence == "medium" and found[0].inputs == ["request"]
    assert "request" in found[0].advice and "--chat-template" in found[0].knobs
    # the frame's site (transformers' helper) no longer claims the template's words
    assert not [f for f in claims_of(_TEMPLATE_TB) if f.id.startswith("atlas-frame:")]
    # the bare line is the class the refusal raises: a low claim
    bare = [f for f in claims_of("jinja2.exceptions.TemplateError: System role not supported\n")
            if f.id == "chat-template-refused"]
    assert bare and bare[0].confidence == "low"
    # a template's syntax error is its own defect, and a TemplateError raised elsewhere is not a template's refusal
    assert not [f for f in claims_of("jinja2.exceptions.TemplateSyntaxError: unexpected end of template\n")
                if f.id == "chat-template-refused"]
    elsewhere = ('Traceback (most recent call last):\n  File "/srv/app/render.py", line 9, in page\n'
                 '    raise TemplateError("no such page")\njinja2.exceptions.TemplateError: no such page\n')
    assert not [f for f in claims_of(elsewhere) if f.id == "chat-template-refused"]


def test_a_list_joined_to_a_string_in_a_template_is_the_content_format() -> None:
    framed = ('Traceback (most recent call last):\n'
              '  File "/opt/venv/lib/python3.12/site-packages/vllm/entrypoints/chat_utils.py", line 1500, in '
              'apply_hf_chat_template\n    return tokenizer.apply_chat_template(\n'
              '  File "<template>", line 5, in top-level template code\n'
              'TypeError: can only concatenate str (not "list") to str\n')
    found = [f for f in claims_of(framed) if f.id == "chat-content-format"]
    assert found and found[0].confidence == "medium" and found[0].knobs[0] == "--chat-template-content-format"
    bare = [f for f in claims_of('TypeError: can only concatenate str (not "list") to str\n')
            if f.id == "chat-content-format"]
    assert bare and bare[0].confidence == "low"
    # the same words from a program's own code, no template in its frames
    script = ('Traceback (most recent call last):\n  File "/home/u/run.py", line 12, in <module>\n'
              '    out = prefix + parts\nTypeError: can only concatenate str (not "list") to str\n')
    assert not [f for f in claims_of(script) if f.id == "chat-content-format"]


def test_an_attention_kernels_shape_check_is_the_attention_backends() -> None:
    line = ("RuntimeError: Expect (32 <= headDim <= 2048) && (numTokensPerPage <= 128), got headDimQk=256, "
            "numTokensPerPage=544\n")
    tb = ('Traceback (most recent call last):\n'
          '  File "/opt/venv/lib/python3.12/site-packages/torch/_ops.py", line 1243, in __call__\n'
          '    return self._op(*args, **kwargs)\n' + line)
    for text in (line, tb):
        found = [f for f in claims_of(text, version="0.13.0") if f.id == "attention-kernel-shape"]
        assert found and found[0].part == "attention" and found[0].knobs == ["--attention-backend"]
    # the switch of the user's release: before the flag, the variable
    old = [f for f in claims_of(line, version="0.10.1") if f.id == "attention-kernel-shape"]
    assert old and old[0].knobs == ["VLLM_ATTENTION_BACKEND"]
    # shape words raised by a program's Python code, and vLLM's own check (its site), are not a kernel's check
    own = ('Traceback (most recent call last):\n  File "/home/u/model.py", line 40, in forward\n'
           '    raise RuntimeError("expected head_dim 128")\nRuntimeError: expected head_dim 128\n')
    assert not [f for f in claims_of(own) if f.id == "attention-kernel-shape"]
    vllm_own = ("ValueError: Head size 72 is not supported by FlashAttention. Supported head sizes are: "
                "[32, 64, 96, 128, 160, 192, 224, 256].\n")
    assert not [f for f in claims_of(vllm_own) if f.id == "attention-kernel-shape"]


def test_a_cuda_error_nccl_printed_in_a_transport_is_ncclS() -> None:
    found = claims_of("transport/p2p.cc:298 NCCL WARN Cuda failure 'invalid argument'\n")
    assert found and found[0].owner == "nccl" and found[0].part == "parallel"
    assert found[0].knobs[0] == "NCCL_P2P_DISABLE=1"
    # the same CUDA error outside NCCL is the CUDA runtime's, with no transport
    alone = claims_of("RuntimeError: CUDA error: invalid argument\n")
    assert alone and alone[0].owner != "nccl" and "NCCL_P2P_DISABLE=1" not in alone[0].knobs


def test_a_capture_invalidated_by_an_earlier_error_is_cuda_graphs() -> None:
    found = claims_of("CUDA error: operation failed due to a previous error during capture\n")
    assert found and found[0].id == "below:cuda:cudaErrorStreamCaptureInvalidated"
    assert found[0].part == "compilation" and "--enforce-eager" in " ".join(found[0].remediation)
