"""How an atlas finding quotes the log: lines clipped to a length, paths as their repository writes them."""

from __future__ import annotations

from bot.core.parsed_log import ProblemLine

MESSAGE_CHARS = 160


def clip(text: str, n: int = MESSAGE_CHARS) -> str:
    text = " ".join(text.split())
    return text if len(text) <= n else text[: n - 1] + "…"


def short_path(path: str) -> str:
    """A path as its package writes it: `vllm/x.py`, `flashinfer/sampling.py` (not the install's prefix)."""
    from bot.core.parts import repo_path

    got = repo_path(path)
    if got is not None:
        return got
    p = path.replace("\\", "/")
    for marker in ("/site-packages/", "/dist-packages/"):
        if marker in p:
            return p.split(marker, 1)[1]
    return path


def quoted(p: ProblemLine, n: int = 300) -> str:
    """A line as evidence: where it is, and its text (the message, when the log's own text is lost)."""
    return f"{p.origin.where()}: {clip(p.origin.text or p.message, n)}"


def frame_line(frame: ProblemLine) -> str:
    return f"innermost frame in vLLM: {frame_at(frame)}"


def frame_at(frame: ProblemLine, line: bool = True) -> str:
    """`file:line in `function``, the function left out where the traceback did not print it (pytest's last frame)."""
    where = short_path(frame.frame_file or "") + (f":{frame.frame_line}" if line else "")
    return where + (f" in `{frame.frame_function}`" if frame.frame_function else "")
