"""The code's history: in which vLLM releases a function, and a line of it, exist (`knowledge/atlas/history.bin.gz`,
written by tools/atlas/build.py from each release's source).

A traceback frame names a file, a function and the code line under it. Against the releases the atlas read:
- the user's release has the line and a later release no longer has it in that function: the code changed there
  ("changed in X": the compare link, and the upgrade past it);
- the user's release is the first that has the line (or the function): the code is new there, a regression
  candidate ("first in X": pin the release before it while it is reported);
- the line is in every release read up to the newest: nothing upstream changed it yet.

Lines are 16-bit hashes of their stripped text (tools/atlas/history.py): read within one function they tell lines
apart but for a chance in thousands. The file is read once per process, only when a frame needs it.
"""

from __future__ import annotations

import gzip
import json
import struct
import zlib
from bisect import bisect_left
from dataclasses import dataclass
from functools import lru_cache
from importlib import resources

from packaging.version import InvalidVersion, Version

MAGIC = b"SPH1"
DATA = "history.bin.gz"
REPO = "vllm-project/vllm"


def line_hash(text: str) -> int:
    return zlib.crc32(text.strip().encode("utf-8", "replace")) & 0xFFFF


@dataclass(frozen=True)
class LineHistory:
    """One line of one function across the releases read."""

    file: str
    function: str
    user_release: str | None  # the user's release, when the atlas read it (or the nearest read before it)
    has_line: bool | None  # does the user's release have the line in this function (None: release unknown)
    first_with_line: str  # the first release read that has it
    last_with_line: str  # the last release read that has it (the newest read: still there)
    changed_in: str | None  # the first release after the user's that no longer has the line
    function_changed_in: str | None  # the first release after the user's whose function body differs
    introduced_in: str | None  # the user's release, when it is the first that has the line
    previous: str | None  # the release read before the user's
    newest: str  # the newest release read
    # the user's release lies between two read ones, the earlier without the line and the later with it: the line
    # came in after the earlier one, with the user's release or one just before it (the earlier one to pin)
    new_since: str | None = None

    def compare_url(self, later: str) -> str:
        base = self.user_release or self.first_with_line
        return f"https://github.com/{REPO}/compare/v{base}...v{later}"


class History:
    def __init__(self, raw: bytes) -> None:
        if raw[:4] != MAGIC:
            raise ValueError("not a history file")
        (n,) = struct.unpack_from("<I", raw, 4)
        header = json.loads(raw[8:8 + n])
        self.releases: list[str] = header["releases"]
        self._versions = [Version(r) for r in self.releases]
        self._entries = memoryview(raw)[8 + n:]
        self._file_text: dict[str, str] = header["files"]  # file -> its functions, as JSON text
        self._names: set[str] | None = None  # the files' own names, built the first time one is asked for
        self._file_funcs: dict[str, dict[str, list[tuple[str, int, int, str]]]] = {}
        self._classes: dict[str, str] | None = None  # class -> a file that defines it
        self._methods: dict[str, list[tuple[str, str]]] = {}  # method -> (class, file) that define it
        self._functions: dict[str, list[str]] | None = None  # module-level function -> the files that define it

    def _class_index(self) -> dict[str, str]:
        """Built once, when a question about classes comes (every file's functions read: ~0.1 s); built aside and
        set whole, so a thread asking meanwhile never sees half of it."""
        if self._classes is None:
            classes: dict[str, str] = {}
            methods: dict[str, list[tuple[str, str]]] = {}
            for file, text in self._file_text.items():
                for qual, *_ in json.loads(text):
                    if "." in qual:
                        cls, _, method = qual.partition(".")
                        classes.setdefault(cls, file)
                        if "." not in method:
                            methods.setdefault(method, []).append((cls, file))
            self._methods = methods
            self._classes = classes
        return self._classes

    def release_at(self, version: str | None) -> str | None:
        """The user's release as read, or the newest read before it (None: unknown or older than all)."""
        ri = self._index(version)
        return self.releases[ri] if ri is not None else None

    def has_folder(self, prefix: str) -> bool:
        """Does any release read have a file under this folder of vLLM's package (`vllm/v1/`)?"""
        return any(f.startswith(prefix) for f in self._file_text)

    def has_file_named(self, name: str) -> bool:
        """Does any release read have a file of this name anywhere in vLLM's package (`arctic_proposer.py`)?"""
        if self._names is None:
            self._names = {f.rsplit("/", 1)[-1] for f in self._file_text}
        return name in self._names

    def has_file(self, path: str) -> bool:
        """Is it a file of vLLM's package in any release read (`vllm/engine/llm_engine.py`)?"""
        return path in self._file_text

    def has_class(self, name: str) -> bool:
        """Does any release read define a class of this name (at the top of a module)?"""
        return name in self._class_index()

    def files_of_function(self, name: str) -> list[str]:
        """The files of vLLM's package that define a module-level function of this name in some release read."""
        if self._functions is None:
            index: dict[str, list[str]] = {}
            for file, text in self._file_text.items():
                for qual, *_ in json.loads(text):
                    if "." not in qual and qual != "<module>":
                        index.setdefault(qual, []).append(file)
            self._functions = index
        return list(self._functions.get(name, ()))

    def file_of_class(self, name: str) -> str | None:
        """A file of vLLM's package that defines a class of this name in some release read."""
        return self._class_index().get(name)

    def classes_with(self, method: str) -> list[tuple[str, str]]:
        """(class, file) of every class of the releases read with a method of this name."""
        self._class_index()
        return list(self._methods.get(method, ()))

    def _funcs(self, file: str) -> dict[str, list[tuple[str, int, int, str]]]:
        """A file's functions by their bare name (a traceback prints `load_weights`, not `Class.load_weights`)."""
        got = self._file_funcs.get(file)
        if got is None:
            got = {}
            for qual, start, count, bodies in json.loads(self._file_text.get(file, "[]")):
                got.setdefault(qual.rsplit(".", 1)[-1], []).append((qual, start, count, bodies))
            self._file_funcs[file] = got
        return got

    def function_releases(self, file: str, function: str) -> list[str]:
        """The releases read that have a function of that (bare) name in the file."""
        got: set[int] = set()
        for _qual, _start, _count, bodies in self._funcs(file).get(function, []):
            for v in bodies.split(";"):
                got.update(_members(v))
        return [self.releases[i] for i in sorted(got)]

    def class_releases(self, file: str, cls: str) -> list[str]:
        """The releases read whose `file` defines the class `cls` with a method (a class of attributes alone is not
        read)."""
        got: set[int] = set()
        for funcs in self._funcs(file).values():
            for qual, _start, _count, bodies in funcs:
                if qual.startswith(cls + "."):
                    for v in bodies.split(";"):
                        got.update(_members(v))
        return [self.releases[i] for i in sorted(got)]

    def module_releases(self, file: str) -> list[str]:
        """The releases read that have the module (a file of vLLM's package)."""
        got: set[int] = set()
        for qual, _start, _count, bodies in self._funcs(file).get("<module>", []):
            if qual == "<module>":
                for v in bodies.split(";"):
                    got.update(_members(v))
        return [self.releases[i] for i in sorted(got)]

    def _index(self, version: str | None) -> int | None:
        """The index of the user's release, or of the newest release read before it."""
        if not version:
            return None
        try:
            v = Version(Version(version.strip().lstrip("v")).public)
        except InvalidVersion:
            return None
        i = bisect_left(self._versions, v)
        if i < len(self._versions) and self._versions[i] == v:
            return i
        return i - 1 if i > 0 else None

    def _line_releases(self, file: str, function: str, code: str) -> tuple[list[int], str] | None:
        """The indexes of the releases whose `function` of `file` has the line, and that function's bodies."""
        want = line_hash(code)
        for _qual, start, count, bodies in self._funcs(file).get(function, []):
            rels: list[int] = []
            for k in range(start, start + count):
                h, a, b = struct.unpack_from("<HBB", self._entries, 4 * k)
                if h == want:
                    rels += range(a, b + 1)
            if rels:
                return sorted(set(rels)), bodies
        return None

    def releases_fitting(self, lines: list[tuple[str, str, str]]) -> list[str]:
        """The releases read whose source has every (file, function, code line) given that any release has: where a
        traceback's frames fit, when the log does not say its release. A line no release has (a patched build, a
        statement wrapped before its first line) says nothing; lines that fit no release together say nothing."""
        fit: set[int] | None = None
        for file, function, code in lines:
            got = self._line_releases(file, function, code)
            if got is not None:
                fit = set(got[0]) if fit is None else fit & set(got[0])
        return [self.releases[i] for i in sorted(fit)] if fit else []

    def line(self, file: str, function: str, code: str, version: str | None) -> LineHistory | None:
        """The history of `code` (a stripped line) in `function` of `file` (a repository path `vllm/…`); None when
        no release read has that line in a function of that name there."""
        got = self._line_releases(file, function, code)
        if got is None:
            return None
        rels, versions = got[0], [_members(v) for v in got[1].split(";")]
        ri = self._index(version)
        present = None if ri is None else ri in rels
        later = list(range(ri + 1, len(self.releases))) if ri is not None else []
        changed = next((self.releases[r] for r in later if r not in rels), None) if present else None
        body_at = next((v for v in versions if ri in v), None) if ri is not None else None
        fn_changed = (next((self.releases[r] for r in later if r not in body_at), None)
                      if body_at is not None else None)
        introduced = self.releases[ri] if present and ri == rels[0] and ri > 0 else None
        between = (ri is not None and version is not None and not present and rels[0] == ri + 1
                   and _after(version, self._versions[ri]))
        return LineHistory(
            file=file, function=function,
            user_release=self.releases[ri] if ri is not None else None, has_line=present,
            first_with_line=self.releases[rels[0]], last_with_line=self.releases[rels[-1]], changed_in=changed,
            function_changed_in=fn_changed, introduced_in=introduced,
            previous=self.releases[ri - 1] if ri is not None and ri > 0 else None, newest=self.releases[-1],
            new_since=self.releases[ri] if between and ri is not None else None)


def _after(version: str, release: Version) -> bool:
    """Is `version` a public release after `release` (a dev build or an rc is placed nowhere)?"""
    try:
        v = Version(version)
    except InvalidVersion:
        return False
    return not v.is_prerelease and not v.is_devrelease and v > release


def _members(runs_text: str) -> list[int]:
    out: list[int] = []
    for item in runs_text.split(","):
        a, _, b = item.partition("-")
        out.extend(range(int(a), int(b or a) + 1))
    return out


@lru_cache(maxsize=1)
def load_history() -> History | None:
    """The history the wheel ships, or None when it does not (a tree built without it)."""
    ref = resources.files("bot.core") / "knowledge" / "atlas" / DATA
    try:
        raw = ref.read_bytes()
    except (FileNotFoundError, OSError):
        return None
    return History(gzip.decompress(raw))
