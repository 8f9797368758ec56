"""The message atlas: every message vLLM (and huggingface_hub, transformers) raises or logs, read from
the released source of each release (`tools/atlas/build.py` writes `knowledge/atlas/`).

A log line names its site: the file, the function, the condition that guards the raise, the release
range that has it, and the config knobs (with the CLI flag of that release) the condition or the
message talks about, and vLLM's environment variables (`vllm/envs.py` of each release) that they read or
name. The source of each fact is the release's own file and line, linked on GitHub.

Matching cost does not grow with the atlas: each site's longest literal chunk of its first line (chosen
at build time) is one needle of one Aho-Corasick automaton; only the sites whose needle occurs in the
line are checked against a regex built from their template. The atlas is read and the automaton
built the first time it is needed, once per process.
"""

from __future__ import annotations

import gzip
import hashlib
import json
import re
from bisect import bisect_left
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, replace
from functools import lru_cache
from importlib import resources
from typing import Any

import ahocorasick_rs
from packaging.version import Version

from bot.core.atlas_tables import (
    CONFIG_FILES,
    Knob,
    ReleaseTables,
    config_owner,
    parse_runs,
    runs_has,
    runs_members,
)
from bot.core.atlas_words import (
    after_foreign_prefix,
    condition_text,
    coverage,
    credible,
    split_line,
    up_to_first_line,
)
from bot.core.parts import other_platform, part_of, repo_path
from bot.core.template_match import Template

SEP = "\x00"  # between a stored template's literal and hole parts (tools/atlas/extract.py)
DATA = "atlas.json.gz"
REPOS = {"vllm": "vllm-project/vllm", "huggingface_hub": "huggingface/huggingface_hub",
         "transformers": "huggingface/transformers"}

# overlapping, so `self.scheduler_config.max_num_seqs` yields `scheduler_config.max_num_seqs` too
_ATTR = re.compile(r"(?=\b(self|config|[a-z_]*_config)\.([a-z_][a-z0-9_]*)\b)")
_ENVS_REF = re.compile(r"\benvs\.([A-Z][A-Z0-9_]+)\b")  # `envs.VLLM_X` in a condition or a hole
_ENV_NAME = re.compile(r"(?<![\w.])(VLLM_[A-Z0-9_]*[A-Z0-9])\b")  # VLLM_X as a message or a condition spells it
_MAX_MESSAGE = 4000
# a line retyped by hand loses its case and quotes, and releases differ in quoting a flag: read it folded, unquoted
_QUOTES = str.maketrans("", "", "\u2018\u2019\u201c\u201d`\u00b4\"'")


_FOLDED_EXC = re.compile(r"^(?:[a-z_]\w*\.)*[a-z]\w*(?:error|exception): ")


def _fold(text: str) -> str:
    low = text.lower()
    return (low if len(low) == len(text) else text).translate(_QUOTES)


@dataclass(frozen=True)
class Site:
    id: str
    package: str
    file: str
    function: str
    kind: str  # "raise" | "log"
    exc: str | None
    level: str | None
    template: str  # holes as {source text}; literal braces doubled
    condition: str | None
    first: str
    last: str
    part: str


@dataclass(frozen=True)
class AtlasMatch:
    site: Site
    exact: bool  # the whole (visible) message matched the template, not just its literal words
    holes: dict[str, str]
    release: str  # the release whose line is linked: the user's if it has the site, else the nearest
    line: int
    url: str
    in_release: bool | None  # does the user's release have this site (None: release unknown)
    gone_after: str | None  # the last release that has it, when a newer release in the atlas no longer has it
    fixed_in: str | None  # the first atlas release after gone_after
    compare_url: str | None
    knobs: tuple[Knob, ...]
    condition_text: str | None
    rivals: tuple[str, ...] = ()  # other files that raise the same sentence, as well matched
    # the first release after the user's that raises this message in the same file under another condition, and
    # that condition (the check was rewritten; the message was kept)
    check_changed: tuple[str, str] | None = None


_CONDITION_WORDS = frozenset({"and", "or", "not", "is", "in", "None", "True", "False", "self", "where", "if", "else"})


def _read_names(condition: str) -> frozenset[str]:
    """The names a check reads, whoever holds them (`self.x`, `config.x` and `x` are one), its numbers and whether it
    negates: a check that reads the same in other words is the same check."""
    bare = condition.split(" (where ", 1)[0]
    names = frozenset(n.rsplit(".", 1)[-1] for n in re.findall(r"[A-Za-z_][\w.]{0,200}", bare)) - _CONDITION_WORDS
    # the numbers it compares with and whether it negates are the check too (`n > 1` is not `n > 5`)
    return names | frozenset(re.findall(r"(?<![\w.])\d+(?:\.\d+)?", bare)) \
        | frozenset(w for w in ("not",) if re.search(r"\bnot\b|!=", bare))


def _readable(template_parts: list[str]) -> str:
    out = []
    for i, p in enumerate(template_parts):
        out.append("{" + p + "}" if i % 2 else p.replace("{", "{{").replace("}", "}}"))
    return "".join(out)


# a site's score against a line (exact, pinned, cover, agrees, near, last release), whether it matched the
# whole message, and its holes' values
_Scored = tuple[tuple[Any, ...], bool, dict[str, str]]


class Atlas(ReleaseTables):
    """The compiled atlas: a few columns per site, a string table and one automaton over the needles, over the
    release tables (atlas_tables.py) the sites' knobs are read from."""

    def __init__(self, data: dict[str, Any]) -> None:
        super().__init__(data)
        self.packages: tuple[str, ...] = tuple(data["packages"])
        cols = data["sites"]
        self._pkg: list[int] = cols["pkg"]
        self._file: list[int] = cols["file"]
        self._func: list[int] = cols["func"]
        self._kind: list[int] = cols["kind"]
        self._who: list[int] = cols["who"]
        self._tmpl: list[str] = cols["tmpl"]
        self._cond: list[int] = cols["cond"]
        self._needle: list[int] = cols["needle"]
        self._rel_text: list[str] = cols["rel"]
        self._lines_text: list[str] = cols["lines"]
        self._rel_cache: dict[int, list[int]] = {}
        self._lines_cache: dict[int, list[int]] = {}
        # one automaton over the distinct needles; needle -> the sites that share it
        by_needle: dict[int, list[int]] = {}
        for i, n in enumerate(self._needle):
            if n >= 0:
                by_needle.setdefault(n, []).append(i)
        self._needle_ids = list(by_needle)
        self._needle_sites = [by_needle[n] for n in self._needle_ids]
        self._automaton = ahocorasick_rs.AhoCorasick([self._strings[n] for n in self._needle_ids])
        self._folded: ahocorasick_rs.AhoCorasick | None = None  # built on the first line nothing matches
        self._templates: dict[tuple[int, bool, bool], Template | None] = {}
        self._by_file: dict[str, list[int]] | None = None
        self._class_files: dict[str, str] | None = None
        self._by_message: dict[tuple[int, int, str], list[int]] | None = None

    def __len__(self) -> int:
        return len(self._tmpl)

    # ---- releases ----------------------------------------------------------------------------------

    def _present(self, site: int, package: str, v: Version | None, exact_index: int | None) -> bool | None:
        if v is None:
            return None
        runs = self._rel(site)
        if exact_index is not None:
            return runs_has(runs, exact_index)
        vs = self._versions[package]
        i = bisect_left(vs, v)  # the atlas releases around an unread one agree, or it is unknown
        before = runs_has(runs, i - 1) if i > 0 else None
        after = runs_has(runs, i) if i < len(vs) else None
        if before is not None and after is not None:
            return before if before == after else None
        return None if after is None else (after if not after else None)

    def _nearest(self, site: int, package: str, v: Version | None) -> int:
        """The atlas release linked for a site: the newest one at or before the user's, else the oldest after."""
        members = runs_members(self._rel(site))
        if v is None:
            return members[-1]
        vs = self._versions[package]
        older = [i for i in members if vs[i] <= v]
        return older[-1] if older else members[0]

    def _rel(self, site: int) -> list[int]:
        runs = self._rel_cache.get(site)
        if runs is None:
            runs = self._rel_cache[site] = parse_runs(self._rel_text[site])
        return runs

    def _lines(self, site: int) -> list[int]:
        runs = self._lines_cache.get(site)
        if runs is None:
            runs = []
            for item in self._lines_text[site].split(","):
                span, _, line = item.partition(":")
                a, _, b = span.partition("-")
                runs.extend([int(a), int(b or a), int(line)])
            self._lines_cache[site] = runs
        return runs

    def _line_at(self, site: int, ri: int) -> int:
        runs = self._lines(site)
        for k in range(0, len(runs), 3):
            if runs[k] <= ri <= runs[k + 1]:
                return runs[k + 2]
        return runs[-1]

    # ---- sites -------------------------------------------------------------------------------------

    def _site(self, i: int) -> Site:
        pkg = self.packages[self._pkg[i]]
        rels = self.package_releases[pkg]
        members = runs_members(self._rel(i))
        file, func, who = self._strings[self._file[i]], self._strings[self._func[i]], self._strings[self._who[i]]
        raw = self._tmpl[i]
        digest = hashlib.blake2s(f"{who}{SEP}{raw}".encode(), digest_size=5).hexdigest()
        kind = "raise" if self._kind[i] == 0 else "log"
        return Site(id=f"{pkg}:{file}:{func}:{digest}", package=pkg, file=file, function=func, kind=kind,
                    exc=who if kind == "raise" else None, level=who if kind == "log" else None,
                    template=_readable(raw.split(SEP)),
                    condition=self._strings[self._cond[i]] if self._cond[i] >= 0 else None,
                    first=rels[members[0]], last=rels[members[-1]], part=self.part_of(file, func))

    def _parts(self, i: int, fold: bool) -> list[str]:
        parts = self._tmpl[i].split(SEP)
        return [_fold(p) if k % 2 == 0 else p for k, p in enumerate(parts)] if fold else parts

    def _compiled(self, i: int, first_line: bool, fold: bool = False) -> Template | None:
        key = (i, first_line, fold)
        if key not in self._templates:
            parts = self._parts(i, fold)
            if first_line:
                parts, cut = up_to_first_line(parts)
                if not cut:
                    self._templates[key] = None
                    return None
            self._templates[key] = Template.of(parts)
        return self._templates[key]

    def _files(self) -> dict[str, list[int]]:
        if self._by_file is None:
            self._by_file = {}
            for i, f in enumerate(self._file):
                self._by_file.setdefault(self._strings[f].rsplit("/", 1)[-1], []).append(i)
        return self._by_file

    def source_path(self, name: str) -> str | None:
        """vLLM's `csrc/…` source of a file name a message gives alone (`custom_all_reduce.cuh:455`), the newest when
        it moved within one part; None when no release has one, or folders of several parts do (the name is no part)."""
        paths = {p for i in self._files().get(name.rsplit("/", 1)[-1], [])
                 if (p := self._strings[self._file[i]]).startswith("csrc/")}
        return max(paths) if paths and len({part_of(p) for p in paths}) == 1 else None

    def class_file(self, name: str) -> str | None:
        """The vLLM file most of whose sites of a class of this name's methods (`NeuronWorker.x`) lie in; None when
        no release has such a class."""
        if self._class_files is None:  # built once, from the string tables: no Site is made per call
            counts: dict[str, Counter[str]] = {}
            vllm = self.packages.index("vllm")
            for i, f in enumerate(self._func):
                func = self._strings[f]
                if self._pkg[i] == vllm and "." in func:
                    counts.setdefault(func.split(".", 1)[0], Counter())[self._strings[self._file[i]]] += 1
            self._class_files = {cls: c.most_common(1)[0][0] for cls, c in counts.items()}
        return self._class_files.get(name)

    def knows_file(self, name: str) -> bool:
        """Does any release of any package the atlas reads print or raise from a file of this name (`camem.py`)?"""
        return name.rsplit("/", 1)[-1] in self._files()

    def match(self, message: str, *, version: str | None = None, exc: str | None = None, level: str | None = None,
              source_file: str | None = None, source_line: int | None = None) -> AtlasMatch | None:
        """The site a log line or an exception message comes from, or None when no site's words are in it."""
        parsed = split_line(message)
        text = parsed.message[:_MAX_MESSAGE]
        exc = exc or parsed.exc
        level = (level or parsed.level or "").lower() or None
        source_file = source_file or parsed.source_file
        source_line = source_line if source_line is not None else parsed.source_line
        if not text:
            return None
        found = self._match(text, version, exc, level, source_file, source_line, fold=False)
        if found is None:
            folded = _fold(text)
            if exc is None:  # `valueerror: …`: the class name lost its case with the rest
                folded = _FOLDED_EXC.sub("", folded, count=1)
            found = self._match(folded, version, None, level, source_file, source_line, fold=True)
        return found

    def _match(self, text: str, version: str | None, exc: str | None, level: str | None,
               source_file: str | None, source_line: int | None, *, fold: bool) -> AtlasMatch | None:
        base = source_file.rsplit("/", 1)[-1] if source_file else None
        pinned = self._pinned(base, source_line, version)
        verified = []
        for i in self._needle_hits(text, fold) | pinned:
            scored = self._verify(i, text, exc, level, i in pinned, version, fold)
            if scored is not None:
                verified.append((scored, i))
        if not verified:
            return None
        (key, exact, holes), best = self._best(verified, base, version is not None)
        # a message that moved (another file, a word changed) is still printed: "gone" only when no site that
        # reads this line about as well as the best one is in a later release
        pkg = self._pkg[best]
        latest = max(s[0][5] for s, j in verified if self._pkg[j] == pkg and s[0][2] >= 0.8 * key[2])
        return replace(self._result(best, exact, holes, version, latest),
                       rivals=self._rivals(verified, best, base, version is not None) if exact else ())

    def _needle_hits(self, text: str, fold: bool) -> set[int]:
        if fold and self._folded is None:
            self._folded = ahocorasick_rs.AhoCorasick([_fold(self._strings[n]) for n in self._needle_ids])
        automaton = self._folded if fold and self._folded is not None else self._automaton
        hits: set[int] = set()
        for needle in automaton.find_matches_as_indexes(text, overlapping=True):
            hits.update(self._needle_sites[needle[0]])
        return hits

    def _pinned(self, base: str | None, source_line: int | None, version: str | None) -> set[int]:
        """`[file.py:123]` and the release name one call site: it is a candidate even when its words are few."""
        if not base or source_line is None or version is None:
            return set()
        pinned: set[int] = set()
        for i in self._files().get(base, ()):
            ri, _ = self._index(self.packages[self._pkg[i]], version)
            if ri is not None and runs_has(self._rel(i), ri) and self._line_at(i, ri) == source_line:
                pinned.add(i)
        return pinned

    def _ranker(self, verified: list[tuple[_Scored, int]], base: str | None,
                versioned: bool) -> Callable[[tuple[_Scored, int]], tuple[Any, ...]]:
        # an exact match of a template that is mostly holes ("Model config {config}") must not beat a partial
        # match that covers far more of the line with its own words
        top = max(s[0][2] for s, _ in verified)

        def rank(item: tuple[_Scored, int]) -> tuple[Any, ...]:
            key, i = item[0][0], item[1]
            same_file = base is not None and self._strings[self._file[i]].rsplit("/", 1)[-1] == base
            # the user's release prints it, with about as many of the line's words: that site, before another
            # release's whose template happens to fit a pasted line cut short more exactly
            ours = versioned and key[4] == 0 and 5 * key[2] >= 4 * top
            # a tie between two platforms' copies of one sentence (cuda.py and rocm.py): CUDA's, the default one
            cuda = not other_platform(self._strings[self._file[i]])
            return (key[1], ours, key[0] and 2 * key[2] >= top, same_file, *key[2:], cuda, i)

        return rank

    def _best(self, verified: list[tuple[_Scored, int]], base: str | None, versioned: bool) -> tuple[_Scored, int]:
        return max(verified, key=self._ranker(verified, base, versioned))

    def _rivals(self, verified: list[tuple[_Scored, int]], best: int, base: str | None,
                versioned: bool) -> tuple[str, ...]:
        """Other files whose site reads the line exactly as well as the best one (the same sentence raised in two
        places, with nothing in the line — its file, its release — to tell them apart)."""
        rank = self._ranker(verified, base, versioned)
        ranked = {item[1]: rank(item)[:-3] for item in verified}  # without the newest-release and platform tiebreaks
        mine = self._strings[self._file[best]]
        return tuple(dict.fromkeys(self._strings[self._file[i]] for i, r in ranked.items()
                                   if r == ranked[best] and self._strings[self._file[i]] != mine))

    def _verify(self, i: int, text: str, exc: str | None, level: str | None, pinned: bool,
                version: str | None, fold: bool = False) -> _Scored | None:
        parts = self._parts(i, fold)
        holes = self._fullmatch(i, parts, text, fold)
        exact = holes is not None
        literal = sum(len(p.strip()) for p in up_to_first_line(parts)[0][::2])
        cover, seen = (literal, literal) if exact else coverage(parts, text)
        if not credible(parts, literal, cover, seen, holes, pinned=pinned, fold=fold):
            return None
        members = runs_members(self._rel(i))
        near = self._nearness(i, version, members)
        return (exact, pinned, cover, self._agreement(i, exc, level), near, members[-1]), exact, holes or {}

    def _fullmatch(self, i: int, parts: list[str], text: str, fold: bool) -> dict[str, str] | None:
        """The holes' values when the whole message (or its first line) matches the template, else None."""
        for first_line in (False, True):
            tmpl = self._compiled(i, first_line, fold)
            if tmpl is None:
                continue
            m = tmpl.match(text)
            if m is None and not fold:
                m = after_foreign_prefix(tmpl, parts[0], text)
            if m:
                names = parts[1::2]
                holes: dict[str, str] = {}
                for k, value in enumerate(m[0]):
                    holes.setdefault(names[k], value)
                return holes
        return None

    def _agreement(self, i: int, exc: str | None, level: str | None) -> int:
        """+1 when the line's exception class or level is the site's, -1 when it is another, 0 when unknown."""
        who = self._strings[self._who[i]]
        if self._kind[i] == 0:
            return (1 if who == exc else -1) if exc else 0
        if not level:
            return 0
        return 1 if who.split("_")[0] == level or (who == "exception" and level == "error") else -1

    def _nearness(self, i: int, version: str | None, members: list[int]) -> float:
        """0 when the user's release has the site; below 0 the farther (in release order) the site is from it."""
        pkg = self.packages[self._pkg[i]]
        ri, v = self._index(pkg, version if pkg == "vllm" else None)
        if ri is not None:
            return 0 if runs_has(self._rel(i), ri) else -1
        if v is None:
            return 0
        # a release the atlas did not read: the site nearest to it in release order
        at = bisect_left(self._versions[pkg], v)
        return -min(abs(m - at + (0.5 if m < at else 0.0)) for m in members)

    def _result(self, i: int, exact: bool, holes: dict[str, str], version: str | None,
                latest: int | None = None) -> AtlasMatch:
        site = self._site(i)
        pkg = site.package
        vllm_version = version
        if pkg != "vllm":
            version = None  # the user's release is vLLM's; a library's own release is not in the log
        ri, v = self._index(pkg, version)
        rels = self.package_releases[pkg]
        linked = ri if ri is not None and runs_has(self._rel(i), ri) else self._nearest(i, pkg, v)
        line = self._line_at(i, linked)
        repo = REPOS.get(pkg, "vllm-project/vllm")
        url = f"https://github.com/{repo}/blob/v{rels[linked]}/{site.file}#L{line}"
        # the message, not the call site: a message that moved to another file or function is still printed
        last = max(runs_members(self._rel(j))[-1] for j in self._same_message(i))
        if latest is not None:
            last = max(last, latest)
        gone_after = fixed_in = compare = None
        if last < len(rels) - 1:
            gone_after, fixed_in = rels[last], rels[last + 1]
            if v is None or v < Version(fixed_in):  # the diff that removed it, from where the user stands
                start = str(v) if v is not None else gone_after
                compare = f"https://github.com/{repo}/compare/v{start}...v{fixed_in}"
        if pkg == "vllm":
            knobs = self.knobs_for(self._names(i), version, config_owner(site.file, site.function))
        else:  # a library's message that names a setting vLLM passes it (`trust_remote_code=True`)
            words = re.findall(r"(?<![.\w])([a-z][a-z0-9]*_[a-z0-9_]+)\b", " ".join(self._tmpl[i].split(SEP)[::2]))
            knobs = self.knobs_for([f"?.{w}" for w in dict.fromkeys(words)], vllm_version)
        in_release = self._present(i, pkg, v, ri)
        changed = self._check_changed(i, v) if in_release and v is not None and gone_after is None else None
        if changed is not None:
            compare = f"https://github.com/{repo}/compare/v{v}...v{changed[0]}"
        return AtlasMatch(site=site, exact=exact, holes=holes, release=rels[linked], line=line, url=url,
                          in_release=in_release, gone_after=gone_after, fixed_in=fixed_in,
                          compare_url=compare, knobs=knobs, condition_text=condition_text(site.condition),
                          check_changed=changed)

    def _check_changed(self, i: int, v: Version) -> tuple[str, str] | None:
        """The first release after the user's (`v`, which has site i) that raises the same message in the same function
        under a check that reads other names (an exception class may change with it: a ValueError became an assert),
        with that check in words; None when the check is unchanged, only reworded (`self.x` for `x`, `!=` for `is
        not`), or still raised somewhere under the user's check after the user's site ends."""
        mine = runs_members(self._rel(i))
        vs = self._versions[self.packages[self._pkg[i]]]
        if mine[-1] >= len(vs) - 1 or self._cond[i] < 0:
            return None  # the user's check is the newest release's too
        path = self._strings[self._file[i]]
        same = [j for j in self._files().get(path.rsplit("/", 1)[-1], ())
                if self._file[j] == self._file[i] and self._func[j] == self._func[i] and self._tmpl[j] == self._tmpl[i]
                and self._kind[j] == 0 and self._cond[j] >= 0]
        names = _read_names(self._strings[self._cond[i]])
        if any(_read_names(self._strings[self._cond[j]]) == names and runs_members(self._rel(j))[-1] > mine[-1]
               for j in same):
            return None
        later = [(runs_members(self._rel(j))[0], j) for j in same
                 if _read_names(self._strings[self._cond[j]]) != names
                 and runs_members(self._rel(j))[0] > mine[-1] and vs[runs_members(self._rel(j))[0]] > v]
        if not later:
            return None
        first, j = min(later)
        text = condition_text(self._strings[self._cond[j]])
        return (self.package_releases[self.packages[self._pkg[i]]][first], text) if text else None

    def _same_message(self, i: int) -> list[int]:
        if self._by_message is None:
            self._by_message = {}
            for j, t in enumerate(self._tmpl):
                self._by_message.setdefault((self._pkg[j], self._who[j], t), []).append(j)
        return self._by_message[(self._pkg[i], self._who[i], self._tmpl[i])]

    def _names(self, i: int) -> list[str]:
        cond = self._strings[self._cond[i]] if self._cond[i] >= 0 else ""
        holes = " ".join(self._tmpl[i].split(SEP)[1::2]) if not cond else ""  # a check says what it read itself
        names = [f"{a}.{b}" for a, b in _ATTR.findall(f"{cond} {holes}")]
        # a config class's own method names its parameters bare (V0's SpeculativeConfig.maybe_create_spec_config
        # tests `speculative_draft_tensor_parallel_size`): as `Class.name`, a knob only if a flag maps to it
        owner = self._strings[self._func[i]].split(".")[0]
        bare = [w for w in re.findall(r"(?<![.\w])([a-z][a-z0-9]*_[a-z0-9_]+)\b", f"{cond} {holes}")
                if not w.endswith("_config")]
        if owner in CONFIG_FILES.values():
            names += [f"{owner}.{w}" for w in bare]
        # a bare name (`tensor_parallel_size` in a check) is a knob only through the flag that sets it; so is the
        # attribute of another object named for a setting (`layer.kv_cache_dtype`)
        names += [f"?.{w}" for w in bare]
        names += [f"?.{w}" for w in re.findall(r"(?<=[a-z0-9_)\]]\.)([a-z][a-z0-9]*_[a-z0-9_]{4,})\b", cond)
                  if not w.endswith("_config")]
        # a flag the message itself tells the reader to set ("use --dtype=half", "--max-model-len")
        names += [f"flag.{f.replace('-', '_')}" for f in re.findall(r"(?<![\w-])--([a-z][a-z0-9-]+)", self._tmpl[i])]
        # vLLM's environment variables: `envs.VLLM_X` in the code, and VLLM_X as the message (or a condition's
        # `os.environ.get("VLLM_X")`) spells it, which is a knob only when that release has such a variable
        names += [f"envs.{e}" for e in _ENVS_REF.findall(f"{cond} {holes}")]
        literal = " ".join(self._tmpl[i].split(SEP)[::2])
        names += [f"env.{e}" for e in _ENV_NAME.findall(f"{literal} {_ENVS_REF.sub('', cond)}")]
        return names

    def frame(self, file: str, function: str, *, version: str | None = None) -> Site | None:
        """The site in a traceback frame's function (`File ".../vllm/x/y.py", line N, in f`): which part raised."""
        path = repo_path(file)
        if path is None:
            return None
        want = [i for i in self._files().get(path.rsplit("/", 1)[-1], ())
                if self._strings[self._file[i]] == path
                and (self._strings[self._func[i]] == function or self._strings[self._func[i]].endswith("." + function))]
        if not want:
            return None
        pkg = self.packages[self._pkg[want[0]]]
        ri, _ = self._index(pkg, version)
        want.sort(key=lambda i: (ri is not None and runs_has(self._rel(i), ri), self._kind[i] == 0,
                                 runs_members(self._rel(i))[-1]), reverse=True)
        return self._site(want[0])

    def raised_opening(self, file: str, function: str, exc: str | None, opening: str, *, line: int | None = None,
                       version: str | None = None) -> AtlasMatch | None:
        """The site in a frame's function that raises `exc` with a sentence opening with `opening` (the code line
        under a traceback's last frame, when the exception line itself is cut): the user's release's first, then the
        one some release raises at the frame's line, then the newest."""
        path = repo_path(file)
        if path is None:
            return None
        want = [i for i in self._files().get(path.rsplit("/", 1)[-1], ())
                if self._kind[i] == 0 and self._strings[self._file[i]] == path
                and exc in (None, self._strings[self._who[i]])
                and (self._strings[self._func[i]] == function or self._strings[self._func[i]].endswith("." + function))
                and self._tmpl[i].split(SEP)[0].startswith(opening)]
        if not want:
            return None
        pkg = self.packages[self._pkg[want[0]]]
        ri, _ = self._index(pkg, version)
        best = max(want, key=lambda i: (ri is not None and runs_has(self._rel(i), ri),
                                        line is not None and line in self._lines(i)[2::3],
                                        runs_members(self._rel(i))[-1]))
        return self._result(best, False, {}, version)

    def function_span(self, function: str, package: str = "vllm") -> tuple[str, str, str | None] | None:
        """The first and the last release read whose source has a site in `function` (wherever its file moved),
        and the release read just before the first (None when the first is the oldest read)."""
        names = {k for k, s in enumerate(self._strings) if s == function or s.endswith("." + function)}
        p = self.packages.index(package)
        members = sorted({m for i, f in enumerate(self._func) if f in names and self._pkg[i] == p
                          for m in runs_members(self._rel(i))})
        if not members:
            return None
        rels = self.package_releases[package]
        return rels[members[0]], rels[members[-1]], rels[members[0] - 1] if members[0] > 0 else None

    def part_of(self, path: str, function: str | None = None) -> str:
        return part_of(path, function)

    def mentions(self, word: str) -> bool:  # does a message, a condition or a name of its hold the word?
        return any(word in s for s in self._strings) or any(word in t for t in self._tmpl)

    def sites(self, package: str = "vllm", release: str | None = None, file: str | None = None) -> list[Site]:
        """Every site of a package (that a release has, of one file's path, when given)."""
        p, (ri, _) = self.packages.index(package), self._index(package, release)
        pool = self._files().get(file.rsplit("/", 1)[-1], []) if file else range(len(self._tmpl))
        return [self._site(i) for i in pool if self._pkg[i] == p and file in (None, self._strings[self._file[i]])
                and (release is None or (ri is not None and runs_has(self._rel(i), ri)))]



@lru_cache(maxsize=1)
def load_atlas() -> Atlas:
    raw = (resources.files("bot.core") / "knowledge" / "atlas" / DATA).read_bytes()
    return Atlas(json.loads(gzip.decompress(raw)))
