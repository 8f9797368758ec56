"""A traceback cut before its exception line, whose last frame's code line is a `raise` with a sentence: the
sentence's start, read in the file and function that raised it, names the site the atlas holds."""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from bot.core.atlas import Atlas, AtlasMatch
    from bot.core.triage.atlas_readers.candidates import Candidate

# `raise TimeoutError("Timed out waiting for engines to send"` — the call may go on over lines the traceback does not
# print, so the literal may be cut too: its opening words are what is left
_RAISE = re.compile(r"""^\s*raise\s+(?:[\w.]+\.)?(?P<exc>[A-Z]\w*)\(\s*f?(?P<q>["'])(?P<text>[^"'{}]{16,})""")


def raised_sentence(code: str | None) -> tuple[str, str] | None:
    """(the exception's class, the opening words of its message) of a `raise` code line, or None."""
    hit = _RAISE.match(code or "")
    if hit is None:
        return None
    text = hit["text"].strip()
    return (hit["exc"], text) if len(text.split()) >= 3 else None


def cut_raise(atlas: Atlas, cand: Candidate, version: str | None) -> AtlasMatch | None:
    """The site whose sentence the last frame's `raise` opens, in that frame's own file and function; None when the
    code line raises no sentence or no site there begins with it."""
    p = cand.line
    if p.kind != "frame":
        return None
    said = raised_sentence(p.source)
    if said is None:
        return _raise_at_line(atlas, p.frame_file or "", p.frame_function or "", p.frame_line, version) \
            if not (p.source or "").strip() else None
    exc, text = said
    return atlas.raised_opening(p.frame_file or "", p.frame_function or "", exc, text, line=p.frame_line,
                                version=version)


def _raise_at_line(atlas: Atlas, file: str, function: str, line: int | None, version: str | None) -> AtlasMatch | None:
    """A last frame cut before its code line too: the function's only raise in the user's release, when it stands at
    the frame's line or just below it (a `raise` over several lines: the frame shows where the statement starts, the
    atlas where its sentence stands)."""
    from bot.core.parts import repo_path

    path = repo_path(file)
    if line is None or version is None or path is None:
        return None
    raises = [s for s in atlas.sites(release=version, file=path) if s.kind == "raise"
              and (s.function == function or s.function.endswith("." + function))]
    if len(raises) != 1:
        return None
    m = atlas.raised_opening(path, function, raises[0].exc, raises[0].template.split("{", 1)[0], line=line,
                             version=version)
    return m if m is not None and m.line is not None and line <= m.line <= line + _STATEMENT_LINES else None


_STATEMENT_LINES = 4  # how far below a statement's first line its sentence may stand


def later_setting(atlas: Atlas, cand: Candidate, m: AtlasMatch) -> tuple[str, list[str]] | None:
    """The setting a later release's version of the same check reads, when the user's reads none (a wait that was
    a constant and became a variable): the step to take and its knobs."""
    if m.knobs:
        return None
    p = cand.line
    said = raised_sentence(p.source)
    if said is None:
        return None
    newest = atlas.raised_opening(p.frame_file or "", p.frame_function or "", said[0], said[1])
    if newest is None or not newest.knobs or newest.site.first == m.site.first:
        return None
    names = [k.flag for k in newest.knobs]
    helps = "; ".join(f"`{k.flag}`: {k.help.rstrip('. ')}" for k in newest.knobs if k.help)
    return (f"From vLLM {newest.site.first} this check reads {', '.join(f'`{n}`' for n in names)} "
            f"({newest.url}){': ' + helps if helps else ''}. Upgrade to {newest.site.first} or later and set it.",
            names)
