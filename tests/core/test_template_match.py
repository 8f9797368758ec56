"""The atlas's template matcher: linear in the line, the same answers as the lazy regex it replaced (issue 35:
one pasted line of 1.8 KB made a template backtrack for minutes)."""

from __future__ import annotations

import re
import time

from hypothesis import given, settings
from hypothesis import strategies as st

from bot.core.atlas import SEP, load_atlas
from bot.core.template_match import MAX_TEXT, Template, literal_regex

EPLB = ["Model: ", "{}", " with config ", "{}", " ", "{}", " ", "{}", " ", "{}", " ", "{}",
        " mismatch with new model ", "{}", " with config ", "{}", " ", "{}", " ", "{}", " ", "{}", " ", "{}", ""]


def _reference(parts: list[str]) -> re.Pattern[str]:
    """The regex the atlas used before: a lazy group per hole, the whole message matched."""
    parts = [parts[0].lstrip(), *parts[1:]] if len(parts) > 1 else [parts[0].strip()]
    parts[-1] = parts[-1].rstrip()
    body = [literal_regex(parts[0])]
    for i in range(1, len(parts), 2):
        body.append("(.*?)" if i + 2 < len(parts) or parts[i + 1] else "(.*)")
        body.append(literal_regex(parts[i + 1]))
    return re.compile(r"\s*" + "".join(body) + r"\s*", re.DOTALL)


def test_the_eplb_line_that_froze_the_bot_is_answered_in_steps_linear_in_its_length() -> None:
    t = Template.of(EPLB)
    for n in (80, 400, 2000):
        line = "Model: a with config " + "x " * n + "mismatch with new model b"
        assert t.match(line) is None
    # a line that does match gives the holes the lazy groups would
    got = t.match("Model: m with config a b c d e mismatch with new model n with config f g h i j")
    assert got is not None and got[0] == ["m", "a", "b", "c", "d", "e", "n", "f", "g", "h", "i", "j"]


def test_a_whole_atlas_diagnosis_of_the_eplb_line_is_quick() -> None:
    atlas = load_atlas()
    line = "Model: a with config " + "x " * 400 + "mismatch with new model b"
    begun = time.perf_counter()
    atlas.match(line)
    # not a timing test of speed (bench/ measures that): a guard against minutes of backtracking
    assert time.perf_counter() - begun < 20


def test_every_atlas_template_on_an_adversarial_line_scans_at_most_one_pass_per_literal() -> None:
    """For each template with holes: its opening words, then its later literals repeated without the last one —
    the shape that made lazy groups try every split. The matcher scans each literal once."""
    atlas = load_atlas()
    checked = 0
    for raw in atlas._tmpl:
        parts = raw.split(SEP)
        if len(parts) < 5:
            continue
        middle = " ".join(p for p in parts[2:-1:2] if p.strip())
        line = (parts[0] + " x " + (middle + " y ") * 40)[:MAX_TEXT]
        t = Template.of(parts)
        got = t.match(line)
        literals = len(parts) // 2 + 2
        if got is not None:
            _, steps = got
            assert steps <= literals * len(line), raw
        checked += 1
    assert checked > 1000


@st.composite
def template_and_line(draw: st.DrawFn) -> tuple[list[str], str]:
    words = st.text(alphabet="abc :", min_size=0, max_size=6)
    n = draw(st.integers(0, 4))
    parts = [draw(words)]
    for _ in range(n):
        parts += ["{}", draw(words)]
    line = draw(st.text(alphabet="abc :x", max_size=40))
    return parts, line


@settings(max_examples=500, deadline=None)
@given(template_and_line())
def test_the_matcher_agrees_with_the_lazy_regex_on_whether_a_line_matches(case: tuple[list[str], str]) -> None:
    parts, line = case
    line = line.strip()  # the atlas matches a message stripped of its surrounding blanks
    ours = Template.of(parts).match(line)
    theirs = _reference(parts).fullmatch(line)
    assert (ours is None) == (theirs is None), (parts, line)
