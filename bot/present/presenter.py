"""What showing one type of result takes: its renderings, and what goes beside it when it is posted.

Each present/ module of a result type holds one `PRESENTER`; present/render.py's table says which module shows
which type. A new result type is its module here and one line of that table."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Generic, TypeVar

from bot.present.rendered import Format, Rendered

R = TypeVar("R")

File = tuple[str, bytes, str]  # (name, content, title) as posted beside a message


def _nothing(_result: Any) -> None:
    return None


def _no_files(_result: Any) -> list[File]:
    return []


@dataclass(frozen=True)
class Presenter(Generic[R]):
    """`render` in every format; `chart` a PNG (None: no chart) named by `chart_file` (its file name and title
    at `now`); `next_step` the first thing to do, for a short answer at a prompt; `files` what else goes beside
    a posted result (a failed step's long output); `host` whose trend chart a health report posts beside it."""

    render: Callable[[R, Format], Rendered]
    chart: Callable[[R], bytes | None] = _nothing
    chart_file: Callable[[R, datetime], tuple[str, str]] | None = None
    next_step: Callable[[R], str | None] = _nothing
    files: Callable[[R], list[File]] = _no_files
    host: Callable[[R], str | None] = _nothing
