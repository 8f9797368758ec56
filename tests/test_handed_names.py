"""A module hands on (through `__all__`) only names a contract makes it hand on: a front door may not import the
store, the engine or the core's knowledge base, so the use case it calls gives it their types. Any other importer
imports a name from the module that defines it."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

MAY_HAND_ON: dict[str, set[str]] = {
    "bot.adapters.cli": {"app", "main"},  # the console script's entry point, bot.adapters.cli:main
    "bot.app.chat": {"AuditNotWritten", "AuditRow", "Progress", "ProgressFn"},  # the store's and the engine's
    "bot.app.watching.records": {"Store"},  # the store, for the front doors' records commands
    "bot.app.evaluation.kb": {"FAMILY_TITLES"},  # the core's knowledge base, for `specops kb list`
    "bot.engine.hosts": {"Forward", "HostVanished", "RunResult"},  # the remote layer's, for the use cases
}


def _handed(path: Path) -> set[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    defined: set[str] = set()
    listed: list[str] = []
    for node in tree.body:
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            defined.add(node.name)
        elif isinstance(node, ast.Assign | ast.AnnAssign):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            for target in targets:
                if isinstance(target, ast.Name) and target.id == "__all__" and isinstance(node.value, ast.List):
                    listed = [e.value for e in node.value.elts if isinstance(e, ast.Constant)]
                elif isinstance(target, ast.Name):
                    defined.add(target.id)
    return {name for name in listed if name not in defined}


def _module(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def test_only_the_listed_modules_hand_names_on() -> None:
    handed = {_module(p): names for p in (ROOT / "bot").rglob("*.py")
              if "__pycache__" not in p.parts and "migrations" not in p.parts and (names := _handed(p))}
    extra = {m: sorted(names - MAY_HAND_ON.get(m, set())) for m, names in handed.items()}
    assert {m: names for m, names in extra.items() if names} == {}
