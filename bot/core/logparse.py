"""vLLM log lines -> a `ParsedLog`: the streaming `LineParser`, and the entries that parse lines or a text.

Pure functions over text: no file or network I/O (that lives in `logfile.py`), so the same code
parses a local file, a remote tail and a test fixture. Every form here is documented in
shared/reference/vllm-logs.md; the parser never raises on input and counts what it skips.
What a line is lives in `line_kinds.py`, the metrics lines' grammar in `metrics_lines.py`, what a parse
yields in `parsed_log.py`.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from bot.core.dump_lines import DumpReader, is_head
from bot.core.failures import FailureTable, default_table
from bot.core.line_kinds import (
    ARGS_RE,
    CARETS,
    COMMAND_RE,
    COMPILE_CACHE_LOAD_RE,
    EXCEPTION_RE,
    FIELD_LINE_RE,
    FRAME_HEAD_CUT_RE,
    FRAME_IPY_RE,
    FRAME_RE,
    FRAME_SHORT_RE,
    FRAME_TAIL_RE,
    IGNORED_RE,
    LIST_MARKER_RE,
    LOGO_MODEL_RE,
    LOGO_VERSION_RE,
    NOT_A_MESSAGE,
    PARSE_NEEDLES,
    PREFIX_RE,
    PROBLEM_LEVELS,
    PROC_TAG_RE,
    PY_WARNING_HEAD,
    PY_WARNING_LINE_RE,
    PYDANTIC_DETAIL_RE,
    PYDANTIC_HEAD_RE,
    PYDANTIC_V1_RE,
    PYTEST_E_RE,
    PYTEST_WHERE_RE,
    RECORD_LEVEL_RE,
    SERVING_PROGRESS_RE,
    SPEC_CONFIG_RE,
    START_RE,
    STARTUP_PROGRESS_RE,
    TRACEBACK_HEAD,
    VERSION_RES,
    parse_args_literal,
    split_prefix,
    strip_ansi,
    strip_outer_prefix,
    wordy,
)
from bot.core.metrics_lines import CONTINUATION_RE, parse_engine_message, parse_spec_message
from bot.core.parsed_log import (
    MAX_EVENTS,
    MAX_LOOSE,
    PROBLEMS_FIRST,
    PROBLEMS_LAST,
    ContextClue,
    LogEvent,
    Origin,
    ParsedLog,
    ProblemLine,
    SpecDecodeSample,
    bound_problems,
)
from bot.core.specline import TOKEN_RATE_RE, looks_like_spec, spec_fields

MAX_EXC_MESSAGE = 2000  # an exception message joined over its lines stops growing here



# Python's gutter for the tracebacks inside an exception group (`    |   File "…"`, `    | TypeError: …`), as
# anyio's and starlette's task groups in vLLM's API server raise them
EXC_GROUP_GUTTER_RE = re.compile(r"^\s{2,12}\| (?=\s*File \"|\s*Traceback \(|\s*[A-Za-z_][\w.]*(?:Error|Exception|"
                                 r"ExceptionGroup|Exit|Interrupt)\b|\s{2,}\S)")

# a key's repr as KeyError prints it ('model.embed_tokens.weight', "x", 3): the whole message
_CLOSED_REPR_RE = re.compile(r"""^(?:'[^'\n]{0,300}'|"[^"\n]{0,300}"|-?\d{1,20})$""")

class LineParser:
    """Turns lines into samples, events and clues. Feed it lines one at a time (streaming).

    A SpecDecoding line a terminal wrapped, or a fragment pasted over several lines, is held until the
    next line shows it is complete, so `result` flushes what is pending before it answers."""

    def __init__(self, table: FailureTable | None = None, k_hint: int | None = None, keep: int | None = None) -> None:
        self._result = ParsedLog()
        self.table = table or default_table()
        self.k_hint = k_hint
        self.keep = keep  # a bounded parse (the whole-log scan) keeps only the last `keep` samples
        self._pending: tuple[str, Origin, dict[str, str]] | None = None
        self._tracebacks: dict[tuple[str | None, int | None], int] = {}  # open traceback per process
        self._dumps = DumpReader(self._tracebacks, self._keep)  # faulthandler's and py-spy's stack dumps
        self._pydantic: tuple[str, int | None, str | None] | None = None  # (config class, traceback, field)
        self._exact: str | None = None  # the pending text whose fields are exactly the pending fields
        self._warning_open = False  # the line before was a Python warning whose message goes on below
        self._frame_indent: dict[tuple[str | None, int | None], int] = {}  # the last frame's indent per process
        self._exc_open: ProblemLine | None = None  # the exception line just read: its message may go on below
        self._held: tuple[str, int | None, int | None] | None = None  # a frame line a terminal cut inside its path
        # the process whose last line was Python's `Exception ignored in: …`: its next traceback was ignored
        self._ignoring: tuple[str | None, int | None] | None = None
        self._after_frame = False  # the line just read was a traceback frame: its code line comes next

    @property
    def result(self) -> ParsedLog:
        if self._held is not None:
            held, self._held = self._held, None
            self._read(*held)
        self._flush()
        bound_problems(self._result.problems)
        return self._result

    def feed(self, raw: bytes | str, line_no: int | None = None, offset: int | None = None) -> None:
        stats = self._result.stats
        stats.lines += 1
        if isinstance(raw, bytes):
            try:
                text = raw.decode("utf-8")
            except UnicodeDecodeError:
                stats.undecodable += 1
                text = raw.decode("utf-8", errors="replace")
        else:
            text = raw
        text = strip_ansi(text.rstrip("\r\n")).replace("\r", "")
        if text.endswith("^M"):
            text = text[:-2]  # a carriage return made visible (`cat -v`): the line's own end, as `\r` is
        if len(text) > 200_000:  # nothing vLLM prints is this long: garbage, do not regex it
            stats.skip(text)
            return
        text = strip_outer_prefix(text)
        if '\\"' in text and 'File \\"' in text:
            # a traceback copied out of a JSON string keeps its escaped quotes (`File \"/usr/…/core.py\", line 336`)
            text = text.replace('\\"', '"')
        if self._held is not None:
            held, self._held = self._held, None
            if FRAME_TAIL_RE.match(text) and not PROC_TAG_RE.match(text) and PREFIX_RE.search(text) is None:
                # a pasted traceback hard-wrapped at the terminal's width: the path goes on at the next line's start
                text, line_no, offset = held[0] + text, held[1], held[2]
            else:
                self._read(*held)
        if 'File "' in text and FRAME_HEAD_CUT_RE.search(text):
            self._held = (text, line_no, offset)
            return
        self._read(text, line_no, offset)

    def _read(self, text: str, line_no: int | None, offset: int | None) -> None:
        stats = self._result.stats
        self._after_frame = False
        if self._warning_open and self._warning_rest(text):
            self._warning_open = False
            stats.skip(text)
            return
        exc, self._exc_open = self._exc_open, None
        if exc is not None and self._message_cut(exc, text):
            # an exception line a terminal wrapped inside a bracket: the rest is the bare line below it
            exc.message = f"{exc.message}{text.strip()}"[:MAX_EXC_MESSAGE]
            self._exc_open = exc if exc.origin.level is None else None
            return
        if exc is not None and self._message_goes_on(exc, text):
            # Python prints a message of several lines as it is: the lines below the exception's are its own
            exc.tight = f"{exc.tight or exc.message}{text.strip()}"[:MAX_EXC_MESSAGE]
            exc.message = f"{exc.message} {text.strip()}"[:MAX_EXC_MESSAGE]
            self._exc_open = exc
            return
        self._warning_open = "Warning:" in text and PY_WARNING_HEAD.search(text) is not None
        self._classify(text, line_no, offset)

    def _message_goes_on(self, exc: ProblemLine, text: str) -> bool:
        """A bare line right below an exception line: no record of its own (vLLM's prefix, a level), no frame, no other
        exception, nothing the failure table knows — the rest of the exception's message (pydantic's errors are read
        field by field, not joined)."""
        body = LIST_MARKER_RE.sub("", text.strip(), count=1)
        if (exc.exception or "").endswith("KeyError") and _CLOSED_REPR_RE.match(exc.message):
            return False  # a KeyError's message is its key's repr, one line: what follows is not its message
        # (vLLM's logger prefixes every line of a message: a bare line below a logged exception is someone else's)
        return (exc.origin.level is None and exc.exception != "ValidationError" and len(exc.message) < MAX_EXC_MESSAGE
                and self._warning_rest(body) and not body.startswith(NOT_A_MESSAGE)
                and PYTEST_WHERE_RE.match(body) is None and FRAME_SHORT_RE.match(body) is None
                and PROC_TAG_RE.match(text) is None and PREFIX_RE.search(text) is None
                and PY_WARNING_LINE_RE.search(text) is None and not is_head(body) and self.table.match(text) is None)

    def _message_cut(self, exc: ProblemLine, text: str) -> bool:
        """A bare line that closes a bracket the exception's message left open (`… from shape (4` then
        `,) into shape (3,)`): the message was hard-wrapped, not ended."""
        msg = exc.message
        open_round, open_square = msg.count("(") - msg.count(")"), msg.count("[") - msg.count("]")
        if not (open_round > 0 or open_square > 0) or PROC_TAG_RE.match(text) or PREFIX_RE.search(text):
            return False
        body = text.strip()
        closes = (open_round > 0 and body.count(")") > body.count("(")) or \
            (open_square > 0 and body.count("]") > body.count("["))
        return closes and len(body) < 400 and self._warning_rest(body)

    @staticmethod
    def _warning_rest(text: str) -> bool:
        """The rest of a warning's message: no record, frame, traceback or exception line of its own."""
        body = text.strip()
        return bool(body) and not (EXCEPTION_RE.match(body) or FRAME_RE.match(body) or RECORD_LEVEL_RE.match(body)
                                   or body.startswith(TRACEBACK_HEAD))

    def feed_continuation(self, raw: bytes, line_no: int | None = None, offset: int | None = None) -> None:
        """A line the scanner found no needle in, read only as the possible rest of what the line above left open:
        a wrapped SpecDecoding line, a frame's code line, an exception's message going on, a path cut at the
        terminal's width; anything else in it is nothing the parser wants, so it is counted, not classified."""
        bad = False
        try:
            decoded = raw.decode("utf-8")
        except UnicodeDecodeError:
            decoded, bad = raw.decode("utf-8", errors="replace"), True
        text = strip_outer_prefix(strip_ansi(decoded.rstrip("\r\n")).replace("\r", ""))
        if TOKEN_RATE_RE.match(text) or (self._pending is not None and self._continues(text)) or self._open_above:
            self.feed(raw, line_no, offset)
            return
        self._result.stats.lines += 1
        self._result.stats.undecodable += bad

    @property
    def _open_above(self) -> bool:
        """The line above left something its next line finishes (the same a line-by-line read gives it)."""
        return self._after_frame or self._exc_open is not None or self._held is not None or self._warning_open

    def _flush(self) -> None:
        if self._pending is None:
            return
        msg, origin, fields = self._pending
        self._pending = None
        out = self._result
        exact, self._exact = self._exact is msg, None  # fields computed for this very text: not again
        sample = parse_spec_message(msg, origin, self.k_hint, fields if exact else None)
        if sample is None:
            out.stats.skip(origin.text or msg)
            return
        self._add_sample(sample)
        out.stats.parsed += 1
        if origin.source_file and origin.source_file.endswith("metrics.py") and origin.source_line:
            out.clues.append(ContextClue("metrics_hint", origin.source_line, origin))

    def _add_sample(self, sample: SpecDecodeSample) -> None:
        out = self._result
        out.samples.append(sample)
        out.stats.samples_seen += 1
        if sample.counts_known and not sample.cumulative:
            out.stats.accepted_seen += sample.accepted
            out.stats.drafts_seen += sample.num_drafts or 0.0
        if self.keep is not None and len(out.samples) > 2 * self.keep + 64:
            out.trim(self.keep)

    def _continues(self, text: str) -> bool:
        """Is `text` the rest of the pending SpecDecoding line (wrapped, or pasted over lines)?"""
        if self._pending is None or PREFIX_RE.match(text) or "SpecDecoding metrics" in text:
            return False
        if not CONTINUATION_RE.match(text):
            return False
        return not (set(spec_fields(text)) & set(self._pending[2]))  # a field again: the next interval

    def _classify(self, text: str, line_no: int | None, offset: int | None) -> None:
        tm = TOKEN_RATE_RE.match(text)
        if tm:  # one position per line: they build one per-position list
            self._add_position(tm["v"], text, line_no, offset)
            return
        pending = self._pending
        if pending is not None and self._continues(text):
            msg, origin, fields = pending
            joined = msg.rstrip() + (" " if msg.rstrip().endswith(",") else ", ") + text.strip()
            self._pending = (joined, origin, fields | spec_fields(text))
            return
        if pending is not None:  # (most lines have nothing pending: no call for them)
            self._flush()
        if self._dumps.wants(text) and self._dumps.line(text, line_no, offset):
            return
        lowered = text.lower()
        looks_spec = looks_like_spec(text)
        looks_engine = "avg prompt throughput" in lowered
        could_fail = self.table.could_match(text)
        if not (looks_spec or looks_engine or could_fail or any(n in lowered for n in PARSE_NEEDLES)):
            self._needleless(text, line_no, offset)
            return
        origin, msg = split_prefix(text)
        origin.line_no, origin.offset = line_no, offset
        if looks_spec and not looks_engine:
            if PREFIX_RE.search(msg):  # another record's prefix inside this one: two lines interleaved
                self._result.stats.skip(text)
                return
            self._pending = (msg, origin, spec_fields(msg))
            self._exact = msg
            return
        if looks_engine and self._engine_line(msg, origin, text, looks_spec):
            return
        self._clues(msg, origin)
        self._problem(msg, origin, self._failure(text, origin) if could_fail else None)

    def _add_position(self, value: str, text: str, line_no: int | None, offset: int | None) -> None:
        """`acceptance at token N: v`: one more rate for the pending line's per-position list (a new line if none)."""
        pending = self._pending
        if pending is not None and pending[2].get("pp_lines"):
            msg, origin, fields = pending
            self._pending = (f"{msg}, {value}", origin, fields)
            return
        if pending is None:
            origin, _ = split_prefix(text)
            origin.line_no, origin.offset = line_no, offset
            pending = ("", origin, {})
        msg, origin, fields = pending
        self._pending = (f"{msg}, Per-position acceptance rate: {value}", origin,
                         fields | {"pp": value, "pp_lines": "1"})

    def _needleless(self, text: str, line_no: int | None, offset: int | None) -> None:
        """A line with no needle: the field name under a pydantic header, a line that shows startup or serving going
        on (a pasted log: the scan of a file hands the parser only lines with needles), or a loose line the atlas
        may know."""
        progress = "serving" if SERVING_PROGRESS_RE.search(text) else (
            "startup" if STARTUP_PROGRESS_RE.search(text) else None)
        if progress is not None:
            origin, _ = split_prefix(text)
            origin.line_no, origin.offset = line_no, offset
            self._result.clues.append(ContextClue("progress", progress, origin))
            return
        command = COMMAND_RE.search(text) if " serve " in text else None
        if command is not None:
            origin, _ = split_prefix(text)
            origin.line_no, origin.offset = line_no, offset
            self._result.clues.append(ContextClue("command", command["rest"], origin))
            return
        if self._pydantic is not None and FIELD_LINE_RE.match(PYTEST_E_RE.sub("", text.strip(), count=1)):
            origin, msg = split_prefix(text)
            origin.line_no, origin.offset = line_no, offset
            self._pydantic_detail(msg.strip(), origin, None)
        elif len(self._result.loose) < MAX_LOOSE and wordy(text):
            origin = Origin(line_no=line_no, offset=offset, text=text)
            self._result.loose.append(ProblemLine("loose", origin, text.strip()))

    def _engine_line(self, msg: str, origin: Origin, text: str, looks_spec: bool) -> bool:
        """An Engine line (and the SpecDecoding line an interleaving put in front of it): False if it is not one."""
        out = self._result
        if looks_spec:
            cut = msg.find("Engine")
            sample = parse_spec_message(msg[:cut] if cut > 0 else msg, origin, self.k_hint)
            if sample is not None:
                self._add_sample(sample)
                out.stats.parsed += 1
        eng = parse_engine_message(msg, origin)
        if eng is not None:
            out.engine.append(eng)
            if self.keep is not None and len(out.engine) > 2 * self.keep + 64:
                out.trim(self.keep)
            out.stats.parsed += 1
            return True
        if "Engine" in msg:
            out.stats.skip(text)
            return True
        return False

    def _failure(self, text: str, origin: Origin) -> str | None:
        """The failure-table signature the line matches, recorded as an event; None if none does."""
        fm = self.table.match(text)
        if fm is None:
            return None
        out = self._result
        out.events.append(LogEvent(fm.signature.id, origin, fm.detail))
        if self.keep is not None and len(out.events) > 2 * MAX_EVENTS:
            out.trim(self.keep)
        out.stats.parsed += 1
        return fm.signature.id

    def _pydantic_detail(self, body: str, origin: Origin, explained: str | None) -> bool:
        """The lines under pydantic's `N validation error(s) for XConfig`: a field's name, then its error. vLLM's
        own checks arrive as `Value error, <vLLM's message>`: that message is the exception worth placing."""
        assert self._pydantic is not None
        cls, tb, field_name = self._pydantic
        body = PYTEST_E_RE.sub("", body, count=1).strip()  # pytest's `E   ` gutter before each line it reports
        fm = FIELD_LINE_RE.match(body)
        if fm and field_name is None:
            self._pydantic = (cls, tb, fm["field"])
            return True
        dm = PYDANTIC_DETAIL_RE.match(body)
        if dm is None:
            self._pydantic = None
            return False
        exc = {"Value": "ValueError", "Assertion": "AssertionError"}.get(dm["kind"] or "", "ValidationError")
        message = dm["msg"].strip() if dm["kind"] else (f"{field_name}: " if field_name else "") + dm["msg"].strip()
        self._result.problems.append(ProblemLine(
            "exception", origin, message, exception=exc, explained_by=explained, traceback_id=tb,
            config_field=f"{cls}.{field_name}" if field_name else None))
        self._result.stats.problems_seen += 1
        self._pydantic = (cls, tb, None)
        return True

    def _problem(self, msg: str, origin: Origin, explained: str | None) -> None:
        """Keep the line if it says something went wrong: a level, an exception, a traceback frame."""
        if (gutter := EXC_GROUP_GUTTER_RE.match(msg)) is not None:
            msg = msg[gutter.end():]  # an exception group's member, behind Python's `    | ` gutter
        body = LIST_MARKER_RE.sub("", msg.strip(), count=1)
        key = (origin.proc, origin.pid)
        if self._pydantic is not None and self._pydantic_detail(body, origin, explained):
            return
        indent = len(msg) - len(msg.lstrip())
        if key in self._tracebacks and indent and not FRAME_RE.match(body) and not FRAME_SHORT_RE.match(body) \
                and not (indent < self._frame_indent.get(key, 0) and EXCEPTION_RE.match(body)):
            # (a whole traceback pasted indented: its exception line sits left of its frames, not under one)
            self._frame_source(body, self._tracebacks[key])
            return
        ignoring, self._ignoring = self._ignoring, (key if IGNORED_RE.match(body) else None)
        if body.startswith(TRACEBACK_HEAD) and ignoring == key:
            self._result.ignored.add(origin.offset if origin.offset is not None else
                                     (origin.line_no if origin.line_no is not None else -1))
        problem = self._problem_of(body, origin, explained, key)
        if problem is not None and problem.kind == "frame":
            self._frame_indent[key] = indent
            self._after_frame = True
        if problem is None:
            # a needle but no level or class ("Value error, …" pasted alone): a loose line the atlas may know
            loose = self._result.loose
            if len(loose) < MAX_LOOSE and wordy(body) and not body.startswith(TRACEBACK_HEAD):
                loose.append(ProblemLine("loose", origin, body, explained_by=explained))
            return
        if problem.exception == "ValidationError" and (head := PYDANTIC_HEAD_RE.match(problem.message)):
            self._pydantic = (head["cls"], problem.traceback_id, None)
        self._keep(problem, key)
        if problem.kind == "exception":
            self._exc_open = problem

    def _keep(self, problem: ProblemLine, key: tuple[str | None, int | None]) -> None:
        problems = self._result.problems
        if problem.kind == "frame" and self._dumps.is_dump(key, problem.traceback_id):
            # a dump lists the innermost call first: each frame goes above the ones already read, so the last frame
            # of the traceback is the innermost, as in Python's own tracebacks
            first = next((n for n in range(len(problems) - 1, -1, -1)
                          if problems[n].traceback_id != problem.traceback_id), -1) + 1
            problems.insert(first, problem)
        else:
            problems.append(problem)
        self._result.stats.problems_seen += 1
        if len(problems) > 2 * (PROBLEMS_FIRST + PROBLEMS_LAST):
            bound_problems(problems)

    def _frame_source(self, body: str, traceback_id: int) -> None:
        """The source line under a frame (`    raise ...`): part of the frame, not a problem of its own."""
        last = self._result.problems[-1] if self._result.problems else None
        if last is not None and last.kind == "frame" and last.source is None \
                and last.traceback_id == traceback_id and not set(body) <= CARETS:
            last.source = body[:300]

    def _problem_of(self, body: str, origin: Origin, explained: str | None,
                    key: tuple[str | None, int | None]) -> ProblemLine | None:
        """The line as a frame, an exception or a level record; None if it is none of them (a traceback's
        header opens the traceback of its process and is kept as nothing else)."""
        # where the line is, to tie a traceback's lines together
        here = origin.offset if origin.offset is not None else (origin.line_no if origin.line_no is not None else -1)
        if body.startswith(TRACEBACK_HEAD):
            self._tracebacks[key] = here
            return None
        gutter = PYTEST_E_RE.match(body)
        if gutter is not None:
            body = body[gutter.end():]
        elif (where := PYTEST_WHERE_RE.match(body)) is not None and where["cls"]:
            self._pytest_raised_at(where, origin, explained, here)
            return None
        fr = FRAME_RE.match(body) or FRAME_SHORT_RE.match(body) or PYTEST_WHERE_RE.match(body) \
            or FRAME_IPY_RE.match(body)
        if fr is not None:
            tb = self._tracebacks.setdefault(key, here)  # a frame without its header opens the traceback
            return ProblemLine("frame", origin, body, frame_file=fr["file"], frame_line=int(fr["line"]),
                               frame_function=fr["func"], explained_by=explained, traceback_id=tb)
        ex = EXCEPTION_RE.match(body)
        if ex is not None:
            return ProblemLine("exception", origin, (ex["msg"] or ex["rmsg"] or "").strip(),
                               exception=(ex["cls"] or ex["rcls"]).rsplit(".", 1)[-1], explained_by=explained,
                               traceback_id=self._tracebacks.pop(key, None))
        if origin.level in PROBLEM_LEVELS:
            return ProblemLine("level", origin, body, explained_by=explained)
        v1 = PYDANTIC_V1_RE.match(body) if origin.level is None else None
        if v1 is not None:  # pydantic 1's error line: the message, then its type in parentheses
            return ProblemLine("exception", origin, v1["msg"].strip(), explained_by=explained,
                               exception="AssertionError" if v1["type"] == "assertion_error" else "ValueError")
        return None

    def _pytest_raised_at(self, where: re.Match[str], origin: Origin, explained: str | None, here: int) -> None:
        """pytest names where the exception it just printed was raised after it: that place becomes the last frame of
        the exception's traceback (its function is not printed)."""
        problems = self._result.problems
        cls = where["cls"].rsplit(".", 1)[-1]
        at = next((n for n in range(len(problems) - 1, max(-1, len(problems) - 4), -1)
                   if problems[n].kind == "exception" and problems[n].exception == cls), None)
        if at is None:
            return
        exc = problems[at]
        tb = exc.traceback_id if exc.traceback_id is not None else here
        exc.traceback_id = tb
        problems.insert(at, ProblemLine("frame", origin, where.group(0), frame_file=where["file"],
                                        frame_line=int(where["line"]), explained_by=explained, traceback_id=tb))

    def _clues(self, msg: str, origin: Origin) -> None:
        out = self._result
        if COMPILE_CACHE_LOAD_RE.search(msg):
            out.clues.append(ContextClue("compile_cache", msg.strip()[:200], origin))
        if SERVING_PROGRESS_RE.search(msg):
            out.clues.append(ContextClue("progress", "serving", origin))
        elif STARTUP_PROGRESS_RE.search(msg):
            out.clues.append(ContextClue("progress", "startup", origin))
        sc = SPEC_CONFIG_RE.search(msg)
        if sc:
            out.clues.append(ContextClue("engine_spec_config", {
                "method": sc["method"], "model": sc["model"], "num_speculative_tokens": int(sc["k"])}, origin))
        for rx in VERSION_RES:
            vm = rx.search(msg)
            if vm:
                out.clues.append(ContextClue("version", vm["v"], origin))
                if "model" in vm.groupdict() and vm["model"]:
                    out.clues.append(ContextClue("model", vm["model"], origin))
                return
        am = ARGS_RE.search(msg)
        if am:
            args = parse_args_literal(am["args"])
            if args is not None:
                out.clues.append(ContextClue("args", args, origin))
            return
        if START_RE.search(msg):
            out.clues.append(ContextClue("start", msg.strip(), origin))
            return
        cm = COMMAND_RE.search(msg) if " serve " in msg else None
        if cm:
            out.clues.append(ContextClue("command", cm["rest"], origin))
            return
        lv = LOGO_VERSION_RE.search(msg)
        if lv and origin.level == "INFO":
            out.clues.append(ContextClue("logo_version", lv["v"], origin))
            return
        lm = LOGO_MODEL_RE.search(msg)
        if lm and origin.level == "INFO" and "/" in lm["model"]:
            out.clues.append(ContextClue("model", lm["model"], origin))


def parse_lines(lines: Iterable[bytes | str], first_line_no: int = 1) -> ParsedLog:
    parser = LineParser()
    for i, line in enumerate(lines):
        parser.feed(line, first_line_no + i)
    return parser.result


def parse_text(text: str) -> ParsedLog:
    return parse_lines(text.splitlines())
