"""The general rules the twentieth blind batch's first sight asked for (issue 35): a request body the server
refused field by field names the field and the client; two packages of one library at different versions name the
library and the switch the message gives; an exception whose module path names a library is that library's; one
sentence in two platforms' files is placed in CUDA's when nothing says otherwise. Lines as the programs print
them, none of them a line of the evaluation cases."""

from __future__ import annotations

from bot.core.atlas import load_atlas
from bot.core.logparse import parse_text
from bot.core.report import Report, build_report
from bot.core.triage import diagnose
from bot.core.triage.context import Flags
from bot.core.triage.evidence import Readings


def report(lines: list[str], **flags: object) -> Report:
    return build_report(diagnose(Readings(parsed=parse_text("\n".join(lines)), flags=Flags(**flags))))


def test_a_request_body_refused_field_by_field_names_the_field() -> None:
    # pydantic's error list as the OpenAI-compatible server returns it in a 400
    r = report(["{'object': 'error', 'message': \"[{'type': 'extra_forbidden', 'loc': ('body', 'top_kk'), 'msg': "
                "'Extra inputs are not permitted', 'input': 5}]\", 'type': 'BadRequestError', 'code': 400}"])
    f = next(f for f in r.findings if f.id == "request-body-refused")
    assert "top_kk" in f.title and f.inputs == ["request"] and "request" in f.advice


def test_two_packages_of_one_library_at_different_versions() -> None:
    r = report(["RuntimeError: foo-kernels version (1.2.0) does not match foo version (1.3.0). Please install the same "
                "version of both packages. Set FOO_SKIP_VERSION_CHECK=1 to bypass this check."])
    f = next(f for f in r.findings if f.id == "package-versions-disagree")
    assert f.knobs == ["FOO_SKIP_VERSION_CHECK"] and "foo" in f.deps


def test_an_exception_whose_module_path_names_a_library_is_that_librarys() -> None:
    r = report(["transformers.configuration_utils.SomeConfigError:", "'rope_theta' moved into rope_parameters.",
                "vllm/transformers_utils/config.py"])
    f = next(f for f in r.findings if f.id.startswith("package-raised:"))
    assert f.owner == "transformers" and "transformers" in f.deps and "upgrade" in f.advice


def test_one_sentence_in_two_platforms_files_is_placed_in_cudas() -> None:
    a = load_atlas()
    both = {a._site(i).file for i in range(len(a)) if a._site(i).template.startswith("No valid attention backend")}
    assert {"vllm/platforms/cuda.py", "vllm/platforms/rocm.py"} <= both  # the same sentence in both files
    m = a.match("No valid attention backend found for cuda with head_size: 576, dtype: torch.bfloat16")
    assert m is not None and "rocm" not in m.site.file
