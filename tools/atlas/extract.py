"""What one release's source says: every raise and log call with its message, the metrics lines,
the Prometheus names, the config fields and the CLI flags that set them, the environment variables.

A message built in a variable first (`msg = f"..."`, `msg += ...`, then `raise ValueError(msg)` or
`raise ValueError(f"{msg} To allow ...")`) is read with the text the variable holds at the call: the
assignment on the call's own branch path, else the ones of other branches; a variable that branches
build differently gives one site per text (up to four).

Pure `ast` over the text of the `.py` members: nothing is imported or installed, so a release that
no longer runs on this Python still reads.
"""

from __future__ import annotations

import ast
import re
from array import array
from dataclasses import dataclass, field
from typing import Any

from history import cpp_checks, functions

from bot.core.atlas_tables import CONFIG_ATTRS

LEVELS = frozenset({"debug", "info", "warning", "warn", "error", "exception", "critical", "fatal",
                    "info_once", "warning_once", "debug_once", "error_once", "warning_advice"})
LOGGER_NAMES = frozenset({"logger", "log", "_logger", "LOGGER", "_LOGGER", "_log", "LOG", "_LOG"})
CONFIG_CLASSES = ("SpeculativeConfig", "ParallelConfig", "CacheConfig", "ModelConfig", "SchedulerConfig",
                  "CompilationConfig", "LoadConfig", "DeviceConfig", "StructuredOutputsConfig", "DecodingConfig",
                  "ObservabilityConfig", "KVTransferConfig", "MultiModalConfig", "LoRAConfig", "AttentionConfig")
# one name per config object as the source writes it (`cache_config.x`): the matcher's own table
SEP = "\x00"  # between a template's literal and hole parts: source text never holds it
_PCT = re.compile(r"%(?:\((\w+)\))?[-#0 +]*(?:\*|\d+)?(?:\.(?:\*|\d+))?[hlL]?([diouxXeEfFgGcrsa%])")
_METRIC = re.compile(r"^vllm:[A-Za-z_]\w*$")
_METRIC_CALL = re.compile(r"(?i)counter|gauge|histogram|summary|info|_cls|metric")
_FMT = re.compile(r"\{\{|\}\}|\{([^{}]*)\}")
METRICS_KEYS = {"SpecDecoding metrics": "spec", "Speculative metrics": "spec", "Avg prompt throughput": "engine"}


@dataclass
class RawSite:
    file: str
    function: str
    kind: str  # raise | log
    who: str  # the exception class or the log level
    template: str  # SEP-joined parts: literal, hole, literal, ... (odd length)
    line: int
    condition: str | None


@dataclass
class Release:
    package: str
    version: str
    files: int = 0
    sites: list[RawSite] = field(default_factory=list)
    metrics: dict[str, list[str]] = field(default_factory=dict)  # name -> labels
    fields: dict[str, dict[str, str]] = field(default_factory=dict)  # class -> field -> help
    flags: list[tuple[str, str | None, str, str]] = field(default_factory=list)  # flag, key, Class.field, help
    metrics_lines: list[dict[str, Any]] = field(default_factory=list)
    env: dict[str, str] = field(default_factory=dict)  # VLLM_X -> the comment above it in vllm/envs.py
    # every `--flag` an argparse parser of the release adds (the engine's, the API server's, `vllm` itself)
    cli: dict[str, str] = field(default_factory=dict)  # --flag -> its help as a literal (else "")
    stats: dict[str, int] = field(default_factory=dict)  # call sites read, all-hole ones, resolved ones
    errors: int = 0
    # the code's history (tools/atlas/history.py): (file, function) -> its lines' 16-bit hashes, as bytes
    funcs: dict[tuple[str, str], bytes] = field(default_factory=dict)
    csrc: list[str] = field(default_factory=list)  # vLLM's C++/CUDA sources in the release
    # the model registry: architecture name (a config's `architectures`) -> the registry dict holding it
    archs: dict[str, str] = field(default_factory=dict)
    # each quantization method's `get_min_capability()` (a constant), by its `get_name()`
    quant_caps: dict[str, int] = field(default_factory=dict)


# ---- message templates -------------------------------------------------------------------------

Parts = list[tuple[bool, str]]  # (is_hole, text)


def _with_locals(cond: str | None, sources: dict[str, str], members: dict[str, str] | None = None) -> str | None:
    """`current_count > allowed_count` with where the locals it compares came from, when that reads a setting
    (an attribute: `mm_config.get_limit_per_prompt(modality)`); at most two, each short. Then one hop into the
    class: what a `self._method(...)` they call returns, or what `__init__` set a `self.attr` they read to
    (`prompt_limit = self._get_prompt_limit(seq_group)`, which returns `min(self.scheduler_config.max_model_len,
    self.scheduler_config.max_num_batched_tokens)`): the setting lies there."""
    if not cond:
        return cond
    shown = []
    for name in dict.fromkeys(re.findall(r"(?<![.\w])([a-z_][a-z0-9_]*)\b", cond)):
        src = sources.get(name)
        if src and "." in src and len(src) <= 100 and "\n" not in src \
                and not re.search(rf"(?<![\w.]){re.escape(name)}\b", src):  # not `x = x + 1`
            shown.append(f"{name} = {src}")
        if len(shown) == 2:
            break
    hops = []
    for ref in dict.fromkeys(re.findall(r"\bself\.(\w+\(?)", " ".join([cond, *shown]))):
        held = (members or {}).get(ref)
        if held is not None:
            hops.append(f"{ref.rstrip('(')}() returns {held}" if ref.endswith("(") else f"self.{ref} = {held}")
        if len(hops) == 2:
            break
    shown += hops
    return f"{cond} (where {'; '.join(shown)})" if shown else cond


def _returned_text(body: list[ast.stmt]) -> str | None:
    """What a method returns, as short source: the expressions of its `return`s, a returned local read as the values
    it is assigned (`x = a` in one branch, `x = min(a, b)` in another, `return x`: `a or min(a, b)`)."""
    nodes = [n for b in body for n in _own_nodes(b)]
    returns = [n.value for n in nodes if isinstance(n, ast.Return) and n.value is not None]
    if not returns:
        return None
    texts: list[str] = []
    for value in returns:
        if isinstance(value, ast.Name):
            texts += [_src(n.value) for n in nodes if isinstance(n, ast.Assign) and len(n.targets) == 1
                      and isinstance(n.targets[0], ast.Name) and n.targets[0].id == value.id]
        else:
            texts.append(_src(value))
    text = " or ".join(dict.fromkeys(texts))
    return text if texts and "." in text and len(text) <= 240 and "\n" not in text else None


def _own_nodes(node: ast.AST) -> list[ast.AST]:
    """The node and everything under it but nested functions and classes (their returns are not the method's)."""
    out: list[ast.AST] = []
    stack = [node]
    while stack:
        n = stack.pop()
        out.append(n)
        stack.extend(c for c in ast.iter_child_nodes(n)
                     if not isinstance(c, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Lambda)))
    return out


def _class_members(cls: ast.ClassDef) -> dict[str, str]:
    """What one reading of the class says of its members: `name(` -> the expression a method returns when its body
    is that one `return` (a docstring aside), `name` -> the expression `__init__` assigns `self.name` once; short
    ones only, each a setting read through a config object more often than not."""
    out: dict[str, str] = {}
    assigned: dict[str, list[str]] = {}
    for fn in cls.body:
        if not isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)):
            continue
        body = [b for b in fn.body if not (isinstance(b, ast.Expr) and isinstance(b.value, ast.Constant))]
        returned = _returned_text(body)
        if returned is not None:
            out[fn.name + "("] = returned
        if fn.name == "__init__":
            for node in ast.walk(fn):
                if isinstance(node, ast.Assign) and len(node.targets) == 1:
                    t = node.targets[0]
                    if isinstance(t, ast.Attribute) and isinstance(t.value, ast.Name) and t.value.id == "self":
                        assigned.setdefault(t.attr, []).append(_src(node.value))
    for attr, texts in assigned.items():
        if len(texts) == 1 and "." in texts[0] and len(texts[0]) <= 160 and "\n" not in texts[0]:
            out[attr] = texts[0]
    return out


def _joined_list(node: ast.expr) -> str | None:
    """`" ".join(errors)` (or `"\\n".join(errors)`, or an f-string of only that): the list whose items are the
    message."""
    if isinstance(node, ast.JoinedStr) and len(node.values) == 1 and isinstance(node.values[0], ast.FormattedValue):
        node = node.values[0].value
    if (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "join"
            and isinstance(node.func.value, ast.Constant) and isinstance(node.func.value.value, str)
            and len(node.args) == 1 and isinstance(node.args[0], ast.Name)):
        return node.args[0].id
    return None


def _and(outer: str | None, test: str) -> str:
    """`outer and test` as Python reads it: an `or` (or a conditional) inside either keeps its own parentheses."""
    def group(t: str) -> str:
        return f"({t})" if " or " in t or " if " in t else t

    return test if outer is None else f"{group(outer)} and {group(test)}"


def _src(node: ast.AST) -> str:
    try:
        return ast.unparse(node)
    except Exception:  # an odd node from a newer grammar: name it by its type
        return type(node).__name__


Local = dict[str, Parts]  # a function's message variables, resolved to what they hold where they are read


def _arg_parts(node: ast.expr | None, local: Local | None) -> Parts | None:
    """The parts a `%s`/`{}` argument stands for when it is a message variable of the function."""
    if local and isinstance(node, ast.Name) and node.id in local:
        return list(local[node.id])
    return None


def _fill_percent(text_parts: Parts, args: list[ast.expr] | None, named: dict[str, ast.expr] | None,
                  local: Local | None = None) -> Parts:
    out: Parts = []
    pos = 0
    for hole, text in text_parts:
        if hole:
            out.append((True, text))
            continue
        last = 0
        for m in _PCT.finditer(text):
            out.append((False, text[last:m.start()]))
            last = m.end()
            if m.group(2) == "%":
                out.append((False, "%"))
                continue
            plain = re.fullmatch(r"%(?:\(\w+\))?s", m.group(0)) is not None  # `%s`: the value as it is
            if m.group(1):
                node = (named or {}).get(m.group(1))
                fallback = m.group(1)
            else:
                pos += 1
                node = args[pos - 1] if args is not None and pos <= len(args) else None
                fallback = f"arg{pos}"
            sub = _arg_parts(node, local) if plain else None
            if sub is not None:
                out.extend(sub)
            else:
                out.append((True, _src(node) if node is not None else fallback))
        out.append((False, text[last:]))
    return out


def _fill_format(text_parts: Parts, call: ast.Call, local: Local | None = None) -> Parts:
    out: Parts = []
    auto = 0
    kw = {k.arg: k.value for k in call.keywords if k.arg}
    for hole, text in text_parts:
        if hole:
            out.append((True, text))
            continue
        last = 0
        for m in _FMT.finditer(text):
            out.append((False, text[last:m.start()]))
            last = m.end()
            if m.group(0) in ("{{", "}}"):
                out.append((False, m.group(0)[0]))
                continue
            ref = re.split(r"[!:.\[]", m.group(1), maxsplit=1)[0]
            if ref == "":
                auto += 1
                node = call.args[auto - 1] if auto <= len(call.args) else None
            elif ref.isdigit():
                node = call.args[int(ref)] if int(ref) < len(call.args) else None
            else:
                node = kw.get(ref)
            sub = _arg_parts(node, local) if re.fullmatch(r"\w*", m.group(1)) else None
            if sub is not None:
                out.extend(sub)
                continue
            out.append((True, _src(node) if node is not None else (m.group(1) or f"arg{auto}")))
        out.append((False, text[last:]))
    return out


def parts_of(node: ast.expr, consts: dict[str, ast.expr], depth: int = 0, local: Local | None = None) -> Parts:
    """The message an expression builds, as literal and hole parts; `local` resolves the function's message
    variables (`msg = f"..."` then `raise ValueError(f"{msg} To allow ...")`)."""
    if depth > 8:
        return [(True, _src(node))]
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return [(False, node.value)]
    if isinstance(node, ast.JoinedStr):
        out: Parts = []
        for v in node.values:
            if isinstance(v, ast.Constant) and isinstance(v.value, str):
                out.append((False, v.value))
            elif isinstance(v, ast.FormattedValue):
                sub = _arg_parts(v.value, local) if v.conversion == -1 and v.format_spec is None else None
                if sub is not None:
                    out.extend(sub)
                else:
                    out.append((True, _src(v.value)))
        return out
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
        return parts_of(node.left, consts, depth + 1, local) + parts_of(node.right, consts, depth + 1, local)
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Mod):
        left = parts_of(node.left, consts, depth + 1, local)
        if all(h for h, _ in left):
            return [(True, _src(node))]
        r = node.right
        if isinstance(r, ast.Dict):
            named = {k.value: v for k, v in zip(r.keys, r.values, strict=False)
                     if isinstance(k, ast.Constant) and isinstance(k.value, str)}
            return _fill_percent(left, None, named, local)
        args = list(r.elts) if isinstance(r, ast.Tuple) else [r]
        return _fill_percent(left, args, None, local)
    if (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "format"
            and not any(isinstance(a, ast.Starred) for a in node.args)):
        base = parts_of(node.func.value, consts, depth + 1, local)
        if not all(h for h, _ in base):
            return _fill_format(base, node, local)
    if isinstance(node, ast.Name) and local and node.id in local:
        return list(local[node.id])
    if isinstance(node, ast.Name) and node.id in consts:
        return parts_of(consts[node.id], consts, depth + 1)
    return [(True, _src(node))]


def encode(parts: Parts) -> str:
    """Normalised SEP-joined form: adjacent literals merged, always literal-first and literal-last."""
    out: list[str] = [""]
    for hole, text in parts:
        if hole:
            out.extend([text, ""])
        else:
            out[-1] += text
    return SEP.join(out)


def literal_size(encoded: str) -> int:
    return sum(len(re.sub(r"\W", "", p)) for p in encoded.split(SEP)[::2])


# ---- the walk ------------------------------------------------------------------------------------

def _module_consts(tree: ast.Module) -> dict[str, ast.expr]:
    out: dict[str, ast.expr] = {}
    for stmt in tree.body:
        if (isinstance(stmt, ast.Assign) and len(stmt.targets) == 1 and isinstance(stmt.targets[0], ast.Name)
                and isinstance(stmt.value, (ast.Constant, ast.JoinedStr, ast.BinOp))):
            if isinstance(stmt.value, ast.Constant) and not isinstance(stmt.value.value, str):
                continue
            out[stmt.targets[0].id] = stmt.value
    return out


def _logger_names(tree: ast.Module) -> set[str]:
    names = set(LOGGER_NAMES)
    for stmt in tree.body:
        if (isinstance(stmt, ast.Assign) and isinstance(stmt.value, ast.Call)
                and _src(stmt.value.func).split(".")[-1] in ("init_logger", "getLogger", "get_logger")):
            names.update(t.id for t in stmt.targets if isinstance(t, ast.Name))
    return names


def _is_logger(node: ast.expr, names: set[str]) -> bool:
    if isinstance(node, ast.Name):
        return node.id in names
    return isinstance(node, ast.Attribute) and node.attr in names


@dataclass
class _Assigned:
    """One assignment of a variable: the branch path it was made on, the texts it may hold (None: not text, or
    nothing this module can read), and the guard it was made under."""

    path: tuple[int, ...]
    variants: list[Parts] | None
    cond: str | None


_MAX_PARTS = 160  # a message variable grown in a loop or by many branches stops growing here
_MAX_VARIANTS = 4  # the texts one variable may hold, one per branch that builds it: each is a site of its own


def _stringish(parts: Parts, node: ast.expr) -> bool:
    """An assignment that builds text: a string literal, or an expression with some literal words in it."""
    if isinstance(node, ast.Constant):
        return isinstance(node.value, str)
    return any(not h and t for h, t in parts)


def _dedup(variants: list[Parts]) -> list[Parts]:
    seen: set[str] = set()
    out: list[Parts] = []
    for v in variants:
        e = encode(v)
        if e not in seen:
            seen.add(e)
            out.append(v)
    return out[:_MAX_VARIANTS]


class _Walker:
    def __init__(self, path: str, tree: ast.Module, out: list[RawSite], stats: dict[str, int] | None = None) -> None:
        self.path = path
        self.consts = _module_consts(tree)
        self.loggers = _logger_names(tree)
        self.out = out
        self.stats = stats if stats is not None else {}
        # `msg = f"..."` / `msg += f"..."` then `raise ValueError(msg)`: the function's variables, each assignment
        # with its branch path (the ids of the `if` bodies, `else`s, handlers and cases around it)
        self.local: dict[str, list[_Assigned]] = {}
        self.branch: list[int] = []
        self._ids = 0
        # per open branch: what `+=` in it made of a variable assigned outside it (id(record) -> record, texts);
        # merged into the record when the `if` ends, unless the branch ends in a raise or a return
        self.frames: list[dict[int, tuple[_Assigned, list[Parts]]]] = []
        # `errors.append("...")` under a check, then `raise ValueError(" ".join(errors))`: each item, with its check
        self.lists: dict[str, list[tuple[ast.expr, str | None]]] = {}
        self.returned: dict[str, list[tuple[ast.expr, str | None]]] = {}  # a method that returns such a list
        # a local's last assignment as source (`allowed_count = mm_config.get_limit_per_prompt(modality)`): a
        # condition that compares locals names its setting only through them
        self.sources: dict[str, str] = {}
        self.members: dict[str, str] = {}  # the enclosing class's (`_class_members`)

    def _enter(self) -> None:
        self._ids += 1
        self.branch.append(self._ids)
        self.frames.append({})

    def _leave(self, stmts: list[ast.stmt]) -> dict[int, tuple[_Assigned, list[Parts]]] | None:
        """Close a branch: its `+=` texts, or None when the branch does not reach what follows the `if`."""
        self.branch.pop()
        frame = self.frames.pop()
        ends = bool(stmts) and isinstance(stmts[-1], (ast.Raise, ast.Return, ast.Continue, ast.Break))
        return None if ends else frame

    def _view(self, r: _Assigned) -> list[Parts] | None:
        for frame in reversed(self.frames):
            if id(r) in frame:
                return frame[id(r)][1]
        return r.variants

    def _set(self, r: _Assigned, variants: list[Parts]) -> None:
        if r.path == tuple(self.branch) or not self.frames:
            r.variants = variants
        else:
            self.frames[-1][id(r)] = (r, variants)

    def _merge(self, branches: list[dict[int, tuple[_Assigned, list[Parts]]] | None], exhaustive: bool) -> None:
        """After an `if` (and its `else`), a handler or a case: a variable one branch added to holds any of the
        texts of the branches that reach here, or (when some path skips them all) what it held before."""
        touched: dict[int, _Assigned] = {}
        for b in branches:
            for key, (r, _) in (b or {}).items():
                touched[key] = r
        for key, r in touched.items():
            before = self._view(r) or []
            out: list[Parts] = []
            for b in branches:
                if b is not None:
                    out.extend(b[key][1] if key in b else before)
            if not exhaustive:
                out = [*before, *out]
            self._set(r, _dedup(out))

    def _reaching(self, name: str) -> tuple[_Assigned | None, list[Parts]]:
        """What a read of the variable sees: the last assignment on the read's own branch path first, then those
        made later in branches the read is not in (they may have replaced it); without one on the path, the
        assignments of the other branches, the last one first. Unknown values keep the hole."""
        recs = self.local.get(name)
        if not recs:
            return None, []
        here = tuple(self.branch)
        same = [k for k, r in enumerate(recs) if here[:len(r.path)] == r.path]
        base = recs[same[-1]] if same else None
        start = same[-1] + 1 if same else 0
        order = ([base] if base is not None else []) + [r for r in reversed(recs[start:]) if r is not base]
        variants: list[Parts] = []
        for r in order:
            held = self._view(r)
            variants.extend(held if held is not None else [[(True, name)]])
        # a variant that says next to nothing (`x = ""` in one branch) is not what the message shows
        worded = [v for v in variants if literal_size(encode(v)) >= 3]
        if not worded:
            return base, []
        return base, _dedup([v for v in variants if v in worded or any(h for h, _ in v)])

    def _visible(self, nodes: list[ast.expr], choice: dict[str, int] | None = None) -> Local:
        """The message variables these expressions read, each as the text it holds here."""
        out: Local = {}
        for node in nodes:
            for n in ast.walk(node):
                if isinstance(n, ast.Name) and n.id in self.local and n.id not in out:
                    _, variants = self._reaching(n.id)
                    if variants:
                        k = (choice or {}).get(n.id, 0)
                        out[n.id] = variants[k if k < len(variants) else 0]
        return out

    def _assign(self, name: str, value: ast.expr | None, cond: str | None) -> None:
        if value is not None:
            self.sources[name] = _src(value)
        else:
            self.sources.pop(name, None)
        here = tuple(self.branch)
        # what this assignment replaces: the earlier ones on this path and inside its branches
        recs = [r for r in self.local.get(name, []) if r.path[:len(here)] != here]
        texty = isinstance(value, (ast.Constant, ast.JoinedStr, ast.BinOp)) or (
            isinstance(value, ast.Call) and isinstance(value.func, ast.Attribute) and value.func.attr == "format")
        parts = parts_of(value, self.consts, local=self._visible([value])) if value is not None and texty else []
        if value is not None and texty and _stringish(parts, value):
            recs.append(_Assigned(here, [parts[:_MAX_PARTS]], cond))
        else:
            recs.append(_Assigned(here, None, cond))  # not text this module reads (a parameter, a call's value)
        if recs:
            self.local[name] = recs
        else:
            self.local.pop(name, None)

    def _append(self, name: str, value: ast.expr) -> None:
        base, variants = self._reaching(name)
        if not variants:
            return
        added = parts_of(value, self.consts, local=self._visible([value]))
        grown = _dedup([[*v, *added] if len(v) + len(added) <= _MAX_PARTS else v for v in variants])
        if base is None:  # only other branches assigned it: this branch's own text from here on
            self.local.setdefault(name, []).append(_Assigned(tuple(self.branch), grown, None))
        elif self._view(base) is not None:
            self._set(base, grown)

    def body(self, stmts: list[ast.stmt], qual: list[str], cond: str | None) -> None:
        for stmt in stmts:
            self.stmt(stmt, qual, cond)

    def stmt(self, s: ast.stmt, qual: list[str], cond: str | None) -> None:
        if isinstance(s, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            saved, self.local = self.local, {}
            saved_branch, self.branch = self.branch, []
            saved_lists, self.lists = self.lists, {}
            saved_sources, self.sources = self.sources, {}
            saved_members = self.members
            if isinstance(s, ast.ClassDef):
                self.members = _class_members(s)
            else:
                a = s.args
                for arg in [*a.posonlyargs, *a.args, *a.kwonlyargs, a.vararg, a.kwarg]:
                    if arg is not None:
                        self._assign(arg.arg, None, None)
            self.body(s.body, [*qual, s.name], None)
            self.local, self.branch, self.lists, self.sources = saved, saved_branch, saved_lists, saved_sources
            self.members = saved_members
            return
        if (isinstance(s, ast.Expr) and isinstance(s.value, ast.Call) and isinstance(s.value.func, ast.Attribute)
                and s.value.func.attr == "append" and isinstance(s.value.func.value, ast.Name)
                and len(s.value.args) == 1):
            self.lists.setdefault(s.value.func.value.id, []).append((s.value.args[0], cond))
        if isinstance(s, ast.Return) and isinstance(s.value, ast.Name) and s.value.id in self.lists and qual:
            self.returned[qual[-1]] = list(self.lists[s.value.id])
        if (isinstance(s, ast.Assign) and len(s.targets) == 1 and isinstance(s.targets[0], ast.Name)
                and isinstance(s.value, ast.Call) and not s.value.args):
            callee = _src(s.value.func).split(".")[-1]
            if callee in self.returned:
                self.lists[s.targets[0].id] = list(self.returned[callee])
        if isinstance(s, ast.Assign) and len(s.targets) == 1 and isinstance(s.targets[0], ast.Name):
            self._assign(s.targets[0].id, s.value, cond)
        elif isinstance(s, ast.AnnAssign) and isinstance(s.target, ast.Name):
            self._assign(s.target.id, s.value, cond)
        elif isinstance(s, (ast.Assign, ast.For, ast.AsyncFor, ast.With, ast.AsyncWith)):
            targets = (s.targets if isinstance(s, ast.Assign) else [s.target] if isinstance(s, (ast.For, ast.AsyncFor))
                       else [i.optional_vars for i in s.items if i.optional_vars is not None])
            for t in targets:
                for n in ast.walk(t):
                    if isinstance(n, ast.Name):
                        self._assign(n.id, None, cond)
        elif isinstance(s, ast.AugAssign) and isinstance(s.target, ast.Name) and isinstance(s.op, ast.Add):
            self._append(s.target.id, s.value)
        if isinstance(s, ast.If):
            test = _src(s.test)
            # a nested check holds under its enclosing ones: `if kv_cache_dtype.startswith(...)` then
            # `if model_config.is_hybrid` — the outer test names the setting the refusal is about
            self._enter()
            self.body(s.body, qual, _and(cond, test))
            then = self._leave(s.body)
            self._enter()
            if len(s.orelse) == 1 and isinstance(s.orelse[0], ast.If):
                self.stmt(s.orelse[0], qual, cond)  # elif: its own test (under the enclosing ones)
            else:
                self.body(s.orelse, qual, _and(cond, f"not ({test})") if s.orelse else None)
            other = self._leave(s.orelse)
            self._merge([then, other], exhaustive=bool(s.orelse))
            return
        if isinstance(s, ast.Assert) and s.msg is not None:
            # `assert cond, "message"` raises AssertionError(message) when cond is false: a raise site whose
            # condition is the assertion negated
            self.site(s.msg, [], "raise", "AssertionError", s.lineno, qual, _and(cond, f"not ({_src(s.test)})"))
        joined = _joined_list(s.exc.args[0]) if isinstance(s, ast.Raise) and isinstance(s.exc, ast.Call) \
            and s.exc.args else None
        if joined is not None and joined in self.lists and isinstance(s, ast.Raise) and isinstance(s.exc, ast.Call):
            for item, item_cond in self.lists[joined]:
                self.site(item, [], "raise", _src(s.exc.func).split(".")[-1], s.lineno, qual, item_cond or cond)
        elif isinstance(s, ast.Raise) and isinstance(s.exc, ast.Call) and s.exc.args:
            self.site(s.exc.args[0], [], "raise", _src(s.exc.func).split(".")[-1], s.lineno, qual, cond)
        elif isinstance(s, ast.Raise) and isinstance(s.exc, ast.Call):
            for kw in s.exc.keywords:
                if kw.arg in ("msg", "message", "detail"):
                    self.site(kw.value, [], "raise", _src(s.exc.func).split(".")[-1], s.lineno, qual, cond)
        for node in _calls(s):
            f = node.func
            if (isinstance(f, ast.Attribute) and f.attr in LEVELS and _is_logger(f.value, self.loggers)
                    and node.args and not isinstance(node.args[0], ast.Starred)):
                level = {"warn": "warning", "fatal": "critical", "warning_advice": "warning"}.get(f.attr, f.attr)
                self.site(node.args[0], node.args[1:], "log", level, node.lineno, qual, cond)
            elif (isinstance(f, ast.Attribute) and f.attr == "create_error_response" and node.args
                  and not isinstance(node.args[0], ast.Starred)):
                # the OpenAI server's refusals are returned, not raised: `{"object":"error","message":…}`
                kind = next((_flat_str(kw.value) for kw in node.keywords if kw.arg == "err_type"), None)
                self.site(node.args[0], [], "raise", kind or "BadRequestError", node.lineno, qual, cond)
        # nested bodies (for/while/with/try/match) keep no condition of their own; a handler or a case is a
        # branch of its own for the message variables
        for name in ("body", "orelse", "finalbody", "handlers", "cases"):
            sub = getattr(s, name, None)
            if isinstance(sub, list) and sub and not isinstance(s, ast.If):
                for item in sub:
                    if isinstance(item, (ast.ExceptHandler, ast.match_case)):
                        self._enter()
                        self.body(item.body, qual, cond)
                        self._merge([self._leave(item.body)], exhaustive=False)
                    elif isinstance(item, ast.stmt):
                        self.stmt(item, qual, cond)

    def site(self, msg: ast.expr, args: list[ast.expr], kind: str, who: str, line: int, qual: list[str],
             cond: str | None) -> None:
        if isinstance(msg, ast.Name) and msg.id in self.local:
            base, _ = self._reaching(msg.id)
            cond = cond or (base.cond if base is not None else None)
        # the variables the message reads: the first that may hold several texts gives one site per text
        read = [n.id for a in [msg, *args] for n in ast.walk(a) if isinstance(n, ast.Name) and n.id in self.local]
        spread = next((n for n in read if len(self._reaching(n)[1]) > 1), None)
        choices = range(len(self._reaching(spread)[1])) if spread is not None else range(1)
        pct = kind == "log" and args and not any(isinstance(a, ast.Starred) for a in args)
        bare = parts_of(msg, self.consts)
        if pct:
            bare = _fill_percent(bare, args, None)
        self.stats["calls"] = self.stats.get("calls", 0) + 1
        # counted for the build's report: messages that would be all holes without their variables resolved
        if literal_size(encode(bare)) < 3:
            self.stats["holes_only_unresolved"] = self.stats.get("holes_only_unresolved", 0) + 1
        done: set[str] = set()
        for k in choices:
            local = self._visible([msg, *args], {spread: k} if spread is not None else None)
            parts = parts_of(msg, self.consts, local=local)
            if pct:
                parts = _fill_percent(parts, args, None, local)
            enc = encode(parts)
            if enc in done:
                continue
            done.add(enc)
            if literal_size(enc) < 3:
                if k == 0:
                    self.stats["holes_only"] = self.stats.get("holes_only", 0) + 1
                continue  # a message that is all holes says nothing about where it came from
            if k == 0 and enc != encode(bare):
                self.stats["resolved"] = self.stats.get("resolved", 0) + 1
            self.out.append(RawSite(self.path, ".".join(qual) or "<module>", kind, who, enc, line,
                                    _with_locals(cond, self.sources, self.members)))


def _calls(s: ast.stmt) -> list[ast.Call]:
    """Calls in the statement itself, not in the bodies of nested statements."""
    out: list[ast.Call] = []
    stack: list[ast.AST] = []
    for name, value in ast.iter_fields(s):
        if name in ("body", "orelse", "finalbody", "handlers", "cases"):
            continue
        if isinstance(value, ast.AST):
            stack.append(value)
        elif isinstance(value, list):
            stack.extend(v for v in value if isinstance(v, ast.AST))
    while stack:
        n = stack.pop()
        if isinstance(n, (ast.Lambda, ast.FunctionDef)):
            continue
        if isinstance(n, ast.Call):
            out.append(n)
        stack.extend(ast.iter_child_nodes(n))
    return out


# ---- metrics lines -------------------------------------------------------------------------------

def _pct_template(parts: Parts) -> tuple[str, list[str]]:
    """An f-string's parts as one %-template (`{x:.3f}` -> `%.3f`) and its argument expressions."""
    text, args = "", []
    for hole, t in parts:
        if hole:
            text += "%s"
            args.append(t)
        else:
            text += t.replace("%", "%%")
    return text, args


def _fstring_pct(node: ast.JoinedStr) -> tuple[str, list[str]]:
    text, args = "", []
    for v in node.values:
        if isinstance(v, ast.Constant) and isinstance(v.value, str):
            text += v.value.replace("%", "%%")
        elif isinstance(v, ast.FormattedValue):
            spec = ""
            if isinstance(v.format_spec, ast.JoinedStr):
                spec = "".join(str(x.value) for x in v.format_spec.values if isinstance(x, ast.Constant))
            conv = {114: "r", 97: "a"}.get(v.conversion, "s")
            text += "%" + spec if spec and spec[-1] in "dfeEgGxXo%" else "%" + conv
            args.append(_src(v.value))
    return text, args


def _flat_str(node: ast.expr) -> str | None:
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
        a, b = _flat_str(node.left), _flat_str(node.right)
        return a + b if a is not None and b is not None else None
    return None


def _hole_count(t: str) -> int:
    return sum(1 for m in _PCT.finditer(t) if m.group(2) != "%")


def metrics_lines(path: str, tree: ast.Module) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for fn in ast.walk(tree):
        if not isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)):
            continue
        text = _src(fn)
        keys = [k for k in METRICS_KEYS if k in text]
        if not keys:
            continue
        for node in ast.walk(fn):
            tmpl: str | None = None
            args: list[str] = []
            value: ast.expr | None = None
            if isinstance(node, ast.Call) and node.args:
                value, rest = node.args[0], node.args[1:]
                args = [_src(a) for a in rest]
            elif isinstance(node, ast.Return) and node.value is not None:
                value = node.value
                if isinstance(value, ast.Tuple) and value.elts:
                    value = value.elts[0]
            if value is None:
                continue
            style = "percent"
            if isinstance(value, ast.JoinedStr) or (isinstance(value, ast.BinOp) and isinstance(value.op, ast.Add)
                                                     and "JoinedStr" in ast.dump(value)):
                parts: list[tuple[str, list[str]]] = []
                for piece in _concat_pieces(value):
                    if isinstance(piece, ast.JoinedStr):
                        parts.append(_fstring_pct(piece))
                    elif isinstance(piece, ast.Constant) and isinstance(piece.value, str):
                        parts.append((piece.value.replace("%", "%%"), []))
                tmpl = "".join(p for p, _ in parts)
                args = [a for _, al in parts for a in al]
                style = "fstring"
            else:
                tmpl = _flat_str(value)
            prefix = None
            if (isinstance(node, ast.Call) and isinstance(value, ast.BinOp) and isinstance(value.op, ast.Add)
                    and isinstance(value.right, ast.Call) and tmpl is None):
                prefix, value = _src(value.left), value.right  # `self.log_prefix + ", ".join(log_parts)`
            if tmpl is not None and any(k in tmpl[:40] for k in METRICS_KEYS):  # "Engine %03d: Avg prompt ..."
                kind = METRICS_KEYS[next(k for k in METRICS_KEYS if k in tmpl[:40])]
                entry = {"template": tmpl, "args": args, "parts": None, "joiner": None, "source_style": style,
                         "prefix": None}
            elif (isinstance(node, ast.Call) and isinstance(value, ast.Call) and isinstance(value.func, ast.Attribute)
                  and value.func.attr == "join" and _flat_str(value.func.value) is not None and value.args
                  and isinstance(value.args[0], ast.Name)):
                built = _list_built(fn, value.args[0].id, list(node.args[1:]))
                if built is None or not any(built[0]["text"].startswith(k) for k in METRICS_KEYS):
                    continue
                kind = METRICS_KEYS[next(k for k in METRICS_KEYS if built[0]["text"].startswith(k))]
                joiner = _flat_str(value.func.value) or ", "
                mand = [p for p in built if not p["optional"]]
                entry = {"template": joiner.join(p["text"] for p in mand), "args": [a for p in mand for a in p["args"]],
                         "parts": built, "joiner": joiner, "source_style": "percent-parts", "prefix": prefix}
            else:
                continue
            if kind == "spec":
                kind = "v1-spec" if "/v1/" in path else "v0-spec"
            out.append({"kind": kind, "file": path, "function": fn.name, "line": getattr(node, "lineno", fn.lineno),
                        **entry})
    return out


def _concat_pieces(node: ast.expr) -> list[ast.expr]:
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
        return _concat_pieces(node.left) + _concat_pieces(node.right)
    return [node]


def _list_built(fn: ast.AST, parts_name: str, call_args: list[ast.expr]) -> list[dict[str, Any]] | None:
    """A message built as `", ".join(log_parts)` with `*log_args`: its parts in order, the optional ones with
    the `if` that adds them, and the argument expressions each part's holes take."""
    args_name = next((a.value.id for a in call_args if isinstance(a, ast.Starred) and isinstance(a.value, ast.Name)),
                     None)
    events: list[tuple[str, Any, str | None]] = []

    def walk(stmts: list[ast.stmt], cond: str | None) -> None:
        for s in stmts:
            if isinstance(s, ast.If):
                walk(s.body, _src(s.test) if cond is None else f"{cond} and {_src(s.test)}")
                if s.orelse:
                    walk(s.orelse, f"not ({_src(s.test)})")
                continue
            if isinstance(s, (ast.Assign, ast.AnnAssign)):
                target = s.targets[0] if isinstance(s, ast.Assign) else s.target
                if isinstance(target, ast.Name) and isinstance(s.value, ast.List):
                    if target.id == parts_name:
                        events.extend(("part", _flat_str(e) or "", cond) for e in s.value.elts)
                    elif target.id == args_name:
                        events.extend(("arg", _src(e), cond) for e in s.value.elts)
                continue
            if isinstance(s, ast.Expr) and isinstance(s.value, ast.Call) and isinstance(s.value.func, ast.Attribute):
                call = s.value
                owner = _src(call.func.value)
                if owner == parts_name and call.func.attr == "append" and call.args:
                    events.append(("part", _flat_str(call.args[0]) or "", cond))
                elif owner == args_name and call.func.attr in ("append", "extend") and call.args:
                    a = call.args[0]
                    if call.func.attr == "extend" and isinstance(a, (ast.List, ast.Tuple)):
                        events.extend(("arg", _src(e), cond) for e in a.elts)
                    else:
                        events.append(("argmany" if call.func.attr == "extend" else "arg", _src(a), cond))
                continue
            for name in ("body", "orelse"):
                sub = getattr(s, name, None)
                if isinstance(sub, list) and not isinstance(s, (ast.FunctionDef, ast.ClassDef)):
                    walk(sub, cond)

    body = getattr(fn, "body", [])
    walk(body, None)
    parts = [{"text": t, "optional": c is not None, "condition": c, "args": []} for k, t, c in events if k == "part"]
    if not parts:
        return None
    queue = [(k, t) for k, t, _ in events if k != "part"]
    for p in parts:
        need = _hole_count(p["text"])
        while need and queue:
            kind, text = queue[0]
            if kind == "argmany":
                # one generator fills every hole of the part that asks for it
                p["args"].extend(f"{text}[{i}]" for i in range(need))
                queue.pop(0)
                need = 0
            else:
                p["args"].append(text)
                queue.pop(0)
                need -= 1
    return parts


# ---- Prometheus names ----------------------------------------------------------------------------

def _strings(node: ast.expr | None, local: dict[str, ast.expr], depth: int = 0) -> list[str]:
    if node is None or depth > 5:
        return []
    if isinstance(node, (ast.List, ast.Tuple)):
        return [s for e in node.elts for s in _strings(e, local, depth + 1)]
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return [node.value]
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
        return _strings(node.left, local, depth + 1) + _strings(node.right, local, depth + 1)
    if isinstance(node, ast.Name) and node.id in local:
        return _strings(local[node.id], local, depth + 1)
    if isinstance(node, ast.Call) and _src(node.func) in ("list", "tuple") and node.args:
        return _strings(node.args[0], local, depth + 1)
    return ["{" + _src(node) + "}"]


def prometheus_names(tree: ast.Module) -> dict[str, list[str]]:
    out: dict[str, list[str]] = {}
    scopes: list[ast.AST] = [n for n in ast.walk(tree) if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))]
    for fn in [*scopes, tree]:  # the innermost scope's assignment names the labels
        local: dict[str, ast.expr] = {}
        for n in ast.walk(fn):
            if isinstance(n, ast.Assign) and len(n.targets) == 1:
                t = n.targets[0]
                key = t.id if isinstance(t, ast.Name) else (_src(t) if isinstance(t, ast.Attribute) else None)
                if key and key not in local:
                    local[key] = n.value
        for n in ast.walk(fn):
            if not isinstance(n, ast.Call):
                continue
            kw = {k.arg: k.value for k in n.keywords if k.arg}
            name_node = kw.get("name") or (n.args[0] if n.args else None)
            if not (isinstance(name_node, ast.Constant) and isinstance(name_node.value, str)
                    and _METRIC.match(name_node.value) and _METRIC_CALL.search(_src(n.func))):
                continue
            labels_node = kw.get("labelnames") or (n.args[2] if len(n.args) > 2 else None)
            labels = _strings(labels_node, local) if labels_node is not None else []
            out.setdefault(name_node.value, labels)
    return out


# ---- config fields and CLI flags -----------------------------------------------------------------

def _docstring_args(doc: str) -> dict[str, str]:
    out: dict[str, str] = {}
    current = None
    in_args = False
    for raw in doc.splitlines():
        line = raw.strip()
        if line in ("Args:", "Arguments:", "Attributes:"):
            in_args = True
            continue
        if not in_args:
            continue
        m = re.match(r"^(\w+)(?: \(.*?\))?:\s*(.*)$", line)
        if m and raw.startswith(" " * 8) and not raw.startswith(" " * 12):
            current = m.group(1)
            out[current] = m.group(2)
        elif current and line:
            out[current] += " " + line
        elif not line:
            current = None
    return out


def config_fields(tree: ast.Module) -> dict[str, dict[str, str]]:
    out: dict[str, dict[str, str]] = {}
    for cls in ast.walk(tree):
        if not isinstance(cls, ast.ClassDef) or cls.name not in CONFIG_CLASSES:
            continue
        fields: dict[str, str] = {}
        body = cls.body
        for i, s in enumerate(body):
            if isinstance(s, ast.AnnAssign) and isinstance(s.target, ast.Name):
                if "ClassVar" in _src(s.annotation):
                    continue
                nxt = body[i + 1] if i + 1 < len(body) else None
                doc = (nxt.value.value if isinstance(nxt, ast.Expr) and isinstance(nxt.value, ast.Constant)
                       and isinstance(nxt.value.value, str) else "")
                fields[s.target.id] = " ".join(doc.split())
        if not fields:  # the pre-dataclass configs: the __init__ parameters, the class docstring's Args
            init = next((s for s in body if isinstance(s, ast.FunctionDef) and s.name == "__init__"), None)
            docs = _docstring_args(ast.get_docstring(cls) or "")
            if init is not None:
                for a in init.args.args[1:] + init.args.kwonlyargs:
                    fields[a.arg] = " ".join(docs.get(a.arg, "").split())
        out[cls.name] = fields
    return out


def cli_flags(tree: ast.Module, fields: dict[str, dict[str, str]]) -> list[tuple[str, str | None, str, str]]:
    """(flag, json key, Class.field, help) for each mapping `vllm/engine/arg_utils.py` states."""
    engine = next((c for c in ast.walk(tree) if isinstance(c, ast.ClassDef) and c.name in ("EngineArgs",)), None)
    if engine is None:
        return []
    # EngineArgs field -> config field: `kv_cache_dtype: ... = CacheConfig.cache_dtype` (dataclass era) and
    # `CacheConfig(cache_dtype=self.kv_cache_dtype)` / `SpeculativeConfig.maybe_create_spec_config(...)` (V0)
    to_config: dict[str, str] = {}
    for s in engine.body:
        if isinstance(s, ast.AnnAssign) and isinstance(s.target, ast.Name) and s.value is not None:
            v = s.value
            if isinstance(v, ast.Call) and _src(v.func).endswith("get_field") and len(v.args) == 2:
                cls_, fld = _src(v.args[0]), v.args[1]
                if cls_ in CONFIG_CLASSES and isinstance(fld, ast.Constant):
                    to_config[s.target.id] = f"{cls_}.{fld.value}"
            elif isinstance(v, ast.Attribute) and isinstance(v.value, ast.Name) and v.value.id in CONFIG_CLASSES:
                to_config[s.target.id] = f"{v.value.id}.{v.attr}"
    for n in ast.walk(engine):
        if isinstance(n, ast.Call):
            head = _src(n.func).split(".")[0]
            if head in CONFIG_CLASSES:
                for k in n.keywords:
                    if k.arg and isinstance(k.value, ast.Attribute) and _src(k.value.value) == "self":
                        to_config.setdefault(k.value.attr, f"{head}.{k.arg}")
    out: list[tuple[str, str | None, str, str]] = []
    json_flags: dict[str, str] = {}
    for fn in ast.walk(engine):
        if not (isinstance(fn, ast.FunctionDef) and fn.name == "add_cli_args"):
            continue
        kw_of: dict[str, str] = {}
        for n in ast.walk(fn):
            if (isinstance(n, ast.Assign) and isinstance(n.value, ast.Call)
                    and _src(n.value.func).endswith("get_kwargs") and n.value.args
                    and isinstance(n.targets[0], ast.Name)):
                kw_of[n.targets[0].id] = _src(n.value.args[0])
        for n in ast.walk(fn):
            if not (isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) and n.func.attr == "add_argument"):
                continue
            flags = [a.value for a in n.args if isinstance(a, ast.Constant) and isinstance(a.value, str)
                     and a.value.startswith("--")]
            if not flags:
                continue
            flag = flags[0]
            kw = {k.arg: k.value for k in n.keywords if k.arg}
            help_text = " ".join((_flat_str(kw["help"]) or "").split()) if "help" in kw else ""
            target: str | None = None
            for k in n.keywords:
                if (k.arg is None and isinstance(k.value, ast.Subscript) and isinstance(k.value.value, ast.Name)
                        and isinstance(k.value.slice, ast.Constant)):
                    cls_ = kw_of.get(k.value.value.id)
                    if cls_:
                        target = f"{cls_}.{k.value.slice.value}"
            dest_node = kw.get("dest")
            dest = (dest_node.value if isinstance(dest_node, ast.Constant) else flag.lstrip("-").replace("-", "_"))
            if target is None:
                target = to_config.get(dest)
            if target is None:
                continue
            cls_, fld = target.split(".", 1)
            if cls_ == "VllmConfig" and fld in CONFIG_ATTRS:
                json_flags[CONFIG_ATTRS[fld]] = flag
                continue
            if cls_ in CONFIG_CLASSES:
                out.append((flag, None, target, help_text))
    for cls_, flag in json_flags.items():
        for fld, _doc in fields.get(cls_, {}).items():
            out.append((flag, fld, f"{cls_}.{fld}", ""))
    return out


# ---- environment variables ---------------------------------------------------------------------

_RULE = re.compile(r"^[=#*~-]{3,}.*[=#*~-]{3,}$|^[=#*~-]{3,}$")  # `# ====== Runtime Env Vars ======`


def env_vars(tree: ast.Module, source: str) -> dict[str, str]:
    """`vllm/envs.py`: the names of the `environment_variables` dict (`"VLLM_X": lambda: ...`), each with the
    comment lines just above its key as its help; the `if TYPE_CHECKING:` annotations name the rest."""
    lines = source.splitlines()
    out: dict[str, str] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.Assign) and len(node.targets) == 1:
            target, value = node.targets[0], node.value
        elif isinstance(node, ast.AnnAssign):
            target, value = node.target, node.value
        else:
            continue
        if not (isinstance(target, ast.Name) and target.id == "environment_variables" and isinstance(value, ast.Dict)):
            continue
        for key in value.keys:
            if not (isinstance(key, ast.Constant) and isinstance(key.value, str)):
                continue
            comment: list[str] = []
            k = key.lineno - 2
            while k >= 0 and lines[k].strip().startswith("#"):
                text = lines[k].strip().lstrip("#").strip()
                if text and not _RULE.match(text):
                    comment.insert(0, text)
                k -= 1
            out[key.value] = " ".join(comment)
    for node in ast.walk(tree):  # `if TYPE_CHECKING: VLLM_HOST_IP: str = ""`
        if (isinstance(node, ast.If) and _src(node.test).endswith("TYPE_CHECKING")):
            for s in node.body:
                if (isinstance(s, ast.AnnAssign) and isinstance(s.target, ast.Name)
                        and re.fullmatch(r"[A-Z][A-Z0-9_]+", s.target.id)):
                    out.setdefault(s.target.id, "")
    return out


# ---- one file ------------------------------------------------------------------------------------

def argparse_flags(tree: ast.Module) -> dict[str, str]:
    """`parser.add_argument("--lora-modules", ..., help="...")`: each long flag and its literal help."""
    out: dict[str, str] = {}
    for n in ast.walk(tree):
        if not (isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) and n.func.attr == "add_argument"):
            continue
        names = [a.value for a in n.args if isinstance(a, ast.Constant) and isinstance(a.value, str)
                 and a.value.startswith("--") and len(a.value) > 3]
        help_node = next((k.value for k in n.keywords if k.arg == "help"), None)
        help_text = " ".join((_flat_str(help_node) or "").split()) if help_node is not None else ""
        for name in names:
            out.setdefault(name, help_text)
    return out


def dataclass_flags(tree: ast.Module) -> dict[str, str]:
    """The flags a dataclass adds in a loop (vLLM 0.10 on: `FrontendArgs.add_cli_args` runs
    `for key, value in get_kwargs(FrontendArgs).items(): group.add_argument(f"--{key.replace('_', '-')}", **value)`):
    each field of the class, and of its bases defined in the same module, with its attribute docstring as help."""
    classes = {c.name: c for c in ast.walk(tree) if isinstance(c, ast.ClassDef)}

    def fields(cls: ast.ClassDef, seen: set[str]) -> dict[str, str]:
        out: dict[str, str] = {}
        for base in cls.bases:
            name = _src(base)
            if name in classes and name not in seen:
                out.update(fields(classes[name], seen | {name}))
        body = cls.body
        for i, s in enumerate(body):
            if (isinstance(s, ast.AnnAssign) and isinstance(s.target, ast.Name) and not s.target.id.startswith("_")
                    and "ClassVar" not in _src(s.annotation)):
                nxt = body[i + 1] if i + 1 < len(body) else None
                doc = (nxt.value.value if isinstance(nxt, ast.Expr) and isinstance(nxt.value, ast.Constant)
                       and isinstance(nxt.value.value, str) else "")
                out[s.target.id] = " ".join(doc.split())
        return out

    def derives(cls: ast.ClassDef, base: str, seen: frozenset[str] = frozenset()) -> bool:
        names = [_src(b) for b in cls.bases]
        return base in names or any(n in classes and n not in seen and derives(classes[n], base, seen | {n})
                                    for n in names)

    out: dict[str, str] = {}
    for cls in classes.values():
        adder = next((s for s in cls.body if isinstance(s, ast.FunctionDef) and s.name == "add_cli_args"), None)
        if adder is None:
            continue
        kwargs_of = {_src(n.args[0]) for n in ast.walk(adder) if isinstance(n, ast.Call)
                     and _src(n.func).endswith("get_kwargs") and n.args}
        looped = any(isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) and n.func.attr == "add_argument"
                     and any(isinstance(a, ast.JoinedStr) for a in n.args) for n in ast.walk(adder))
        if not looped or not kwargs_of & {cls.name, "cls"}:
            continue
        # `get_kwargs(cls)` in a base's classmethod: every subclass here adds its own fields the same way
        for sub in [cls, *(c for c in classes.values() if "cls" in kwargs_of and derives(c, cls.name))]:
            for name, doc in fields(sub, {sub.name}).items():
                out.setdefault("--" + name.replace("_", "-"), doc)
    return out


def read_file(rel: str, source: str, rel_in_pkg: str, rel_ok_for_sites: bool, rec: Release) -> None:
    try:
        tree = ast.parse(source)
    except (SyntaxError, ValueError):
        rec.errors += 1
        return
    rec.files += 1
    if rel_ok_for_sites:
        _Walker(rel, tree, rec.sites, rec.stats).body(tree.body, [], None)
    if rec.package != "vllm":
        return
    if rel_ok_for_sites:
        for qual, (_start, hashes) in functions(tree, source).items():
            rec.funcs[(rel, qual)] = array("H", hashes).tobytes()
    if "vllm:" in source:
        for k, v in prometheus_names(tree).items():
            rec.metrics.setdefault(k, v)
    if any(k in source for k in METRICS_KEYS):
        rec.metrics_lines.extend(metrics_lines(rel, tree))
    # the server's own parsers (engine, API server, `vllm serve`), not the benchmarks' or the examples'
    if "add_argument" in source and re.match(r"(engine|entrypoints)/", rel_in_pkg) and "bench" not in rel_in_pkg:
        for flag, help_text in {**dataclass_flags(tree), **argparse_flags(tree)}.items():
            if help_text or flag not in rec.cli:
                rec.cli[flag] = help_text
    if (rel_in_pkg == "envs.py" or rel_in_pkg.startswith("envs/")) and "environment_variables" in source:
        rec.env.update(env_vars(tree, source))
    if rel_in_pkg.startswith("config/") or rel_in_pkg == "config.py":
        for cls, flds in config_fields(tree).items():
            rec.fields.setdefault(cls, {}).update(flds)
    if rel_in_pkg in ("model_executor/models/registry.py", "model_executor/models/__init__.py"):
        rec.archs.update(architectures(tree))
    if rel_in_pkg.startswith("model_executor/layers/quantization/") and "get_min_capability" in source:
        rec.quant_caps.update(quant_capabilities(tree))


# ---- the model registry and the quantization methods ---------------------------------------------

def architectures(tree: ast.Module) -> dict[str, str]:
    """The architecture names of the model registry: the keys of its module-level `_…MODELS` dicts (a `**`
    merge adds none of its own), each with the dict's name (`_SPECULATIVE_DECODING_MODELS`)."""
    out: dict[str, str] = {}
    for node in tree.body:
        target, value = (node.targets[0] if isinstance(node, ast.Assign) and len(node.targets) == 1 else
                         node.target if isinstance(node, ast.AnnAssign) else None,
                         node.value if isinstance(node, (ast.Assign, ast.AnnAssign)) else None)
        if not (isinstance(target, ast.Name) and re.fullmatch(r"_[A-Z0-9_]*MODELS", target.id)
                and isinstance(value, ast.Dict)):
            continue
        for key in value.keys:
            if isinstance(key, ast.Constant) and isinstance(key.value, str):
                out.setdefault(key.value, target.id)
    return out


def _returned_constant(fn: ast.FunctionDef) -> object:
    returns = [n for n in ast.walk(fn) if isinstance(n, ast.Return)]
    if len(returns) == 1 and isinstance(returns[0].value, ast.Constant):
        return returns[0].value.value
    return None


def quant_capabilities(tree: ast.Module) -> dict[str, int]:
    """`QuantizationConfig` classes whose `get_name()` and `get_min_capability()` each return one constant:
    method name -> the least compute capability (as vLLM writes it: 75 for 7.5)."""
    out: dict[str, int] = {}
    for cls in (n for n in tree.body if isinstance(n, ast.ClassDef)):
        methods = {f.name: f for f in cls.body if isinstance(f, ast.FunctionDef)}
        if "get_name" not in methods or "get_min_capability" not in methods:
            continue
        name, cap = _returned_constant(methods["get_name"]), _returned_constant(methods["get_min_capability"])
        if isinstance(name, str) and isinstance(cap, int) and not isinstance(cap, bool):
            out[name] = cap
    return out


CPP_SUFFIXES = (".cu", ".cuh", ".cpp", ".cc", ".h", ".hpp", ".c")


def read_cpp(rel: str, source: str, rec: Release) -> None:
    """A C++/CUDA source of vLLM (`csrc/`): the file, and each check that raises with a message (a site)."""
    rec.csrc.append(rel)
    if not rel.endswith(CPP_SUFFIXES):
        return
    for func, template, line, cond in cpp_checks(rel, source):
        rec.sites.append(RawSite(rel, func, "raise", "RuntimeError", template, line,
                                 None if cond in ("", "false", "0") else cond))
