"""What kind of line a line is: vLLM's prefix (and the ones journald, docker, kubectl put before it), the lines
that say what the deployment is (version, model, arguments, startup and serving going on), the forms of a problem
line (a level, an exception, a traceback frame, pydantic's errors) and the needles a line must hold to be parsed.

`logparse.py` reads lines with these; `logread.py` looks for the needles before it hands a line over."""

from __future__ import annotations

import ast
import re

from bot.core.lines import without_colour
from bot.core.parsed_log import Origin, Stamp

# vLLM's own prefix: optional process tag, level, month-day time (no year), [file:line].
PREFIX_RE = re.compile(
    r"(?:\((?P<proc>[\w.-]+(?: rank=\d+)?) pid=(?P<pid>\d+)(?:, ip=[\w.:-]{1,64})?\) )?"
    r"(?P<level>DEBUG|INFO|WARNING|ERROR|CRITICAL) "
    # a logging config of the user's may add milliseconds (`10:47:07.623`)
    r"(?P<ts>\d\d-\d\d \d\d:\d\d:\d\d)(?:[.,]\d{1,6})? "
    # `[file.py:123] ` since 0.7; `file.py:123] ` (no opening bracket) in 0.6 and before
    r"(?:\[(?P<file>[^\]:]+)|(?P<file_old>[\w./-]+\.py)):(?P<line>\d+)\] "
)
# a paste that quotes the level and the file only (`WARNING [envs.py:2057] …`, no time): read only where a line
# starts with it — mid-line, another program's logger prints that shape too
TIMELESS_PREFIX_RE = re.compile(
    r"^\s{0,8}(?:\((?P<proc>[\w.-]+(?: rank=\d+)?) pid=(?P<pid>\d+)(?:, ip=[\w.:-]{1,64})?\) )?"
    r"(?P<level>DEBUG|INFO|WARNING|ERROR|CRITICAL) \[(?P<file>[\w./-]{1,200}\.py):(?P<line>\d+)\] "
)
# torch's own logger (torch/_logging: glog's layout, `W1112 00:26:33.338000 39792 path/codecache.py:604] `): the
# level's initial, month and day, the time, the process and the file
GLOG_PREFIX_RE = re.compile(
    r"^(?P<level>[IWEF])(?P<mo>\d\d)(?P<dd>\d\d) (?P<hh>\d\d):(?P<mi>\d\d):(?P<ss>\d\d)\.\d{1,6} +(?P<pid>\d{1,9}) "
    r"(?P<path>[\w./-]{1,300}\.py):(?P<line>\d{1,7})\] ")
GLOG_LEVELS = {"I": "INFO", "W": "WARNING", "E": "ERROR", "F": "CRITICAL"}
# vLLM 0.9–0.10 name a worker with its rank: `(VllmWorker rank=1 pid=3467046)`; Ray names an actor's process with
# its node's address: `(RayWorkerWrapper pid=633, ip=127.0.0.1)` (https://docs.ray.io/en/latest/ray-observability/
# user-guides/configure-logging.html)
TAG_RE = re.compile(r"\((?P<proc>[\w.-]+(?: rank=\d+)?) pid=(?P<pid>\d+)(?:, ip=[\w.:-]{1,64})?\) ")

VERSION_RES = (
    re.compile(r"vLLM server version (?P<v>[\w.+-]+), serving model (?P<model>\S+)"),
    re.compile(r"Initializing a V\d LLM engine \(v(?P<v>[\w.+-]+)\)"),
    re.compile(r"vLLM API server version (?P<v>[\w.+-]+)"),
)
LOGO_VERSION_RE = re.compile(r"\bversion (?P<v>\d+\.\d+\.\d+[\w.+-]*)\s*$")
LOGO_MODEL_RE = re.compile(r"\bmodel\s+(?P<model>\S+)\s*$")
SPEC_CONFIG_RE = re.compile(
    r"SpeculativeConfig\(method='(?P<method>[\w-]+)', model=(?:'(?P<model>[^']*)'|None), num_spec_tokens=(?P<k>\d+)\)"
)
ARGS_RE = re.compile(r"non-default args: (?P<args>\{.*\})\s*$")
START_RE = re.compile(r"Starting vLLM (?:API )?server")
# a `vllm serve …` command line a launcher or a shell printed before vLLM ran it (`+ vllm serve m --x`, `Run vLLM
# with arguments: serve m --x`): the flags it gives, which that release's parsers will take or refuse
COMMAND_RE = re.compile(r"(?:^|[\s'\"/+$])(?:vllm(?:[_-]v?\d[\w.]{0,20})?|arguments:)\s{1,4}serve\s+"
                        r"(?P<rest>[^\s-]\S{0,400}(?:\s.{0,4000})?)")
# lines vLLM (and uvicorn) print as startup goes on, and once it serves: what a warning before them was followed by
STARTUP_PROGRESS_RE = re.compile(
    r"Loading weights took|Model loading took|Available KV cache memory|GPU KV cache size|# GPU blocks|"
    r"Maximum concurrency for|Graph capturing finished|init engine \(profile, create kv cache|"
    r"Compiling a graph for|torch\.compile takes|Dynamo bytecode transform time|Platform plugin \w+ is activated|"
    r"Loading safetensors checkpoint shards: +\d{1,3}%|Capturing CUDA graphs?.*100%|Started server process|"
    r"Waiting for application startup|Uvicorn running on|Supported_tasks|Starting vLLM (?:API )?server|"
    r"Started engine process|Automatically detected platform|Initializing an? (?:V\d )?LLM engine|"
    r"Starting to load model|Loading model weights took|Using \w+ backend|This model supports multiple tasks|"
    r"Resolved architecture: \w|Using max model len \d|Chunked prefill is enabled with max_num_batched_tokens|"
    r"Overriding num_gpu_blocks=")
# vLLM's torch.compile backend reusing what an earlier start compiled (0.7.3– `Directly load the compiled graph(s)
# for … from the cache`; its needle, "compiled graph", holds an anchor the scanner has already: 0.6.6's wording,
# `Directly lookup the graph …`, is not read)
COMPILE_CACHE_LOAD_RE = re.compile(r"Directly load the compiled graph.{0,120}? from the cache")
# (the engine taking a request in — `Added request chatcmpl-…`, as vLLM's engine logs it — is serving too)
SERVING_PROGRESS_RE = re.compile(r"Application startup complete|\"(?:POST|GET) /v1/[^\"]*\" 200\b|"
                                 r"Avg generation throughput: (?!0\.0 tokens)|\bAdded request [\w.-]{6,}|"
                                 # vLLM's benchmark report: the server answered these requests
                                 r"^Successful requests:\s+[1-9]")


def strip_ansi(text: str) -> str:
    return without_colour(text)


def split_prefix(line: str) -> tuple[Origin, str]:
    """Separate vLLM's prefix (tag, level, time, [file:line]) from the message."""
    origin = Origin(line_no=None, text=line)
    m = PREFIX_RE.search(line) or TIMELESS_PREFIX_RE.match(line)
    if m:
        origin.level = m["level"]
        origin.source_file = m["file"] or m.groupdict().get("file_old")
        origin.source_line = int(m["line"])
        if ts := m.groupdict().get("ts"):
            origin.stamp = Stamp(int(ts[0:2]), int(ts[3:5]), int(ts[6:8]), int(ts[9:11]), int(ts[12:14]))
        if m["proc"]:
            origin.proc, origin.pid = m["proc"], int(m["pid"])
        return origin, line[m.end():]
    g = GLOG_PREFIX_RE.match(line)
    if g:
        origin.level = GLOG_LEVELS[g["level"]]
        origin.source_file, origin.source_line = g["path"].rsplit("/", 1)[-1], int(g["line"])
        origin.stamp = Stamp(int(g["mo"]), int(g["dd"]), int(g["hh"]), int(g["mi"]), int(g["ss"]))
        origin.pid = int(g["pid"])
        return origin, line[g.end():]
    t = TAG_RE.match(line)
    if t:
        origin.proc, origin.pid = t["proc"], int(t["pid"])
        return origin, line[t.end():]
    return origin, line


def parse_args_literal(text: str) -> dict[str, object] | None:
    try:
        value = ast.literal_eval(text)  # a Python dict repr; literal_eval runs no code
    except (ValueError, SyntaxError, MemoryError, RecursionError):
        return None
    return value if isinstance(value, dict) else None


# Prefixes that journald, docker, containerd/CRI and kubectl put before vLLM's own.
OUTER_PREFIX_RE = re.compile(
    r"^(?:"
    r"\[pod/[^\]]+\]\s*"  # kubectl logs --prefix
    r"|\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(?:\.\d+)?(?:Z|[+-]\d\d:?\d\d)?\s+(?:(?:stdout|stderr)\s+[FP]\s+)?"
    # a CI job's timestamp in brackets before each line (`[2025-02-15T00:55:01Z] `: Buildkite's, GitHub Actions')
    r"|\[\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(?:\.\d+)?(?:Z|[+-]\d\d:?\d\d)?\]\s"
    r"|[A-Z][a-z]{2}\s+\d{1,2}\s+\d\d:\d\d:\d\d\s+\S+\s+[\w@./-]+(?:\[\d+\])?:\s"  # journald / syslog
    r"|[\w.-]+\s+\|\s"  # docker compose `service  | `
    # a wrapper's logger in columns: FastChat's `2025-03-24 22:04:27 | ERROR | stderr | `, loguru's
    # `2024-01-05 10:00:00.123 | ERROR    | pkg.mod:func:42 - `
    r"|\d{4}-\d\d-\d\d \d\d:\d\d:\d\d(?:[.,]\d+)? \| [A-Z]{4,8} {0,5}\| [\w.:<>-]{1,80} (?:\||-) "
    # a logger's fields in brackets (`[2024-04-17 20:07:13,727] [ERROR] [MainThread] [asyncio] >>> `)
    r"|\[\d{4}-\d\d-\d\d \d\d:\d\d:\d\d(?:[.,]\d+)?\](?: \[[\w.-]{1,40}\]){1,4} (?:>>> ?)?"
    # a day with no time before each line (a log viewer's column, a paste's): a time after it is a logger's own
    r"|\d{4}-\d\d-\d\d (?!\d\d?:\d\d)"
    r"|\[(?:default)?rank\d+\]:\s?"  # torch.distributed's per-rank stderr prefix (`[rank0]: Traceback …`)
    # a launcher's bracketed tags before vLLM's own level (`[1/8,TP1][pid=5510] ERROR 01-28 …`)
    r"|(?:\[[\w/,.=:-]{1,40}\]){1,4} (?=(?:DEBUG|INFO|WARNING|ERROR|CRITICAL) \d\d-\d\d )"
    # the tail of vLLM's own prefix when a paste cut its head (` [multiproc_executor.py:852]   File "…"`): the
    # traceback under it is still one
    r"|\s{0,4}\[[\w.-]+\.py:\d+\]\s(?=\s*File \"|Traceback |\s{2,}\S|[A-Za-z_][\w.]*(?:Error|Exception|Exit)\b)"
    r")+"
)
# what makes a line worth parsing at all, besides the failure table's needles (lower-case)
# pydantic's `N validation error(s) for XConfig`: the lines under it say what failed — a field's name, then its
# error (`  Value error, <vLLM's message> [type=value_error, …]`); the scanner hands the parser the next lines
PYDANTIC_NEEDLE = "validation error"
PYDANTIC_LINES = 2
CARETS = frozenset("^~ ")
PYDANTIC_DETAIL_RE = re.compile(r"^\s*(?:(?P<kind>Value|Assertion) error, )?(?P<msg>.*?) \[type=(?P<type>\w+)")
# pydantic 1's error line (a validator's message, then `(type=value_error)`), as vLLM's configs printed it before
# pydantic 2
PYDANTIC_V1_RE = re.compile(r"^(?P<msg>\S.{8,1000}?) \(type=(?P<type>value_error|assertion_error)"
                            r"(?:\.(?!missing\b)\w+)*\)$")
PYDANTIC_HEAD_RE = re.compile(r"^\d+ validation errors? for (?P<cls>\w+)")
FIELD_LINE_RE = re.compile(r"^(?P<field>[a-z_][a-z0-9_]*(?:\.[a-z0-9_]+)*)$")
PARSE_NEEDLES: tuple[str, ...] = (
    "metrics: ", "avg prompt throughput", "mean acceptance length", "per-position acceptance",
    "draft acceptance rate", "accepted throughput", "number of accepted tokens", "version", "non-default args",
    "starting vllm", "serving model", "model ", "llm engine (v", "speculativeconfig(", "accepted: ",
    "acceptance", "num_accepted_tokens", "system efficiency", "compiled graph",
    # the KV cache's size against one request of max_model_len, and an override that set it
    "maximum concurrency for", "overriding num_gpu_blocks",
    # a `vllm serve …` command line printed before the server ran it (a launcher's own wording of it reaches the
    # parser in a paste, where every line does)
    "vllm serve",
)
# what makes a line a problem line (lower-case): a level, an exception, a traceback and its frames
PROBLEM_NEEDLES: tuple[str, ...] = ("warning", "error", "critical", "exception", "traceback", 'file "', "vllm/",
                                    PYDANTIC_NEEDLE, "ptxas fatal")
PARSE_NEEDLES = (*PARSE_NEEDLES, *PROBLEM_NEEDLES)
# the same words as vLLM and Python print them: the casings a case-sensitive first pass must look for
PARSE_CASINGS: tuple[str, ...] = (
    "SpecDecoding metrics: ", "Speculative metrics: ", "Avg prompt throughput", "Mean acceptance length",
    "Per-position acceptance", "Draft acceptance rate", "Accepted throughput", "Number of accepted tokens",
    "vLLM server version", "version", "non-default args", "Starting vLLM", "serving model", "model ",
    "LLM engine (v", "SpeculativeConfig(", "Accepted: ", "acceptance", "num_accepted_tokens", "System efficiency",
    "WARNING", "Warning", "warning", "ERROR", "Error", "error", "CRITICAL", "critical", "Exception", "exception",
    "Traceback", "traceback", 'File "', 'file "', "vllm/", "compiled graph", "vllm serve",
)
PROBLEM_LEVELS = frozenset({"WARNING", "ERROR", "CRITICAL"})
TRACEBACK_HEAD = "Traceback (most recent call last)"
# Python's report of an exception it could not raise (sys.unraisablehook's default output), the line above its
# traceback: one in a destructor, a callback or a finalizer — https://docs.python.org/3/library/sys.html
IGNORED_RE = re.compile(r"Exception ignored (?:in|on|while)\b")
# a frame, also one whose head a paste or an excerpt cut (`/lib/python3.11/…/vllm/config.py", line 1062, in f`)
FRAME_RE = re.compile(r'^\s*(?:File "|(?=[\w./-]*\.py", line ))(?P<file>[^"]+)", line (?P<line>\d+)'
                      r'(?:, in (?P<func>\S+))?')
# the condensed form some tools and people paste: `vllm/v1/worker/gpu_model_runner.py:301 get_output`
FRAME_SHORT_RE = re.compile(
    r"^\s*(?P<file>(?:[\w.-]+/)+[\w.-]+\.py):(?P<line>\d+)(?:\s+(?:in\s+)?(?P<func>[\w.<>]+))?\s*$")
# IPython's (Jupyter's) frames: `File ~/venv/lib/python3.11/site-packages/vllm/lora/x.py:160, in Cls.f(self, y)`
FRAME_IPY_RE = re.compile(r"^\s*File (?P<file>[~/.\w-][^:\s]{0,400}\.py):(?P<line>\d+), in (?P<func>[\w.<>]+)")
EXCEPTION_RE = re.compile(
    r"^(?P<cls>(?:[A-Za-z_]\w*\.)*[A-Za-z_]\w*(?:Error|Exception|Exit|Interrupt|Warning)"
    # torch.compile's own exceptions, named without the suffix (`torch._dynamo.exc.BackendCompilerFailed`), and
    # Triton's kernel launch over the GPU's resources (`triton.runtime.errors.OutOfResources`)
    r"|torch\._(?:dynamo|inductor)\.exc\.[A-Z]\w*|triton\.runtime\.(?:errors|autotuner)\.OutOfResources)"
    r"(?::\s*(?P<msg>.*))?$"
    # an exception's repr, as a worker logs what it caught: ValueError("type fp8e4nv not supported …")
    r"|^(?P<rcls>(?:[A-Za-z_]\w*\.)*[A-Za-z_]\w*(?:Error|Exception))\((?P<q>[\"'])(?P<rmsg>.*)(?P=q)\)$")
# pytest's report of a failure: the exception under an `E` gutter (`E       AssertionError: …`), then where it was
# raised (`vllm/v1/core/sched/scheduler.py:558: AssertionError`); outer frames end `path.py:N: in func`
PYTEST_E_RE = re.compile(r"^E {2,}(?=\S)")
PYTEST_WHERE_RE = re.compile(r"^(?P<file>[^\s:\"]+\.py):(?P<line>\d+):(?: in (?P<func>[\w.<>]+)|"
                             r" (?P<cls>(?:[A-Za-z_]\w*\.)*[A-Za-z_]\w*(?:Error|Exception))| ?)$")
# Python's `warnings` print `file.py:N: SomeWarning: message` and, when the message spans lines, its rest below
# (`RuntimeWarning: Failed to read commit hash:` then `No module named 'vllm._version'`): that rest is the warning's
PY_WARNING_HEAD = re.compile(r"\.py:\d+[^\s]{0,300}?:\s+[A-Z]\w{0,60}Warning:\s[^\n]{0,2000}:\s*$")
# a pasted list of errors (`1. ImportError: …`, `- KeyError: …`): the marker is the paste's, the line the exception's
LIST_MARKER_RE = re.compile(r"^(?:\d{1,3}[.)]|[-*•])\s+(?=(?:[A-Za-z_]\w*\.)*[A-Za-z_]\w*(?:Error|Exception):)")
PROC_TAG_RE = re.compile(r"^\s*\(\w[\w-]{0,60}(?: rank=\d+)?(?: pid=\d+)?(?:, ip=[\w.:-]{1,64})?\)")
# a frame line cut inside its path (`File "/usr/lib/python3.12/dist-packages/vllm/v1/w`) and the rest of it on the
# next line (`orker/gpu_worker.py", line 276, in execute_model`)
FRAME_HEAD_CUT_RE = re.compile(r'\bFile "[^"\s]{1,400}$')
FRAME_TAIL_RE = re.compile(r'^[\w./\\-]{1,400}\.py", line \d+')
PY_WARNING_LINE_RE = re.compile(r"\.py:\d+: [A-Z]\w{0,60}Warning:")
# what Python (and its multiprocessing and threading) print after an exception that is not its message
NOT_A_MESSAGE = ("The above exception", "During handling of the above exception", "Process ", "Exception in ",
                 "Exception ignored ", "^", "~", "Traceback")
RECORD_LEVEL_RE = re.compile(r"^\s*(?:DEBUG|INFO|WARNING|ERROR|CRITICAL)\b")


def wordy(text: str) -> bool:
    """Long enough, and enough words, to be a message rather than a value or a stray token (argparse's refusal of
    one flag is a message in three words)."""
    return (len(text) >= 24 and text.count(" ") >= 3) or _ARGPARSE_BARE.match(text) is not None


_ARGPARSE_BARE = re.compile(r"^\s*(?:[\w.-]{1,40}: ?)?(?:error: ?)?unrecognized arguments?: ?--[a-z]")


# Ray's log deduplication appends how often a line repeated across the cluster: the line is the same without it
_RAY_REPEATED_RE = re.compile(r" ?\[repeated \d{1,9}x across cluster\]\s*$")


# a line a paste set in bold (`**ModuleNotFoundError: No module named 'decord'**`): the line is the same without it
_BOLD_RE = re.compile(r"^\*\*(?=\S)(?P<line>[^*]{1,4000}?\S)\*\*\s*$")


def strip_outer_prefix(text: str) -> str:
    m = OUTER_PREFIX_RE.match(text)
    text = text[m.end():] if m else text
    if text.startswith("**") and (bold := _BOLD_RE.match(text)) is not None:
        text = bold["line"]
    return _RAY_REPEATED_RE.sub("", text) if text.endswith("]") and "across cluster" in text else text
