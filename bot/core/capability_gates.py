"""vLLM's own compute-capability checks, evaluated before launch. The atlas keeps, for each release, every `raise`
with the condition it sits under (`current_platform.is_cuda() and self.kv_cache_dtype.startswith('fp8') and not
current_platform.has_device_capability(89)`); a condition made only of what is known before launch — the GPU's
compute capability, the model's dtype, `--kv-cache-dtype`, that the platform is CUDA — is evaluated here, and one
that holds is the error that release would raise at start. A condition naming anything else is not evaluated
(never guessed). Pure.

Which files apply: the CUDA platform's, and the attention backend's the profile selects (`--attention-backend`);
with none selected vLLM chooses at start, so no backend's checks are evaluated.
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass

from bot.core.atlas import Atlas, Site

_TORCH_DTYPES = {"bfloat16": "bfloat16", "float16": "float16", "half": "float16", "float32": "float32",
                 "float": "float32"}
_CAPABILITY_CALLS = frozenset({"has_device_capability", "is_device_capability", "is_device_capability_family"})
# the platform's dtype check is the `dtype-on-gpu` check of bot/core/prelaunch.py (it names `--dtype half`)
_COVERED = frozenset({"check_if_supports_dtype"})


class _Unknown(Exception):
    """The condition names something not known before launch."""


@dataclass(frozen=True)
class GateFacts:
    capability: tuple[int, int]
    dtype: str | None  # the model's ("bfloat16", "float16", …), None unknown
    kv_cache_dtype: str  # "auto" unless the profile sets it
    backend: str | None  # `--attention-backend` as given (FLASH_ATTN, triton_attn, …)
    gpu_name: str = "the GPU"


@dataclass(frozen=True)
class Gate:
    site: Site
    said: str  # the message, its holes filled where known


def _backend_file(backend: str) -> str:
    return f"vllm/v1/attention/backends/{backend.lower()}.py"


def gates(atlas: Atlas, version: str, facts: GateFacts) -> list[Gate]:
    """The raise sites of `version` that would fire at start on this GPU with these settings."""
    files = {"vllm/platforms/cuda.py"}
    if facts.backend:
        files.add(_backend_file(facts.backend))
    out = []
    for site in atlas.sites("vllm", version):
        if site.kind != "raise" or site.file not in files or not site.condition:
            continue
        if site.function.rsplit(".", 1)[-1] in _COVERED or " (where " in site.condition:
            continue
        try:
            holds = _holds(site.condition, facts)
        except _Unknown:
            continue
        if holds:
            out.append(Gate(site, _filled(site.template, facts)))
    return out


def _holds(condition: str, facts: GateFacts) -> bool:
    try:
        tree = ast.parse(condition, mode="eval")
    except SyntaxError:
        raise _Unknown(condition) from None
    if not any(isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) and n.func.attr in _CAPABILITY_CALLS
               for n in ast.walk(tree)):
        raise _Unknown("no capability in it")
    return bool(_Eval(facts).value(tree.body))


class _Eval:
    def __init__(self, facts: GateFacts) -> None:
        self.f = facts
        self.cap = facts.capability[0] * 10 + facts.capability[1]

    def value(self, node: ast.expr) -> object:
        if isinstance(node, ast.BoolOp):
            values = [bool(self.value(v)) for v in node.values]
            return all(values) if isinstance(node.op, ast.And) else any(values)
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.Not):
            return not self.value(node.operand)
        if isinstance(node, ast.Constant) and isinstance(node.value, (str, int)):
            return node.value
        if isinstance(node, ast.Compare) and len(node.ops) == 1:
            return self._compare(node.ops[0], self.value(node.left), self.value(node.comparators[0]))
        if isinstance(node, ast.Call):
            return self._call(node)
        if isinstance(node, ast.Attribute):
            return self._attribute(node)
        if isinstance(node, ast.Name) and node.id == "dtype":
            if self.f.dtype is None:
                raise _Unknown("dtype")
            return _TORCH_DTYPES.get(self.f.dtype, self.f.dtype)
        raise _Unknown(ast.dump(node)[:80])

    def _attribute(self, node: ast.Attribute) -> object:
        if node.attr == "kv_cache_dtype":
            return self.f.kv_cache_dtype
        if isinstance(node.value, ast.Name) and node.value.id == "torch" and node.attr in _TORCH_DTYPES:
            return _TORCH_DTYPES[node.attr]
        raise _Unknown(node.attr)

    def _call(self, node: ast.Call) -> object:
        func = node.func
        if not isinstance(func, ast.Attribute) or node.keywords:
            raise _Unknown("call")
        args = [self.value(a) for a in node.args]
        if func.attr == "is_cuda" and not args:
            return True  # a CUDA build: the only one whose GPUs are read
        if func.attr in _CAPABILITY_CALLS and len(args) == 1 and isinstance(args[0], int):
            want = args[0]
            if func.attr == "has_device_capability":
                return self.cap >= want
            if func.attr == "is_device_capability":
                return self.cap == want
            return self.cap // 10 == want // 10
        if func.attr == "startswith" and len(args) == 1 and isinstance(args[0], str):
            subject = self.value(func.value)
            if isinstance(subject, str):
                return subject.startswith(args[0])
        raise _Unknown(func.attr)

    @staticmethod
    def _compare(op: ast.cmpop, left: object, right: object) -> bool:
        if isinstance(op, ast.Eq):
            return left == right
        if isinstance(op, ast.NotEq):
            return left != right
        if isinstance(left, int) and isinstance(right, int):
            if isinstance(op, ast.Lt):
                return left < right
            if isinstance(op, ast.GtE):
                return left >= right
            if isinstance(op, ast.Gt):
                return left > right
            if isinstance(op, ast.LtE):
                return left <= right
        raise _Unknown("comparison")


def _filled(template: str, facts: GateFacts) -> str:
    """The message as vLLM would print it here: the GPU's name and capability where the template holds them; any
    other hole shown as `…`."""
    cap = f"{facts.capability[0]}.{facts.capability[1]}"
    known = {"dev": facts.gpu_name, "gpu_name": facts.gpu_name, "cap_str": cap}

    def hole(m: re.Match[str]) -> str:
        name = m[1].strip()
        return known.get(name, "…")

    return re.sub(r"(?<!\{)\{([^{}]+)\}(?!\})", hole, template).replace("{{", "{").replace("}}", "}")
