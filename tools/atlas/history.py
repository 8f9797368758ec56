"""The code's history, per release: every function's lines (as a traceback prints them: stripped), and vLLM's
C++/CUDA sources (the files of `csrc/`, and the messages their `TORCH_CHECK`s raise).

A traceback frame names a file, a function and the code line under it. With each release's functions read here,
the atlas says in which releases that line exists in that function (a regression candidate when the user's
release is the first that has it; "changed in X" when a later release no longer has it). Lines are kept as
32-bit CRCs of their stripped text: enough to tell one line from another in one function, a fraction of the text.
"""

from __future__ import annotations

import ast
import re
import zlib

# a line a traceback never shows (nothing runs there): blank, a comment, a lone bracket
_SKIP = re.compile(r"^(?:#.*|[\])}(\[{,:]*|\"\"\"|''')$")


def line_hash(text: str) -> int:
    """The key of a code line: its text stripped, as Python's traceback prints it under a frame; 16 bits, which
    within one function (tens of lines) tells lines apart but for a chance in thousands."""
    return zlib.crc32(text.strip().encode("utf-8", "replace")) & 0xFFFF


def _blocks(node: ast.stmt) -> list[list[ast.stmt]]:
    out = [getattr(node, f) for f in ("body", "orelse", "finalbody") if isinstance(getattr(node, f, None), list)]
    out += [h.body for h in getattr(node, "handlers", []) or []]
    return out


def functions(tree: ast.Module, source: str) -> dict[str, tuple[int, list[int]]]:
    """Each function of a module (`Class.method`, nested as `outer.inner`; module level as `<module>`): its first
    line and the hashes of its lines, in order (a nested function's lines are its own, not its parent's)."""
    lines = source.splitlines()
    out: dict[str, tuple[int, list[int]]] = {}
    owned: set[int] = set()

    def visit(body: list[ast.stmt], qual: list[str]) -> None:
        for node in body:
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                name = ".".join([*qual, node.name])
                visit(node.body, [*qual, node.name])  # inner first: their lines are not the outer's
                start = node.lineno
                end = node.end_lineno or node.lineno
                mine = [i for i in range(start, end + 1) if i not in owned]
                owned.update(mine)
                hashes = [line_hash(lines[i - 1]) for i in mine if i - 1 < len(lines)
                          and not _SKIP.match(lines[i - 1].strip())]
                if name not in out:  # a redefinition under `if TYPE_CHECKING` keeps the first
                    out[name] = (start, hashes)
            elif isinstance(node, ast.ClassDef):
                visit(node.body, [*qual, node.name])
            else:  # `if`/`try`/`with` at module or class level hold definitions too
                for sub in _blocks(node):
                    visit(sub, qual)

    visit(tree.body, [])
    rest = [line_hash(t) for i, t in enumerate(lines, 1) if i not in owned and t.strip()
            and not _SKIP.match(t.strip())]
    out["<module>"] = (1, rest)
    return out


# `TORCH_CHECK(cond, "a", x, "b")`, `TORCH_CHECK_NOT_IMPLEMENTED(...)`, `AT_ERROR(...)`, `STD_TORCH_CHECK(...)`
_CHECK = re.compile(r"\b(TORCH_CHECK(?:_NOT_IMPLEMENTED|_VALUE|_TYPE|_INDEX)?|STD_TORCH_CHECK|AT_ERROR|"
                    r"TORCH_INTERNAL_ASSERT|printf|fprintf)\s*\(")
_STRING = re.compile(r'"((?:[^"\\]|\\.)*)"')
_PRINTF_CONV = re.compile(r"(%[-+ #0]*\d*(?:\.\d+)?[hlzjt]*[diouxXeEfgGcspn])")
_FUNC_HEAD = re.compile(r"^[\w:<>,\s*&]+?\b(\w+)\s*\([^;{}]*\)\s*(?:const\s*)?\{", re.MULTILINE)


def _call_args(text: str, start: int) -> tuple[list[str], int] | None:
    """The top-level arguments of the call whose `(` is at `start`, and the index after its `)`."""
    depth, args, cur, i, quote = 0, [], [], start, None
    while i < len(text):
        c = text[i]
        if quote:
            cur.append(c)
            if c == "\\" and i + 1 < len(text):
                cur.append(text[i + 1])
                i += 2
                continue
            if c == quote:
                quote = None
        elif c in "\"'":
            quote = c
            cur.append(c)
        elif c == "(":
            depth += 1
            if depth > 1:
                cur.append(c)
        elif c == ")":
            depth -= 1
            if depth == 0:
                args.append("".join(cur).strip())
                return args, i + 1
            cur.append(c)
        elif c == "," and depth == 1:
            args.append("".join(cur).strip())
            cur = []
        else:
            cur.append(c)
        i += 1
        if i - start > 4000:
            return None
    return None


SEP = "\x00"
_KEYWORDS = frozenset({"if", "else", "for", "while", "switch", "catch", "return", "sizeof", "do", "case", "defined",
                       "static_assert", "decltype", "alignof", "__launch_bounds__", "template"})


def cpp_checks(path: str, text: str) -> list[tuple[str, str, int, str]]:
    """(function, template, line, condition) of each check in a C++/CUDA file that carries a message: the
    string pieces are the template's literals, the other pieces its holes."""
    heads = [(m.start(), m.group(1)) for m in _FUNC_HEAD.finditer(text) if m.group(1) not in _KEYWORDS]
    out = []
    for m in _CHECK.finditer(text):
        got = _call_args(text, m.end() - 1)
        if got is None:
            continue
        args, _ = got
        kind = m.group(1)
        if kind == "fprintf" and args:
            args = args[1:]  # the stream
        parts: list[str] = [""]
        cond = ""
        if kind in ("printf", "fprintf"):
            # a kernel's printf before it traps, or a host-side message: the format string is the template, each
            # conversion a hole
            fmt = _STRING.findall(args[0]) if args else []
            if not fmt:
                continue
            fmt_text = "".join(bytes(s, "utf-8").decode("unicode_escape", "replace") for s in fmt)
            pieces = _PRINTF_CONV.split(fmt_text)
            parts = [pieces[0]]
            for k in range(1, len(pieces), 2):
                parts += [pieces[k], pieces[k + 1]]
        else:
            has_cond = kind not in ("AT_ERROR",)
            cond, rest = (args[0], args[1:]) if has_cond and args else ("", args)
            for piece in rest:
                strings = _STRING.findall(piece)
                if strings and _STRING.sub("", piece).strip(" \n\t") == "":
                    parts[-1] += "".join(bytes(s, "utf-8").decode("unicode_escape", "replace") for s in strings)
                else:
                    parts += [piece.strip()[:60], ""]
        if sum(len(p) for p in parts[::2]) < 8:
            continue
        line = text.count("\n", 0, m.start()) + 1
        func = next((name for pos, name in reversed(heads) if pos < m.start()), path.rsplit("/", 1)[-1])
        out.append((func, SEP.join(parts), line, " ".join(cond.split())[:200]))
    return out
