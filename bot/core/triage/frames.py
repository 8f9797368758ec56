"""Frames before words: for an exception whose words are Python's own, the traceback says where and what.

`IndexError: list index out of range` or `TypeError: f() got an unexpected keyword argument 'x'` carry no words of
vLLM's: matched by its words, such a line lands on whatever site of whatever library prints the same sentence. Its
traceback does not guess: the innermost frame is the file, function and code line that raised, and the code line
names the input that failed — a config field or list (`self.target_layer_ids[i]`), an environment variable
(`int(os.environ["VLLM_PORT"])`), a checkpoint key (`params_dict[name]` with `KeyError: 'x.weight'`), a keyword
one package passed to another. Pure: reads ProblemLines, returns what the frames say.
"""

from __future__ import annotations

import builtins
import re
from dataclasses import dataclass, field

from bot.core import owners
from bot.core.parsed_log import ProblemLine

# Python's built-in exceptions and torch's RuntimeError: their messages are the interpreter's or torch's words,
# the same from any site (CPython's Objects/ and Python/ sources; torch's c10 checks)
FRAMES_DECIDE = frozenset({"IndexError", "KeyError", "AttributeError", "TypeError", "ValueError", "AssertionError",
                           "ZeroDivisionError", "RuntimeError", "NotImplementedError", "UnboundLocalError",
                           "NameError", "OverflowError", "ImportError", "ModuleNotFoundError", "StopIteration",
                           "FileNotFoundError", "OSError", "PermissionError", "RecursionError", "MemoryError"})
# messages in the interpreter's (or torch's) own words: they say what kind of thing failed, never where
_GENERIC = tuple(re.compile(p) for p in (
    r"^(?:list|tuple|string|bytes|range|array) index out of range$",
    r"^index -?\d+ is out of bounds for (?:dimension|axis) \d+ with size \d+$",
    r"^\S+\(\) got an unexpected keyword argument '\w+'$",
    r"^Unexpected keyword argument '\w+'$",  # the same of a constructor in C (msgspec's Struct)
    r"^\S+\(\) (?:missing \d+ required (?:positional|keyword-only) arguments?|takes \d+ positional arguments? but \d+ "
    r"(?:were|was) given|got multiple values for argument '\w+')",
    r"^'[\w.]+' object (?:is not subscriptable|is not callable|is not iterable|does not support item assignment)$",
    r"^(?:'[\w.]+' object|module '[\w.]+'|type object '[\w.]+') has no attribute '\w+'(?:\. Did you mean: '\w+'\?)?$",
    r"^\[Errno \d+\] ",
    r"^unsupported operand type\(s\) for ",
    r"^can(?:no|')t (?:multiply|concatenate|convert|unpack)",
    r"^invalid literal for (?:int|float)\(\) with base \d+: ",
    r"^could not convert string to float: ",
    r"^(?:not enough|too many) values to unpack",
    r"^(?:integer )?division (?:or modulo )?by zero$|^(?:float division|integer modulo|float modulo) by zero$",
    r"^unhashable type: ",
    r"^$",  # a bare `assert`
    r"^cannot import name '\w+' from (?:partially initialized module )?'[\w.]+'",
    r"^No module named '[\w.]+'$",
    r"^(?:The size of tensor a \(\d+\) must match the size of tensor b|shape '\[[\d, -]*\]' is invalid for input of"
    r" size|mat1 and mat2 shapes cannot be multiplied|size mismatch for |Expected index \[|"
    r"Sizes of tensors must match)",
    r"^local variable '\w+' referenced before assignment$|^cannot access local variable '\w+'",
    r"^name '\w+' is not defined$",
    r"^Can't instantiate abstract class \w+ with(?:out an implementation for)? abstract methods? ",
))


# `KeyError: 'x'`: the key alone is the whole message
_KEY_ALONE = re.compile(r"^'[^']{0,200}'$|^\"[^\"]{0,200}\"$|^-?\d+$")


def generic_words(exception: str | None, message: str) -> bool:
    """Is the message the interpreter's (or torch's) own wording — true of any site that raises it?"""
    if exception not in FRAMES_DECIDE:
        return False
    text = " ".join(message.split())
    if exception == "KeyError" and _KEY_ALONE.match(text):
        return True
    return any(rx.search(text) for rx in _GENERIC)


@dataclass(frozen=True)
class Input:
    """An input the failing line read, named: what kind, its name, and how it was seen."""

    # config | env | checkpoint | argument | attribute | shape | module | file | class | request | divisor | local
    kind: str
    name: str
    detail: str = ""

    @property
    def tag(self) -> str:
        if self.kind == "checkpoint":
            return "checkpoint"
        return self.name


@dataclass(frozen=True)
class Raiser:
    """What the traceback says raised the exception: the innermost frame, its owner, and — when that is not vLLM —
    the innermost frame of vLLM's (the call vLLM made), with the code lines."""

    frame: ProblemLine
    owner: owners.Owner
    vllm_frame: ProblemLine | None
    inputs: tuple[Input, ...] = ()
    chain: tuple[owners.Owner, ...] = field(default=())  # each owner once, innermost first

    @property
    def code(self) -> str:
        return (self.frame.source or "").strip()


def raiser(frames: list[ProblemLine], exception: str | None, message: str) -> Raiser | None:
    """The innermost frame that says something (Python's own machinery — multiprocessing, importlib — is
    skipped when a frame of a package lies inside it), its owner, and the inputs its code line names."""
    usable = [f for f in frames if f.frame_file]
    if not usable:
        return None
    # the innermost frames that only pass the call on (torch's dispatch into a custom op, a module's __call__) are
    # not where it failed: the frame before them is
    while len(usable) > 1 and _PLUMBING.search((usable[-1].frame_file or "").replace("\\", "/")):
        usable = usable[:-1]
    with_owner = [(f, owners.of_path(f.frame_file or "")) for f in usable]
    inner, inner_owner = with_owner[-1]
    if inner_owner is not None and inner_owner.name == "python":
        # an error raised inside the standard library is about what a caller passed it: the caller's frame
        for f, o in reversed(with_owner):
            if o is not None and o.name != "python":
                inner, inner_owner = f, o
                break
    if inner_owner is None:
        return None
    vllm = next((f for f, o in reversed(with_owner) if o is not None and o.name == "vllm"), None)
    if inner_owner.name == "plugin" and vllm is None and _called_by_a_program(with_owner, inner_owner):
        inner_owner = owners.Owner("other", inner_owner.package)
    elif _loaded_as_a_connector(with_owner, inner_owner):
        inner_owner = owners.Owner("plugin", inner_owner.package)
    chain = tuple(dict.fromkeys(o for _, o in reversed(with_owner) if o is not None and o.name != "python"))
    code = " ".join(filter(None, ((inner.source or ""),
                                  (vllm.source or "") if vllm is not None and vllm is not inner else "")))
    inputs = inputs_of(exception, message, code) + _request_grammar(with_owner)
    return Raiser(inner, inner_owner, vllm if vllm is not inner else None, tuple(inputs), chain)


# vLLM's structured outputs compile, per request, the grammar, schema or regex that request sent (V1's
# `_async_create_grammar` → the backend's `compile_grammar`; V0's `get_…_guided_decoding_logits_processor`)
_GRAMMAR_OF_A_REQUEST = re.compile(r"(?:^|_)(?:create|compile)_grammar$|^grammar_init$|"
                                   r"guided_decoding_logits_processor")


def _request_grammar(with_owner: list[tuple[ProblemLine, owners.Owner | None]]) -> list[Input]:
    """A failure under vLLM's compile of a request's grammar (in vLLM's code or the backend library it calls): what
    failed to compile is what that request sent."""
    if any(o is not None and o.name == "vllm" and _GRAMMAR_OF_A_REQUEST.search(f.frame_function or "")
           for f, o in with_owner):
        return [Input("request", "request", "the grammar, JSON schema or regex a request sent, compiled for it")]
    return []


def _called_by_a_program(with_owner: list[tuple[ProblemLine, owners.Owner | None]], code: owners.Owner) -> bool:
    """Code with a `vllm/` folder of its own that no frame of vLLM's calls, called by another program's frame
    (`kserve/model_server.py` → `huggingfaceserver/vllm/vllm_model.py`): an application that runs vLLM through its
    API, not a plugin vLLM loaded — a plugin's code runs under vLLM's frames."""
    outer = [o for _, o in with_owner if o is not None and o.name not in ("python", "plugin")]
    return bool(outer) and all(o.package != code.package for o in outer)


# where vLLM runs a class the user names by its module (`kv_connector_module_path`, an offloading spec's): a KV
# connector or an offloading backend from another package is a plugin of vLLM's, as LMCache is
_CONNECTOR_CALLERS = re.compile(r"(?:^|/)vllm/(?:distributed/kv_transfer|v1/kv_offload)/")


def _loaded_as_a_connector(with_owner: list[tuple[ProblemLine, owners.Owner | None]], code: owners.Owner) -> bool:
    """A package no list of libraries names, called straight from vLLM's KV-connector or KV-offloading code."""
    if code.package in owners.LIBRARIES or code.name in ("vllm", "python", "plugin", "user-script"):
        return False
    mine = [k for k, (_, o) in enumerate(with_owner) if o is not None and o.package == code.package]
    caller = with_owner[mine[0] - 1][0] if mine and mine[0] > 0 else None
    return caller is not None and _CONNECTOR_CALLERS.search((caller.frame_file or "").replace("\\", "/")) is not None


_KEY = re.compile(r"^['\"](?P<key>[^'\"]{1,200})['\"]$")
_CHECKPOINT_KEY = re.compile(r"(?:^|\.)(?:weight|bias|scales?|weight_scale\w*|input_scale|qweight|qzeros|g_idx|"
                             r"zeros|k_scale|v_scale|\w*_proj|\w*embed\w*|lm_head|layers?\.\d+)(?:\.|$)")
_ENV_IN_CODE = re.compile(r"""(?:getenv|environ(?:\.get)?)\s*[\[(]\s*['"](?P<name>[A-Z][A-Z0-9_]+)['"]|"""
                          r"""\benvs\.(?P<envs>[A-Z][A-Z0-9_]+)\b""")
_INDEXED = re.compile(r"(?P<expr>[A-Za-z_][\w.]*)\s*\[")
_ATTR_MSG = re.compile(r"^'(?P<cls>[\w.]+)' object has no attribute '(?P<attr>\w+)'|^module '(?P<mod>[\w.]+)' has no "
                       r"attribute '(?P<mattr>\w+)'|^type object '(?P<tcls>[\w.]+)' has no attribute '(?P<tattr>\w+)'")
_DID_YOU_MEAN = re.compile(r"Did you mean: '(?P<other>\w+)'")
# a parameter's name (a tensor a layer holds): `w2_weight`, `qweight`, `weight_scale`, `g_idx`, `bias`
_WEIGHT_NAME = re.compile(r"weight|qweight|qzeros|scales?$|_scale|g_idx|zeros$|^bias$|_bias$")
# the interpreter's and torch's plumbing: a frame here only passes the call on (dispatch, module call, decorators)
_PLUMBING = re.compile(r"torch/_ops\.py$|torch/nn/modules/module\.py$|torch/_dynamo/eval_frame\.py$|"
                       r"torch/utils/_contextlib\.py$|torch/_compile\.py$|torch/_library/custom_ops\.py$|"
                       r"/functools\.py$|/contextlib\.py$")
_KWARG_MSG = re.compile(r"^(?:(?P<callee>\S+)\(\) got an u|U)nexpected keyword argument '(?P<kw>\w+)'")
# CPython's words (3.12 on: "without an implementation for abstract method"), the class and the methods it lacks
_ABSTRACT_MSG = re.compile(r"^Can't instantiate abstract class (?P<cls>\w+) with(?:out an implementation for)? "
                           r"abstract methods? (?P<methods>.+)$")
_POS_MSG = re.compile(r"^(?P<callee>\S+)\(\) (?:missing|takes)")
_LITERAL_MSG = re.compile(r"^invalid literal for (?:int|float)\(\) with base \d+: (?P<value>.+)$|"
                          r"^could not convert string to float: (?P<fvalue>.+)$")
_IMPORT_MSG = re.compile(r"^cannot import name '(?P<name>\w+)' from "
                         r"(?:partially initialized module )?'(?P<mod>[\w.]+)'|"
                         r"^No module named '(?P<nomod>[\w.]+)'")
_SHAPE_MSG = re.compile(r"size mismatch for (?P<param>[\w.]+)|The size of tensor a|shape '\[|mat1 and mat2 shapes|"
                        r"Expected (?:index|size|tensor)|Sizes of tensors must match|shape mismatch|must have shape")
_ASSERT_NAMES = re.compile(r"(?<![\w.])(?:self\.)?((?:[a-z_]+_config\.)?[a-z][a-z0-9_]*(?:\.[a-z][a-z0-9_]*)?)")
# words a code line uses for a model's or a drafter's config (`self.config.x`, `hf_config.x`, `draft_config.x`)
_CONFIG_EXPR = re.compile(r"(?:^|\.)(?:\w*config|cfg|hparams|args)(?:\.|\[|$)")


def inputs_of(exception: str | None, message: str, code: str) -> list[Input]:
    """The inputs a failing line names, from its exception's message and the code line under the frame."""
    text = " ".join(message.split())
    env = [m.group("name") or m.group("envs") for m in _ENV_IN_CODE.finditer(code)]
    reader = _READERS.get(exception or "")
    out = reader(text, code, env) if reader is not None else []
    if exception in ("ValueError", "TypeError") and not out and (lit := _LITERAL_MSG.match(text)):
        value = (lit.group("value") or lit.group("fvalue") or "").strip()
        out = [Input("env", e, f"its value {value} is not a number") for e in env]
    for e in env:
        if not any(i.name == e for i in out):
            out.append(Input("env", e, "read on the failing line"))
    return out


def _key_error(text: str, code: str, env: list[str]) -> list[Input]:
    key = _KEY.match(text)
    name = key.group("key") if key else text
    holder = re.search(r"(?P<expr>[A-Za-z_][\w.]*)\s*\[\s*['\"]" + re.escape(name) + r"['\"]\s*\]", code)
    if env and name in env:
        return [Input("env", name, "read from the environment")]
    if _CHECKPOINT_KEY.search(name) or re.search(r"params_dict|state_dict|weights?\b|loaded_weight", code):
        return [Input("checkpoint", name, "a tensor name the model's loader does not have")]
    if holder is not None:
        expr = holder.group("expr")
        return [Input("config", expr.rsplit(".", 1)[-1], f"read as `{expr}[{name!r}]`, and it has no `{name}` key")]
    if _CONFIG_EXPR.search(code) or "config" in code:
        return [Input("config", name, "a key the config does not have")]
    return [Input("key", name, "a key not in the mapping the code read")] if name else []


def _index_error(text: str, code: str, env: list[str]) -> list[Input]:
    out = []
    for m in _INDEXED.finditer(code):
        expr = m.group("expr")
        last = expr.rsplit(".", 1)[-1]
        if last in ("self", "args", "kwargs") or last.startswith("_"):
            continue
        kind = "config" if _CONFIG_EXPR.search(expr) or "_ids" in last or "types" in last else "list"
        out.append(Input(kind, last, f"indexed as `{expr}[…]`"))
    return out


def _attribute_error(text: str, code: str, env: list[str]) -> list[Input]:
    am = _ATTR_MSG.match(text)
    if am is None:
        return []
    if am.group("mod"):
        return [Input("module", f"{am.group('mod')}.{am.group('mattr')}", "a name the installed module lacks")]
    cls, attr = (am.group("cls") or am.group("tcls")), (am.group("attr") or am.group("tattr"))
    other = _DID_YOU_MEAN.search(text)
    if _WEIGHT_NAME.search(attr) or (other and _WEIGHT_NAME.search(other.group("other"))):
        # a layer without the parameter its loader or kernel reads: the layer was built for another layout
        # (quantized or not) than the checkpoint or the kernel expects
        alt = f"; it has `{other.group('other')}`" if other else ""
        return [Input("checkpoint", attr, f"the layer `{cls}` has no parameter `{attr}`{alt}: built for another "
                      "(quantized or unquantized) layout than the code reading it")]
    return [Input("config" if cls.endswith("Config") else "attribute", attr, f"`{cls}` has no `{attr}`")]


def _type_error(text: str, code: str, env: list[str]) -> list[Input]:
    if am := _ABSTRACT_MSG.match(text):
        return [Input("class", am.group("cls"), f"does not implement `{am.group('methods').strip(chr(39))}`, which "
                                                "its base class requires in this install")]
    if km := _KWARG_MSG.match(text):
        callee = f"`{km.group('callee')}()`" if km.group("callee") else "the constructor called"
        return [Input("argument", km.group("kw"), f"{callee} does not take it")]
    if pm := _POS_MSG.match(text):
        return [Input("argument", pm.group("callee"), "called with other arguments than it takes")]
    return []


def _import_error(text: str, code: str, env: list[str]) -> list[Input]:
    im = _IMPORT_MSG.match(text)
    if im is None:
        return []
    name, mod = im.group("name") or "", im.group("mod") or im.group("nomod") or ""
    return [Input("module", f"{mod}.{name}" if name else mod, "not in the installed package")]


def _runtime_error(text: str, code: str, env: list[str]) -> list[Input]:
    sm = _SHAPE_MSG.search(text)
    return [Input("shape", sm.group("param") or "tensor shape", "tensor shapes that do not fit")] if sm else []


def _assertion_error(text: str, code: str, env: list[str]) -> list[Input]:
    stmt = code.split("assert", 1)[1].split(",", 1)[0] if "assert" in code else ""
    # `self.running` is the object's own state (an invariant of its code), `self.model_config.x` a setting it read
    names = [m.group(1) for m in _ASSERT_NAMES.finditer(stmt) if m.group(1) not in _PY_WORDS
             and not (m.group(0).startswith("self.") and "config" not in m.group(1))]
    # a name read through a config object is a setting; a bare name is one only when a flag sets a field of it
    # (settable() decides: `local`), else the code's own local state
    return [Input("config" if "config" in n else "local", n.rsplit(".", 1)[-1], f"in `assert{stmt}`")
            for n in dict.fromkeys(names)][:3]


# the divisor of a `%`, `//` or `/` in the code line (`heads % tensor_parallel_size`, `x / self.config.n`)
_DIVISOR = re.compile(r"(?:%|//|/)\s*\(?\s*(?P<expr>[A-Za-z_][\w.]{0,120})")


def _zero_division(text: str, code: str, env: list[str]) -> list[Input]:
    names = [m.group("expr") for m in _DIVISOR.finditer(code)]
    return [Input("divisor", n.rsplit(".", 1)[-1], f"the divisor of `{code.strip()[:80]}` is 0")
            for n in dict.fromkeys(names) if n not in _PY_WORDS and n.rsplit(".", 1)[-1] not in _KEYWORDS][:2]


_READERS = {"KeyError": _key_error, "IndexError": _index_error, "AttributeError": _attribute_error,
            "TypeError": _type_error, "ImportError": _import_error, "ModuleNotFoundError": _import_error,
            "RuntimeError": _runtime_error, "AssertionError": _assertion_error,
            "ZeroDivisionError": _zero_division}
_KEYWORDS = frozenset({"and", "or", "not", "in", "is", "none", "true", "false", "if", "else", "for", "lambda"})
# Python's words and its built-in names (range, len, …), for bare names only: an attribute may be called anything
_PY_WORDS = frozenset({*_KEYWORDS, *(n.lower() for n in dir(builtins))})


def frames_agree(site_file: str, site_function: str, frames: list[ProblemLine]) -> bool:
    """Does the traceback pass through the site a message's words matched (its file, and its function)? A site in
    vLLM's C++ sources is reached through torch's op dispatch, so a traceback through it agrees."""
    from bot.core.parts import repo_path

    if site_file.startswith("csrc/"):
        return any(re.search(r"torch/_ops\.py$|vllm/_custom_ops\.py$|_C\.", (f.frame_file or "").replace("\\", "/"))
                   for f in frames)
    short = site_function.rsplit(".", 1)[-1]
    for f in frames:
        path = repo_path(f.frame_file or "") or ""
        if path == site_file and (f.frame_function or "") in (short, site_function):
            return True
    return False


# a line of Python source: a statement keyword, or an assignment or an operation between names
_CODE_LINE = re.compile(r"^\s*(?:if|elif|while|return|assert|for|raise)\b|[\w\])]\s*(?:=|%|//|/|\*)\s*[\w(\[]")


def code_above(loose: list[ProblemLine], p: ProblemLine) -> str:
    """The source line a traceback printed right above its exception (its `File …` line cut, the code and the carets
    kept): the line that raised, as the frame's code line would be."""
    at = p.origin.line_no
    if at is None:
        return ""
    near = [q for q in loose if q.origin.line_no is not None and at - 3 < q.origin.line_no < at]
    last = near[-1].message.strip() if near else ""
    return last if _CODE_LINE.search(last) and not last.startswith(("INFO", "WARNING", "ERROR", "DEBUG")) else ""
