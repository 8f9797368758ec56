"""The rollout's gate: what a host measured after a change against what it measured before, on the same workload.

`compare(before, after, …) -> Comparison` pairs the two measurements (`bot.core.results.tune.Measurement`, one per
concurrency level) and exposes the gate's variables (`VARIABLES`); `parse_gate(text) -> Gate` reads an expression
over them; `Gate.judge(comparison) -> Verdict` says whether it holds, one top-level `and` clause at a time, with the
numbers each clause read.

What the variables mean:
- `tps`, `tps_before`: tok/s at the lowest concurrency both measured (single-stream speed; when there is no level in
  both, each side's own lowest level). `tps_ratio`: the lowest after/before ratio over the levels both measured — the
  worst level decides; a level measured before and missing after, or one without a number, makes it unknown.
- `acceptance`, `acceptance_before`: the mean acceptance length pooled over the levels both measured, as the
  /metrics counters would say over the whole run: sum(tokens) / sum(tokens / mean length), each level's drafts
  estimated from its tokens. Acceptance is the drafter's agreement with the target on this workload, not a function
  of concurrency, so every level is a sample of it: pooling uses all of them (less noise than the lowest level
  alone) and weighs each by the drafts it made, not by its share of requests (a level of long answers drafts more).
  `acceptance_ratio`: after / before on the same levels. When the two settings draft a different number of tokens
  (a k change, a method change), the mean length grows with k by construction (k = 1 can never pass 2): the two are
  then compared on the positions both drafted, 1 + the sum of their per-position acceptance at the lowest level, so
  a k = 8 -> 4 change is judged on whether the first four positions still agree as often.
- per-position acceptance and `ttft`, `ttft_before`, `ttft_ratio` (after / before; higher is worse): the lowest level
  (the probe measures TTFT there only: under load it measures the queue).
- `errors`, `errors_before`: the counts the caller gives; `bugs`: how many bug findings the triage raised on the
  new setting (`Comparison.bugs` keeps their titles).
A value that was not measured is None, and a clause that reads one fails: a canary whose measurement itself failed
counts as a failed gate, never as a pass.

The expression is parsed by Python's `ast` in eval mode and checked against a whitelist (numbers, the variables,
< <= > >= == !=, and/or/not, parentheses, + - * /); it is evaluated by walking that tree, never by `eval`.
"""

from __future__ import annotations

import ast
import operator
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from types import MappingProxyType

from bot.core.results.tune import Measurement
from bot.errors import InputError

VARIABLES: tuple[str, ...] = ("tps", "tps_before", "tps_ratio", "acceptance", "acceptance_before",
                              "acceptance_ratio", "ttft", "ttft_before", "ttft_ratio", "errors", "errors_before",
                              "bugs")
DEFAULT_GATE = "bugs == 0 and tps_ratio >= 0.95 and acceptance_ratio >= 0.9"
MAX_LENGTH = 1000
MAX_DEPTH = 40  # nodes deep: far beyond any gate a person writes, well inside Python's recursion limit

Number = float | int
Value = Number | None


class GateError(InputError):
    """A gate expression that does not parse or uses what a gate may not."""


# --- the comparison ---------------------------------------------------------------------------------------


def _ratio(after: float | None, before: float | None) -> float | None:
    return after / before if after is not None and before is not None and before > 0 else None


@dataclass(frozen=True)
class Level:
    """One concurrency level both measurements have: its tok/s before and after."""

    concurrency: int
    tps_before: float | None
    tps_after: float | None

    @property
    def ratio(self) -> float | None:
        return _ratio(self.tps_after, self.tps_before)


@dataclass(frozen=True)
class Comparison:
    """After against before on the same workload (see the module's docstring for what each value means)."""

    levels: tuple[Level, ...]
    missing: tuple[int, ...]  # concurrency levels measured before and not after
    tps_before: float | None
    tps_after: float | None
    tps_ratio: float | None
    acceptance_before: float | None
    acceptance_after: float | None
    acceptance_ratio: float | None
    ttft_before: float | None
    ttft_after: float | None
    ttft_ratio: float | None
    errors_before: int = 0
    errors_after: int = 0
    bugs: tuple[str, ...] = ()

    @property
    def worst(self) -> Level | None:
        """The level whose ratio decides `tps_ratio` (None when it is unknown)."""
        return next((lv for lv in self.levels if self.tps_ratio is not None and lv.ratio == self.tps_ratio), None)

    @property
    def variables(self) -> Mapping[str, Value]:
        """The gate's variables by name, in `VARIABLES`' order."""
        return MappingProxyType({
            "tps": self.tps_after, "tps_before": self.tps_before, "tps_ratio": self.tps_ratio,
            "acceptance": self.acceptance_after, "acceptance_before": self.acceptance_before,
            "acceptance_ratio": self.acceptance_ratio, "ttft": self.ttft_after, "ttft_before": self.ttft_before,
            "ttft_ratio": self.ttft_ratio, "errors": self.errors_after, "errors_before": self.errors_before,
            "bugs": len(self.bugs)})


def _has_acceptance(m: Measurement) -> bool:
    return m.mean_acceptance_length is not None and m.mean_acceptance_length > 0 and m.tokens > 0


def _pooled(ms: Sequence[Measurement]) -> float | None:
    """The mean acceptance length over several windows: tokens over (estimated) drafts."""
    ms = [m for m in ms if _has_acceptance(m)]
    drafts = sum(m.tokens / m.mean_acceptance_length for m in ms if m.mean_acceptance_length)
    return sum(m.tokens for m in ms) / drafts if drafts > 0 else None


def _worst_ratio(levels: Sequence[Level], missing: Sequence[int]) -> float | None:
    ratios = [lv.ratio for lv in levels]
    if not ratios or missing or any(r is None for r in ratios):
        return None
    return min(r for r in ratios if r is not None)


_NOTHING = Measurement(concurrency=0, requests=0, tokens=0, seconds=0.0, tokens_per_s=None,
                       mean_acceptance_length=None, per_position=(), ttft_s=None)


def _reference(side: Mapping[int, Measurement], common: Sequence[int]) -> Measurement:
    """The level the single-stream numbers come from: the lowest both sides have; without one, the side's own
    lowest (what a host serves now has its numbers even when it served nothing before)."""
    if common:
        return side[common[0]]
    return side[min(side)] if side else _NOTHING


def _shared_positions(before: Sequence[float | None], after: Sequence[float | None]) -> tuple[float, float] | None:
    """When the two sides drafted a different number of positions: 1 + the acceptance of the positions both have,
    each side. None when they drafted as many (the pooled mean compares them) or a shared position is unknown."""
    n = min(len(before), len(after))
    if not before or not after or len(before) == len(after):
        return None
    head_b, head_a = before[:n], after[:n]
    if any(p is None for p in (*head_b, *head_a)):
        return None
    return 1 + sum(p for p in head_b if p is not None), 1 + sum(p for p in head_a if p is not None)


def compare(before: Sequence[Measurement], after: Sequence[Measurement], errors_before: int = 0,
            errors_after: int = 0, bugs: Sequence[str] = ()) -> Comparison:
    """Pair the two measurements level by level; `bugs` are the titles of the triage's bug findings on the
    setting measured after."""
    b = {m.concurrency: m for m in before}
    a = {m.concurrency: m for m in after}
    common = sorted(b.keys() & a.keys())
    levels = tuple(Level(c, b[c].tokens_per_s, a[c].tokens_per_s) for c in common)
    missing = tuple(sorted(b.keys() - a.keys()))
    ref_b, ref_a = _reference(b, common), _reference(a, common)
    # like for like: the levels where both measured acceptance; without one, each side over its own levels
    paired = [c for c in common if _has_acceptance(b[c]) and _has_acceptance(a[c])]
    acc_b = _pooled([b[c] for c in paired] if paired else list(before))
    acc_a = _pooled([a[c] for c in paired] if paired else list(after))
    shared = _shared_positions(ref_b.per_position, ref_a.per_position)
    if shared is not None:  # another k: the mean length over the positions both drafted
        acc_b, acc_a = shared
    return Comparison(
        levels=levels, missing=missing, tps_before=ref_b.tokens_per_s, tps_after=ref_a.tokens_per_s,
        tps_ratio=_worst_ratio(levels, missing),
        acceptance_before=acc_b, acceptance_after=acc_a, acceptance_ratio=_ratio(acc_a, acc_b) if paired else None,
        ttft_before=ref_b.ttft_s, ttft_after=ref_a.ttft_s,
        ttft_ratio=_ratio(ref_a.ttft_s, ref_b.ttft_s) if common else None,
        errors_before=errors_before, errors_after=errors_after, bugs=tuple(bugs))


# --- the expression ---------------------------------------------------------------------------------------

_BINOPS: dict[type[ast.operator], Callable[[Number, Number], Number]] = {
    ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul, ast.Div: operator.truediv}
_CMPOPS: dict[type[ast.cmpop], tuple[str, Callable[[Number, Number], bool]]] = {
    ast.Lt: ("<", operator.lt), ast.LtE: ("<=", operator.le), ast.Gt: (">", operator.gt),
    ast.GtE: (">=", operator.ge), ast.Eq: ("==", operator.eq), ast.NotEq: ("!=", operator.ne)}
_NEGATED = {"<": ">=", "<=": ">", ">": "<=", ">=": "<", "==": "!=", "!=": "=="}
# what a gate may not use, in words
_SYMBOLS: dict[type[ast.AST], str] = {
    ast.Pow: "**", ast.Mod: "%", ast.FloorDiv: "//", ast.MatMult: "@", ast.LShift: "<<", ast.RShift: ">>",
    ast.BitOr: "|", ast.BitAnd: "&", ast.BitXor: "^", ast.Invert: "~", ast.In: "in", ast.NotIn: "not in",
    ast.Is: "is", ast.IsNot: "is not"}
_KINDS: dict[type[ast.AST], str] = {
    ast.Call: "a function call", ast.Attribute: "an attribute", ast.Subscript: "a subscript",
    ast.Lambda: "a lambda", ast.NamedExpr: "an assignment", ast.IfExp: "a conditional expression",
    ast.ListComp: "a comprehension", ast.SetComp: "a comprehension", ast.DictComp: "a comprehension",
    ast.GeneratorExp: "a comprehension", ast.List: "a list", ast.Tuple: "a tuple", ast.Set: "a set",
    ast.Dict: "a dict", ast.JoinedStr: "an f-string", ast.Starred: "a starred expression", ast.Await: "an await",
    ast.Yield: "a yield", ast.YieldFrom: "a yield", ast.Slice: "a slice"}
_GRAMMAR = "a gate is numbers, the known names, < <= > >= == !=, and/or/not, parentheses and + - * /"


def _error(what: str) -> GateError:
    return GateError(f"gate: {what} (known: {', '.join(VARIABLES)})")


def _src(node: ast.AST) -> str:
    """A node as an error message quotes it (checked or not: ast.unparse), cut short."""
    text = ast.unparse(node)
    return text if len(text) <= 60 else text[:59] + "…"


def _not_allowed(node: ast.AST) -> GateError:
    kind = _KINDS.get(type(node), type(node).__name__.lower())
    return _error(f"'{_src(node)}' ({kind}) is not allowed: {_GRAMMAR}")


def _operator_not_allowed(op: ast.AST) -> GateError:
    return _error(f"the operator {_SYMBOLS.get(type(op), type(op).__name__)} is not allowed: {_GRAMMAR}")


def _constant_kind(value: object) -> str | None:
    """None for a number a gate may use; else what the constant is, in words."""
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, int | float):
        return None
    return {str: "a string", bytes: "bytes", complex: "a complex number"}.get(type(value), "a constant")


def _is_numeric_shape(node: ast.AST) -> bool:
    return isinstance(node, ast.Constant | ast.Name | ast.BinOp) or (
        isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub | ast.UAdd))


def _deep(depth: int) -> None:
    if depth > MAX_DEPTH:
        raise _error(f"the expression is nested more than {MAX_DEPTH} deep")


def _check_condition(node: ast.expr, depth: int = 0) -> None:
    _deep(depth)
    if isinstance(node, ast.BoolOp):
        for v in node.values:
            _check_condition(v, depth + 1)
    elif isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.Not):
        _check_condition(node.operand, depth + 1)
    elif isinstance(node, ast.Compare):
        for op in node.ops:
            if type(op) not in _CMPOPS:
                raise _operator_not_allowed(op)
        for side in (node.left, *node.comparators):
            _check_number(side, depth + 1)
    elif _is_numeric_shape(node):
        _check_number(node, depth)
        raise _error(f"'{_src(node)}' is a number, not a condition: compare it, as in 'tps_ratio >= 0.95'")
    else:
        raise _not_allowed(node)


def _check_number(node: ast.expr, depth: int) -> None:
    _deep(depth)
    if isinstance(node, ast.Constant):
        kind = _constant_kind(node.value)
        if kind is not None:
            raise _error(f"'{_src(node)}' ({kind}) is not allowed: {_GRAMMAR}")
    elif isinstance(node, ast.Name):
        if node.id not in VARIABLES:
            raise _error(f"unknown name '{node.id}'")
    elif isinstance(node, ast.BinOp):
        if type(node.op) not in _BINOPS:
            raise _operator_not_allowed(node.op)
        _check_number(node.left, depth + 1)
        _check_number(node.right, depth + 1)
    elif isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub | ast.UAdd):
        _check_number(node.operand, depth + 1)
    elif isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.Invert):
        raise _operator_not_allowed(node.op)
    elif isinstance(node, ast.Compare | ast.BoolOp | ast.UnaryOp):
        raise _error(f"'{_src(node)}' is a condition, not a number")
    else:
        raise _not_allowed(node)


_BINOP_TEXT: dict[type[ast.operator], tuple[str, int]] = {
    ast.Add: ("+", 5), ast.Sub: ("-", 5), ast.Mult: ("*", 6), ast.Div: ("/", 6)}


def _text(node: ast.expr) -> tuple[str, int]:
    """A checked tree as text with the parentheses its precedence needs, and that precedence (or 1, and 2, not 3,
    comparisons 4, + - 5, * / 6, unary - + 7, atoms 8). Python 3.11's ast.unparse brackets the third operand of
    `a and b and c`, so it is not used for what plans show."""
    if isinstance(node, ast.BoolOp):
        prec = 2 if isinstance(node.op, ast.And) else 1
        word = " and " if prec == 2 else " or "
        return word.join(_wrap(v, prec + 1) for v in node.values), prec
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.Not):
        return f"not {_wrap(node.operand, 3)}", 3
    if isinstance(node, ast.UnaryOp):
        return ("-" if isinstance(node.op, ast.USub) else "+") + _wrap(node.operand, 7), 7
    if isinstance(node, ast.Compare):
        parts = [_wrap(node.left, 5)]
        for op, side in zip(node.ops, node.comparators, strict=True):
            parts += [_CMPOPS[type(op)][0], _wrap(side, 5)]
        return " ".join(parts), 4
    if isinstance(node, ast.BinOp):
        symbol, prec = _BINOP_TEXT[type(node.op)]
        return f"{_wrap(node.left, prec)} {symbol} {_wrap(node.right, prec + 1)}", prec
    return ast.unparse(node), 8  # a name or a number


def _wrap(node: ast.expr, least: int) -> str:
    text, prec = _text(node)
    return f"({text})" if prec < least else text


def _clauses_of(node: ast.expr) -> list[ast.expr]:
    """The top-level `and` clauses, nested ones flattened: each is judged on its own."""
    if isinstance(node, ast.BoolOp) and isinstance(node.op, ast.And):
        return [c for v in node.values for c in _clauses_of(v)]
    return [node]


def _value(node: ast.expr, env: Mapping[str, Number]) -> Number:
    """Evaluate a checked tree over measured values (bools are numbers here: `not`, and, or give 0/1)."""
    if isinstance(node, ast.Constant):
        value = node.value
        assert isinstance(value, int | float)  # checked by _check_number
        return value
    if isinstance(node, ast.Name):
        return env[node.id]
    if isinstance(node, ast.BinOp):
        return _BINOPS[type(node.op)](_value(node.left, env), _value(node.right, env))
    if isinstance(node, ast.UnaryOp):
        v = _value(node.operand, env)
        return (not v) if isinstance(node.op, ast.Not) else (-v if isinstance(node.op, ast.USub) else +v)
    if isinstance(node, ast.BoolOp):
        parts = (bool(_value(v, env)) for v in node.values)
        return all(parts) if isinstance(node.op, ast.And) else any(parts)
    assert isinstance(node, ast.Compare)
    sides = [_value(s, env) for s in (node.left, *node.comparators)]
    return all(_CMPOPS[type(op)][1](x, y) for op, x, y in zip(node.ops, sides, sides[1:], strict=False))


# --- the verdict ------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Clause:
    """One top-level `and` clause, judged: its text, whether it held, and what it read ("tps_ratio 0.41 < 0.95
    (tok/s 30.1 vs 73.4 before)")."""

    text: str
    passed: bool
    said: str


@dataclass(frozen=True)
class Verdict:
    passed: bool
    clauses: tuple[Clause, ...]
    why: str  # one sentence: the clauses that failed with their numbers, or every clause's when all held


_FORMATS = {"tps": ".1f", "tps_before": ".1f", "acceptance": ".2f", "acceptance_before": ".2f", "ttft": ".3f",
            "ttft_before": ".3f"}


def _fmt(value: Value, spec: str = ".4g") -> str:
    if value is None:
        return "n/a"
    if isinstance(value, bool | int):
        return str(int(value))
    return format(value, spec)


def _fmt_var(name: str, value: Value) -> str:
    return _fmt(value, ".2f" if name.endswith("_ratio") else _FORMATS.get(name, ".4g"))


def _names(node: ast.expr) -> list[str]:
    """The variables a clause reads, in the order it names them."""
    found = sorted((n for n in ast.walk(node) if isinstance(n, ast.Name)), key=lambda n: (n.lineno, n.col_offset))
    return list(dict.fromkeys(n.id for n in found))


def _tps_context(names: Sequence[str], c: Comparison) -> str:
    worst = c.worst if "tps_ratio" in names else None
    if worst is not None and worst.concurrency != c.levels[0].concurrency:
        return f"tok/s {_fmt(worst.tps_after, '.1f')} vs {_fmt(worst.tps_before, '.1f')} before " \
               f"at concurrency {worst.concurrency}"
    return f"tok/s {_fmt(c.tps_after, '.1f')} vs {_fmt(c.tps_before, '.1f')} before"


def _context(names: Sequence[str], c: Comparison) -> str:
    """The measurements behind the names a clause read, in parentheses."""
    read = set(names)
    parts = []
    if read & {"tps", "tps_before", "tps_ratio"}:
        parts.append(_tps_context(names, c))
    if read & {"acceptance", "acceptance_before", "acceptance_ratio"}:
        parts.append(f"mean acceptance length {_fmt(c.acceptance_after, '.2f')} vs "
                     f"{_fmt(c.acceptance_before, '.2f')} before")
    if read & {"ttft", "ttft_before", "ttft_ratio"}:
        parts.append(f"TTFT {_fmt(c.ttft_after, '.3f')} s vs {_fmt(c.ttft_before, '.3f')} s before")
    if "bugs" in read and c.bugs:
        parts.append(("bug: " if len(c.bugs) == 1 else "bugs: ") + "; ".join(c.bugs))
    return f" ({'; '.join(parts)})" if parts else ""


def _number(node: ast.expr, value: Number, digits: int | None) -> str:
    if isinstance(node, ast.Constant):
        return _text(node)[0]
    if digits:
        return format(value, f".{digits}g")
    return _fmt_var(node.id, value) if isinstance(node, ast.Name) else _fmt(value)


def _side(node: ast.expr, number: str) -> str:
    if isinstance(node, ast.Constant):
        return number
    return f"{node.id} {number}" if isinstance(node, ast.Name) else f"{_text(node)[0]} ({number})"


def _said_compare(node: ast.Compare, held: bool, env: Mapping[str, Number]) -> str:
    """`x op y` as read: the values, and the operator that held ("tps_ratio 0.41 < 0.95")."""
    symbol = _CMPOPS[type(node.ops[0])][0]
    right_node = node.comparators[0]
    left, right = _value(node.left, env), _value(right_node, env)
    for digits in (None, 4, 6, 10, 17):  # a value that rounds to the other side's shows the digits that decide
        a, b = _number(node.left, left, digits), _number(right_node, right, digits)
        if left == right or a != b:
            break
    return f"{_side(node.left, a)} {symbol if held else _NEGATED[symbol]} {_side(right_node, b)}"


def _judge_clause(node: ast.expr, c: Comparison) -> Clause:
    text = _text(node)[0]
    names = _names(node)
    variables = c.variables
    context = _context(names, c)
    unmeasured = [n for n in names if variables[n] is None]
    if unmeasured:
        return Clause(text, False, f"{', '.join(unmeasured)} not measured{context}")
    env = {n: v for n, v in variables.items() if v is not None}
    try:
        held = bool(_value(node, env))
        if isinstance(node, ast.Compare) and len(node.ops) == 1:
            said = _said_compare(node, held, env)
        else:
            read = ", ".join(f"{n} {_fmt_var(n, env[n])}" for n in names)
            said = f"{text} is {'true' if held else 'false'}" + (f": {read}" if read else "")
    except ArithmeticError as exc:  # a division by zero, an overflow: the clause cannot hold
        return Clause(text, False, f"{text}: {exc}{context}")
    return Clause(text, held, said + context)


@dataclass(frozen=True)
class Gate:
    """A parsed gate: `text` is the normalized expression plans and reports show."""

    text: str
    _nodes: tuple[ast.expr, ...] = field(compare=False, repr=False)  # the top-level `and` clauses, checked

    def judge(self, c: Comparison) -> Verdict:
        judged = tuple(_judge_clause(node, c) for node in self._nodes)
        failed = [j for j in judged if not j.passed]
        why = "; ".join(j.said for j in (failed or judged))
        return Verdict(not failed, judged, why)


def parse_gate(text: str) -> Gate:
    """The expression as a Gate, or a GateError that says what is wrong (before anything runs)."""
    source = text.strip()
    if not source:
        raise _error(f"the expression is empty; the default is '{DEFAULT_GATE}'")
    if len(source) > MAX_LENGTH:
        raise _error(f"the expression is longer than {MAX_LENGTH} characters")
    try:
        tree = ast.parse(source, mode="eval")
    except SyntaxError as exc:
        shown = " ".join(source.split())
        shown = shown if len(shown) <= 80 else shown[:79] + "…"
        where = f"line {exc.lineno} column {exc.offset}" if (exc.lineno or 1) > 1 else f"column {exc.offset}"
        raise _error(f"'{shown}' does not parse ({exc.msg} at {where if exc.offset else 'the end'})") from None
    except (ValueError, RecursionError, MemoryError):  # a null byte; nesting the parser itself refuses
        raise _error("the expression does not parse") from None
    _check_condition(tree.body)  # bounds the depth, so what walks the tree below stays far from the recursion limit
    return Gate(_text(tree.body)[0], tuple(_clauses_of(tree.body)))
