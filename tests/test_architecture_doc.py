"""docs/ARCHITECTURE.md is true to the tree: every module its Rooms name exists, and every package is named."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DOC = ROOT / "docs" / "ARCHITECTURE.md"
_PACKAGE = re.compile(r"^( *)([a-z_]+(?:/[a-z_]+)*)/(?= |$)")
_FOLDER = re.compile(r"(?<![\w./`-])((?:[a-z_]+/)+)(?=[ ,;:)]|$)")
_MODULE = re.compile(r"(?<![\w./`-])((?:[a-z_]+/)*[a-z_0-9]+\.py)\b")


def _rooms() -> list[str]:
    text = DOC.read_text(encoding="utf-8")
    block = text.split("## Rooms", 1)[1].split("```", 2)[1]
    return block.splitlines()


def _named() -> tuple[set[Path], list[str]]:
    """The packages the Rooms name, and the module names that resolve to no file."""
    packages: set[Path] = set()
    missing: list[str] = []
    stack: list[tuple[int, Path]] = []
    for line in _rooms():
        head = _PACKAGE.match(line)
        if head:
            indent = len(head[1])
            while stack and stack[-1][0] >= indent:
                stack.pop()
            base = stack[-1][1] if stack else ROOT
            where = base / head[2]
            if not where.is_dir() and (ROOT / "bot" / head[2]).is_dir():
                where = ROOT / "bot" / head[2]
            packages.add(where)
            stack.append((indent, where))
        elif re.match(r"^ {0,6}[a-z_]+\.py ", line):  # a module at a package's level: a sibling of its packages
            indent = len(line) - len(line.lstrip())
            while stack and stack[-1][0] >= indent:
                stack.pop()
        bases = [p for _, p in reversed(stack)] + [ROOT / "bot", ROOT]
        for folder in _FOLDER.findall(line):
            packages.update(base / folder for base in bases if (base / folder).is_dir())
        for name in _MODULE.findall(line):
            if not any((base / name).is_file() or any(base.glob(f"*/{name}")) for base in bases):
                missing.append(name)
            packages.update((base / name).parent for base in bases if (base / name).is_file())
    return packages, missing


def test_every_module_the_rooms_name_exists() -> None:
    assert _named()[1] == []


def test_every_package_is_named() -> None:
    named = {p.resolve() for p in _named()[0]}
    packages = {p.parent.resolve() for p in (ROOT / "bot").rglob("__init__.py") if "__pycache__" not in p.parts}
    assert sorted(str(p.relative_to(ROOT)) for p in packages - named) == []
