"""What the code's history says of the line that raised: the releases that have it, whether a later one changed it
(upgrade past it), whether it is new in the user's release or just before it (a regression candidate: pin the one
before), or unchanged to the newest (an upgrade alone will not help). Read by the frame-first reader and by a
traceback placed by its innermost frame."""

from __future__ import annotations

from bot.core.history import LineHistory, load_history
from bot.core.parsed_log import ProblemLine
from bot.core.triage.atlas_readers.quoting import clip
from bot.core.triage.atlas_readers.releases import newer
from bot.core.triage.findings import Advice


def history_of(frame: ProblemLine | None, version: str | None) -> LineHistory | None:
    from bot.core.parts import repo_path

    if frame is None or not frame.source:
        return None
    hist = load_history()
    path = repo_path(frame.frame_file or "")
    if hist is None or path is None:
        return None
    return hist.line(path, frame.frame_function or "", frame.source, version)


def not_in_any_release(vframe: ProblemLine, version: str | None) -> tuple[list[str], list[Advice]]:
    """The raising line is in no release the atlas read, though its function is: older code than every release read
    (upgrade), or a build that is not a release (a source checkout, a patched image)."""
    from bot.core.parts import repo_path

    hist = load_history()
    path = repo_path(vframe.frame_file or "")
    if hist is None or path is None or not vframe.source or not vframe.frame_function:
        return [], []
    rels = hist.function_releases(path, vframe.frame_function)
    if not rels:
        return [], []
    code = clip(vframe.source, 100)
    if version is None or newer(rels[0], version):
        return ([f"The line that raised (`{code}`) is in no vLLM release from {rels[0]} to {rels[-1]}, though "
                 f"`{vframe.frame_function}` is: the code that failed is older than {rels[0]} and has changed since — "
                 f"upgrade (the newest is {hist.releases[-1]})."], ["upgrade"])
    return ([f"The line that raised (`{code}`) is not in `{vframe.frame_function}` of any release read "
             f"({rels[0]}–{rels[-1]}): this build is not a release (a source checkout or a patched image) — "
             "reproduce on a release before reporting it."], [])


def history_fix(h: LineHistory | None, vframe: ProblemLine, version: str | None,
                 vllm_owned: bool) -> tuple[list[str], list[Advice]]:
    """What the raising line's releases say to do."""
    if h is None:
        return [], []
    code = clip(vframe.source or "", 100)
    if h.user_release is None and version and h.first_with_line and newer(h.first_with_line, version):
        # older than every release read: the line as the user's release has it is not in any of them
        return [], []
    if h.user_release is None and h.last_with_line != h.newest:
        # the user's release is not known: the line's own range still says whether an upgrade removes it
        return ([f"The line that raised (`{code}`) is in vLLM {h.first_with_line}–{h.last_with_line} and no later "
                 f"release has it: upgrading past {h.last_with_line} removes it "
                 f"(https://github.com/vllm-project/vllm/compare/v{h.last_with_line}...v{h.newest})."], ["upgrade"])
    if h.changed_in:
        back = (f" If the release before yours ({h.previous}) served this setup, pinning it is the other way out."
                if h.previous and h.user_release else "")
        return ([f"The line that raised (`{code}`) is in vLLM {h.first_with_line}–{h.last_with_line} and changed in "
                 f"{h.changed_in}: upgrade to {h.changed_in} or later ({h.compare_url(h.changed_in)}).{back}"],
                ["upgrade", "pin"] if back else ["upgrade"])
    if h.introduced_in and h.previous:
        return ([f"The line that raised (`{code}`) first appears in vLLM {h.introduced_in}, your release: a regression "
                 f"candidate. Pin vLLM {h.previous} (the release before) while you report it "
                 f"({h.compare_url(h.introduced_in).replace(f'v{h.introduced_in}...', f'v{h.previous}...')})."],
                ["pin"])
    if h.new_since and vllm_owned:
        return ([f"vLLM's line (`{code}`) is in no release read up to vLLM {h.new_since} and in "
                 f"{h.first_with_line}: it came in with one of the releases after {h.new_since} up to yours — a "
                 f"regression candidate. Pin vLLM {h.new_since} while you report it "
                 f"(https://github.com/vllm-project/vllm/compare/v{h.new_since}...v{h.first_with_line})."], ["pin"])
    if h.function_changed_in and vllm_owned:
        return ([f"The function around it changed in vLLM {h.function_changed_in} "
                 f"({h.compare_url(h.function_changed_in)}): upgrading may fix it; read the diff first."], ["upgrade"])
    if h.has_line and h.last_with_line == h.newest and vllm_owned:
        return ([f"The line is unchanged through vLLM {h.newest}, the newest release read: an upgrade alone will not "
                 "change it — change the input it read, or report it upstream with this traceback."], [])
    return [], []
