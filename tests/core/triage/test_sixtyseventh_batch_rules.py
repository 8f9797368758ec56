"""Rules from the sixty-seventh batch's misses, general: a Hugging Face processor class without an attribute vLLM
reads is the installed transformers' (as a tokenizer class is); a package's own import check refusing another
package's version names that package and version, and stands as a warning when vLLM logged it and went on; a prompt's
placeholders and the encoder's tokens disagreeing in number name the processor's side (transformers) beside the
request; a kernel's check that the tensors it was handed agree in shape is sure where, not why (medium)."""

from __future__ import annotations

from tests.core.triage.reports import claims_of


def test_a_processor_class_without_an_attribute_is_the_installed_transformers() -> None:
    (found,) = [f for f in claims_of("AttributeError: 'AcmeVLProcessor' object has no attribute 'image_token'\n")
                if f.id.startswith("library-class:")]
    assert found.owner == "transformers" and found.part == "multimodal" and "transformers" in found.deps
    # a class that is no processor's name: not read as one
    assert not [f for f in claims_of("AttributeError: 'AcmeWidget' object has no attribute 'image_token'\n")
                if f.id.startswith("library-class:transformers")]


def test_a_package_refusing_another_packages_version_names_it() -> None:
    logged = ("WARNING 08-29 06:50:54 [import_utils.py:408] ImportError: Numba needs NumPy 2.4 or less. "
              "Got NumPy 2.5.\n")
    (found,) = [f for f in claims_of(logged) if f.id.startswith("package-version:")]
    assert found.severity == "warning" and found.deps == ["numpy"] and "2.4 or less" in found.title
    raised = "ImportError: Numba needs NumPy 1.22 or greater. Got NumPy 1.21.\n"
    (fatal,) = [f for f in claims_of(raised) if f.id.startswith("package-version:")]
    assert fatal.severity == "critical"
    # a module that is simply missing is not a version refusal
    assert not [f for f in claims_of("ImportError: No module named 'numba'\n") if f.id.startswith("package-version:")]


def test_placeholders_against_the_encoders_tokens_name_the_processor_too() -> None:
    line = "ValueError: Attempted to assign 1 x 576 = 576 multimodal tokens to 577 placeholders\n"
    (found,) = [f for f in claims_of(line, version="0.10.1") if f.site is not None]
    assert "request" in found.inputs and "transformers" in found.deps


def test_a_kernels_check_that_its_tensors_agree_in_shape_is_sure_where_not_why() -> None:
    line = "RuntimeError: query, key and positions must have the same number of tokens\n"
    (found,) = [f for f in claims_of(line, version="0.8.5") if f.site is not None]
    assert found.site is not None and found.site.file.startswith("csrc/") and found.confidence == "medium"


def test_after_review_the_readings_hold_their_bounds() -> None:
    # a logits processor (a program's own) is no Hugging Face processor
    assert not [f for f in claims_of("AttributeError: 'MyLogitsProcessor' object has no attribute 'apply'\n")
                if f.id.startswith("library-class:")]
    # `X requires …` where X is no package: no version refusal
    assert not [f for f in claims_of("ImportError: Quantization requires torch 2.6 or newer\n")
                if f.id.startswith("package-version:")]
    # a prompt's placeholder count against the images given is the request's, not the processor's version
    line = "ValueError: Attempted to assign 1 x 576 = 576 multimodal tokens to 577 placeholders\n"
    assert [f for f in claims_of(line, version="0.10.1") if "transformers" in f.deps]
    # a model's own layer class keeps Hugging Face's name: no bare reading of it as vLLM's
    assert not [f for f in claims_of("AttributeError: 'LlamaAttention' object has no attribute 'rotary_emb'\n")
                if f.id.startswith("missing-attribute:")]
