"""Below vLLM: a line the CUDA runtime, the driver, NCCL, the dynamic loader or a container's GPU runtime printed,
answered by that layer's own documentation (bot/core/catalogs.py) — who owns it, what it means, how to isolate it
and what kind of change fixes it — with the part of vLLM whose frames it came through, and that part's switch.

Runs after the knowledge base's entries (a curated entry explains its line better) and before the message atlas
(vLLM's own sites): the lines it answers are not placed again.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from bot.core import owners
from bot.core.catalogs import Entry, Hit, NcclEnv, library_named, load_catalogs
from bot.core.parsed_log import ProblemLine
from bot.core.triage.container_user import unknown_user
from bot.core.triage.evidence import latest_launch, position
from bot.core.triage.findings import Advice, Confidence, Considered, Finding, Severity
from bot.core.triage.remedy import Remedy

if TYPE_CHECKING:
    from bot.core.switches import Switch
    from bot.core.triage.detectors.state import State

PARTS = frozenset({"drafter", "spec-config", "structured-output", "quantization", "attention", "compilation",
                   "kv-cache", "scheduler", "parallel", "lora", "multimodal", "tokenizer", "model-loading", "models",
                   "entrypoint", "config", "engine", "worker", "platform"})

# a vLLM compiled module that failed to load: nothing of vLLM's own kernels works without it
_VLLM_BINARY = re.compile(r"vllm[/.](?:_C|_moe_C|_rocm_C|cumem_allocator|_flashmla_C|vllm_flash_attn)")
_CHEAP = re.compile(r"No such file or directory|executable file not found|cuda|nccl|gloo|\.so\b|glibc|nvml|nvidia|"
                    r"container|cdi|platform|amdsmi|"
                    r"watchdog|driver|device|shared memory|segment|socket|ibv_|nodes are available|csrc/|ptxas|nvcc|"
                    r"\.cuh?:\d|\.[ch]pp:\d|getpwuid|Unsupported conversion from|"
                    r"KVCache failed|plan prefill|fused moe op",
                    re.IGNORECASE)
_AMD_WORDS = re.compile(r"(?i)\bamdsmi|\bAMDSMI_|\bHIP error\b|\bhipError|\bROCm\b")
# a C++/CUDA source file a message names (`…/vllm/csrc/custom_all_reduce.cuh:310`, a library's `…/csrc/…/x.hpp:59`)
_SOURCE = re.compile(r"csrc/[\w/.+-]+\.(?:cuh|cu|cpp|cc|h|hpp):(?P<line>\d+)")
_PATH_HEAD = re.compile(r"[\w.+/-]*$")
# the source trees of kernel libraries, by the folder names their builds use
_LIBRARY_TREES = (("deep-gemm", r"deep_?gemm"), ("flashinfer", r"flashinfer"), ("flash-attn", r"flash[-_]?attn|"
                  r"flash-attention"), ("triton", r"\btriton\b"), ("cutlass", r"cutlass"), ("nccl", r"\bnccl\b"))
_TORCH_TREE = re.compile(r"(?:^|[/\\])torch[/\\]$")
# folders of a kernel library's own csrc/ that vLLM's has not: DeepGEMM's JIT kernels and its API bindings
# (https://github.com/deepseek-ai/DeepGEMM/tree/main/csrc)
_LIBRARY_LAYOUTS = (("deep-gemm", re.compile(r"csrc/(?:jit_kernels|apis)/")),)
MAX_BELOW = 3
TITLES = {"loader": "the dynamic loader", "container": "the container's GPU runtime", "cuda": "the CUDA runtime",
          "nccl": "NCCL", "nccl-hint": "NCCL"}


def below_vllm(st: State) -> set[int]:
    """Findings for the lines a lower layer printed; the positions of the lines answered."""
    ev = st.ev
    start = latest_launch(ev.parsed)
    lines = [p for p in (*ev.parsed.problems, *ev.parsed.loose) if position(p.origin) >= start
             and p.kind != "frame" and _CHEAP.search(p.origin.text or p.message)]
    explained = {e.kind for e in ev.events}
    if not lines:
        return set()
    catalogs = load_catalogs()
    handled: set[int] = set()
    seen: set[str] = set()
    made = 0
    for p in lines:
        if p.explained_by is not None and p.explained_by in explained and not _catch_all(st, p.explained_by):
            continue  # the knowledge base's own entry speaks for this line
        said = _said(p)
        hits = catalogs.hits(said)
        source = named_source(said)
        if not hits and source is None:
            missing = missing_program(st, p) or unknown_user(p)
            if missing is not None and missing.id not in seen and made < MAX_BELOW:
                seen.add(missing.id)
                handled.add(position(p.origin))
                st.findings.append(missing)
                made += 1
            continue
        handled.add(position(p.origin))
        key = hits[0].entry.name if hits else source[0] if source else ""
        if key in seen or made >= MAX_BELOW:
            continue
        seen.add(key)
        finding = _finding(st, p, hits) if hits else _source_finding(st, p, source)
        if hits and source is not None:
            _add_source(st, finding, source)
        if any(f.id == finding.id for f in st.findings):
            continue
        st.findings.append(finding)
        st.considered.append(Considered(id=finding.id, title=finding.title, status="fits",
                                        why=f"the text {TITLES[hits[0].entry.kind]} prints, in its documentation"
                                        if hits else "the source file the message names"))
        made += 1
    return handled


# a program the process tried to run, and what its absence means (the package or the host part that ships it)
_NO_SUCH = re.compile(r"No such file or directory: '(?P<path>[^']{1,300})'")
_PROGRAMS = {"vllm": ("dep", "vllm", "vLLM is not installed where the launcher looks (a product image without it, "
                                    "another environment on PATH): install it there"),
             "ray": ("dep", "ray", "Ray is not installed in this environment: install the version vLLM pins"),
             "nvcc": ("host", "cuda-toolkit", "the CUDA compiler is not on this machine or image: a JIT build "
                                              "(FlashInfer, Triton, DeepGEMM) needs the CUDA toolkit, or a "
                                              "prebuilt wheel that does not"),
             "nvidia-smi": ("host", "driver", "the NVIDIA driver's tools are not visible: no driver, or not "
                                              "mounted into the container")}


# Go's exec.LookPath error, as the container runtime (runc, via Docker or Kubernetes) reports the command it could
# not start: `exec: "--model": executable file not found in $PATH`
# (runc's message may reach the log without its `exec: `, after the orchestrator's own words)
_NOT_IN_PATH = re.compile(r'(?:exec: |^|\s)"(?P<path>[^"]{1,300})": executable file not found in \$PATH')
DOCKER_ENTRYPOINT_DOC = "https://docs.docker.com/reference/dockerfile/#entrypoint"
GO_LOOKPATH_DOC = "https://pkg.go.dev/os/exec#LookPath"


def missing_program(st: State, p: ProblemLine) -> Finding | None:
    """`[Errno 2] No such file or directory: '/usr/local/bin/vllm'`: a program the process ran is not there."""
    text = p.origin.text or p.message
    m = _NO_SUCH.search(text[:4000]) or _NOT_IN_PATH.search(text[:4000])
    if m is None:
        return None
    if m.group("path").startswith("-"):
        return _flag_as_command(p, m.group("path"), text)
    name = m.group("path").rsplit("/", 1)[-1]
    known = _PROGRAMS.get(name)
    if known is None:
        return None
    kind, what, means = known
    remedy = [f"{means[0].upper()}{means[1:]} (`which {name}` in the same environment shows it)."]
    advice: list[Advice] = []
    if kind == "dep" and _NOT_IN_PATH.search(text[:4000]):
        # the container runtime starting the image's command: the image is what lacks it
        remedy.insert(0, f"The container runtime found no `{name}` on the image's PATH: another image than meant, a "
                         f"tag without it, or a command that overrides the image's — check the image and the command; "
                         f"where the tag is the cause, use the one that last worked (pinned, rather than a moving tag) "
                         f"or a newer one that ships it, or give the command by the full path the image installs it "
                         f"at.")
        advice = ["pin", "upgrade"]
    return Finding(
        id=f"below:missing-program:{name}", title=f"The program `{name}` is not there: {m.group('path')}",
        severity="critical", confidence="medium",
        summary=f"The process tried to run `{m.group('path')}` and the OS says it does not exist: {means}.",
        evidence=[f"{p.origin.where()}: {_clip(text, 300)}"],
        remediation=remedy,
        priority=34, part="platform", owner="other" if kind == "dep" else ("driver" if what == "driver" else None),
        deps=[what] if kind == "dep" else [], host=[what] if kind == "host" else [], inputs=[name], advice=advice,
        at=position(p.origin), level=p.origin.level or "EXCEPTION")


def _flag_as_command(p: ProblemLine, flag: str, text: str) -> Finding:
    """The container's command line begins with a flag: the image has no entrypoint in front of the arguments (or
    the orchestrator's `command:` replaced it), so the runtime tried to run the flag as a program."""
    return Finding(
        id="container-command-is-a-flag", title=f"The container tried to run `{flag}` as its program",
        severity="critical", confidence="high",
        summary=(f"The container runtime could not find a program named `{flag}`: the arguments given after the "
                 "image name were run as the command, because the image has no ENTRYPOINT that takes them (or the "
                 "deployment's `command:` replaced it)."),
        evidence=[f"{p.origin.where()}: {_clip(text, 300)}"],
        remediation=["Put the program before the flags: `docker run … IMAGE vllm serve MODEL --port …` (Kubernetes: "
                     "`command: [\"vllm\", \"serve\"]` with the flags in `args`), as the image's documentation shows, "
                     "or give `--entrypoint`."],
        sources=[DOCKER_ENTRYPOINT_DOC, GO_LOOKPATH_DOC], priority=30, part="entrypoint", owner="user-script",
        advice=["fix-script"], inputs=[flag], at=position(p.origin), level=p.origin.level or "EXCEPTION")


def _said(p: ProblemLine) -> str:
    """The line as printed, and the message joined from the lines that continue it (an exception's text wrapped
    onto the next line) when that holds more."""
    text = p.origin.text or ""
    return (text if not p.message or p.message in text else f"{text} {p.message}")[:8000]


def named_source(text: str) -> tuple[str, str, str | None] | None:
    """The C++/CUDA source a message names: (path from `csrc/`, or the library's tree, the line, the library that
    owns it when it is not vLLM's)."""
    line = text[:4000]
    m = _SOURCE.search(line)
    if m is None:
        return _bare_source(line)
    before = _PATH_HEAD.search(line, max(0, m.start() - 300), m.start())
    full = (before.group(0) if before else "") + m.group(0).rsplit(":", 1)[0]
    tree = full.split("csrc/", 1)[0]
    if _TORCH_TREE.search(tree):
        return None  # PyTorch's own C++ (`Triggered internally at ../torch/csrc/…`): torch's, not a kernel's source
    for lib, rx in _LIBRARY_TREES:
        if re.search(rx, tree, re.IGNORECASE):
            return full, m.group("line"), lib
    inside = "csrc/" + full.split("csrc/", 1)[1]
    for lib, layout in _LIBRARY_LAYOUTS:
        # a library's own `csrc/` layout, printed from its build tree without the library's name on the path: only
        # where no vLLM release has a file of that name
        if layout.match(inside) and _vllm_source(inside) is None:
            return inside, m.group("line"), lib
    return inside, m.group("line"), None


def _vllm_source(path: str) -> str | None:
    """The path of the source file of that name in a vLLM release's csrc/, if one has it."""
    from bot.core.atlas import load_atlas

    return load_atlas().source_path(path.rsplit("/", 1)[-1])


# a CUDA source named by its file alone (`Cuda error custom_all_reduce.cuh:455 'invalid argument'`): vLLM's own, when
# a release's csrc/ has a file of that name
# (also behind a paste's elided path: `.../scaled_mm_c2x.cu:89`; a C++ file only when a release's csrc/ has it)
_BARE_SOURCE = re.compile(r"(?:(?<=\.\.\./)|(?<=…/)|(?<![\w/.-]))(?P<name>[\w-]{1,80}\.(?:cuh|cu|hpp|cpp)):"
                          r"(?P<line>\d+)")


def _bare_source(line: str) -> tuple[str, str, str | None] | None:
    m = _BARE_SOURCE.search(line)
    if m is None:
        return None
    path = _vllm_source(m["name"])
    return (path, m["line"], None) if path is not None else None


def _library_switch(path: str, library: str | None) -> Switch | None:
    from bot.core import switches

    if library is None:
        return switches.for_frame(path, None)
    # a kernel library's source: the switch whose names mention it (DeepGEMM's, FlashInfer's, …)
    named = [s for s in switches.load_switches() if s.functions is not None]
    by_path = [s for s in named if s.functions is not None and s.functions.search(path.replace("-", "_"))]
    lib = library.replace("-", "_")
    if lib in path.replace("-", "_").lower():
        return next(iter(by_path), None)  # the path names the library: its folders say which part
    # a library's source printed without its name (`csrc/jit_kernels/…`): the switch named for the library, before
    # those whose words merely occur in it (`gemm` in `deep_gemm`) or in the file's generic name (`fp8`)
    whole = [s for s in named if s.functions is not None and s.functions.fullmatch(lib)]
    some = [s for s in named if s.functions is not None and s.functions.search(lib)]
    return next(iter(whole or some or by_path), None)


def _source_switch(path: str, library: str | None, version: str | None) -> tuple[str, str] | None:
    sw = _library_switch(path, library)
    return sw.offer(version) if sw is not None else None


def _source_finding(st: State, p: ProblemLine, source: tuple[str, str, str | None] | None) -> Finding:
    from bot.core.atlas import load_atlas

    assert source is not None
    path, line, library = source
    text = p.origin.text or p.message
    version = st.ev.context.vllm_version
    part = load_atlas().part_of(path) if library is None else None
    if part is None:  # a kernel library's code: the part of vLLM whose switch turns it off
        sw = _library_switch(path, library)
        part = sw.part if sw is not None and sw.part in PARTS else None
    owner = library or "vllm"
    where = f"`{path}:{line}`"
    summary = (f"The message names the C++/CUDA source it came from, {where}: "
               + (f"{owners.TITLES.get(library, library)}'s own code (a kernel library vLLM builds in or calls)."
                  if library else f"vLLM's own kernels ({part or 'csrc'})."))
    remediation: list[str] = []
    knobs: list[str] = []
    switch = _source_switch(path, library, version)
    if switch is not None:
        remediation.append(switch[0])
        knobs.append(switch[1])
    remediation.append("If the part stays off-limits, report the message and the source line upstream"
                       + (f" (the library {'pinned by vLLM ' + version if version else 'this vLLM pins'}); a newer "
                          "vLLM pins a newer one." if library else "."))
    f = Finding(
        id=f"below:source:{path}"[:120], title=f"Failure in {'the kernel library ' + library if library else 'vLLM'}'s "
                                               f"C++/CUDA source {path}", severity="critical", confidence="medium",
        summary=summary, evidence=[f"{p.origin.where()}: {_clip(text, 300)}"], remediation=remediation,
        priority=32, part=part if part and part != "other" else None, owner=owner, knobs=knobs,
        deps=[library] if library and library not in ("cutlass", "nccl", "triton") else [],
        advice=["upgrade"] if library else [], at=position(p.origin), level=p.origin.level or "EXCEPTION")
    f.switch = switch[0] if switch is not None else None
    return f


def _add_source(st: State, f: Finding, source: tuple[str, str, str | None]) -> None:
    """A lower layer's error that also names the C++ source it came through: that part and its switch."""
    from bot.core.atlas import load_atlas

    path, line, library = source
    if library is None:
        part = load_atlas().part_of(path)
        if part and part != "other":
            f.part = part
    switch = _source_switch(path, library, st.ev.context.vllm_version)
    if switch is not None:
        f.remediation.insert(0, switch[0])
        f.knobs = [switch[1], *[k for k in f.knobs if k != switch[1]]]
        f.switch = switch[0]
    f.summary += f" It came through `{path}:{line}`" + (f" ({library})." if library else " (vLLM's C++ source).")


def _catch_all(st: State, entry_id: str) -> bool:
    e = st.base.get(entry_id)
    return bool(e is not None and e.catch_all)


@dataclass
class _Said(Remedy):
    """A below-vLLM finding as it is gathered: whose layer it is and what it means, beside what to do."""

    owner: str = field(default="", kw_only=True)
    summary: list[str] = field(default_factory=list)
    sources: list[str] = field(default_factory=list)  # of a switch the finding offers first
    switch: str | None = None  # the switch offered first, whatever the entry's own remedy puts before it


def _finding(st: State, p: ProblemLine, hits: list[Hit]) -> Finding:
    top = hits[0]
    e = top.entry
    # (the CUDA error inside a library's wording: the first hit that is a CUDA error's own entry, not the library's)
    cuda = top.nested[0] if top.nested else next(
        (h for h in hits if h.entry.kind == "cuda" and not library_named(h.entry.name)),
        top if top.entry.kind == "cuda" else None)
    text = p.origin.text or p.message
    fixes = list(dict.fromkeys([*top.fix, *(cuda.fix if cuda is not None and cuda is not top else ())]))
    said = _Said(owner=e.owner, host=_tagged(fixes, "host"),
                 deps=[d for d in _tagged(fixes, "dep") if d != "vllm-build"])
    binary = _VLLM_BINARY.search(text) is not None
    _explain(said, top, cuda, text, binary)
    # the variable that picks the devices the process sees: ROCm's on an AMD GPU's message
    visible = "HIP_VISIBLE_DEVICES" if _AMD_WORDS.search(text) else "CUDA_VISIBLE_DEVICES"
    inputs = [visible] if "device-visibility" in said.host else []
    arch = _TORCH_ARCH.search(text)
    if arch is not None:
        # PyTorch's own check: its build has no kernels for this GPU's capability — the torch build is at fault
        said.owner, inputs = "torch", [*inputs, "gpu"]
        said.remediation.append(f"Install a PyTorch built for sm_{arch['sm']} (its wheel index for a newer CUDA), or "
                                "the vLLM release or image whose PyTorch has it; the line beside this one lists the "
                                "capabilities this PyTorch has.")
        said.deps.append("torch")
    said.remediation += _fix_lines(fixes, said.host, top, binary)
    if "upgrade" in fixes and "upgrade" not in said.advice:
        said.advice.append("upgrade")
    if binary and "host:library" in fixes:
        # vLLM's wheels move between manylinux baselines from release to release: another release is one fix
        said.advice.append("upgrade")
    _isolation(st, p, said, top, cuda)
    inputs += _entrys_own(said, top, cuda, fixes, text)
    _versions(st, said, text, e.kind, fixes)
    level = (p.origin.level or "").upper()
    fatal = p.kind in ("exception", "loose") or level in ("ERROR", "CRITICAL") or binary \
        or said.owner in ("driver", "loader", "container-runtime")
    severity: Severity = "critical" if fatal else "warning"
    confidence: Confidence = "high" if e.kind in ("loader", "container") or said.owner == "driver" else "medium"
    finding = Finding(
        id=f"below:{e.kind}:{e.name}"[:120], title=_title(top, cuda, text), severity=severity, confidence=confidence,
        summary=" ".join(said.summary), evidence=[f"{p.origin.where()}: {_clip(text, 300)}"],
        remediation=list(dict.fromkeys(said.remediation)),
        sources=list(dict.fromkeys([*said.sources, *top.sources, *(cuda.sources if cuda is not None else ())]))[:6],
        # a CUDA error is often the consequence of what an earlier line names (a kernel's own message): after it
        priority=48 if e.kind == "cuda" else 30, part=_part(e.kind, e.name, said, e.part), owner=said.owner,
        knobs=said.knobs, advice=said.advice, deps=list(dict.fromkeys(said.deps)), host=list(dict.fromkeys(said.host)),
        at=position(p.origin), level=p.origin.level or "EXCEPTION", is_bug=False, inputs=inputs)
    finding.switch = said.switch
    return finding


# nvcc's own temporary files and build tools: a ptxas line from compiling CUDA sources (a source build of vLLM or of a
# kernel library), not from Triton's JIT
_NVCC_BUILD = re.compile(r"tmpxft_|\bnvcc\b|\.cu\b|\bninja\b")


def _entrys_own(said: _Said, top: Hit, cuda: Hit | None, fixes: list[str], text: str) -> list[str]:
    """What the entry itself says to do (its `remedy`: out of memory in vLLM's process is vLLM's memory share; a
    ptxas too old for the GPU is a toolkit's), the settings its fix names (`knob:…`), after the isolating switches;
    and the input at fault as the entry says."""
    entry = _own_entry(top, cuda)
    if entry.owner == "triton" and _NVCC_BUILD.search(text):
        # the same assembler in a build of CUDA sources: the build's target architectures decide, not Triton
        said.owner = "cuda-runtime"
        said.deps = [d for d in said.deps if d != "triton"]
        said.remediation = [r for r in said.remediation if "`triton`" not in r]
        said.remediation.insert(0, "This ptxas runs in a build of CUDA sources (nvcc): build for the GPU's "
                                   "architecture and ones this CUDA toolkit knows (`TORCH_CUDA_ARCH_LIST`), or use "
                                   "a toolkit new enough for the GPU.")
        return list(entry.inputs)
    if entry.remedy:
        said.remediation.insert(0, entry.remedy)
    said.knobs = list(dict.fromkeys([*said.knobs, *_tagged(fixes, "knob")]))
    return list(entry.inputs)


def _own_entry(top: Hit, cuda: Hit | None) -> Entry:
    """The entry whose causes and remedy the finding gives: a library's own wording of the error (FlashInfer's,
    PyTorch's) when the CUDA error inside it is its launch's own (or none is named), else that CUDA error — one a
    kernel left behind may be an earlier kernel's."""
    if library_named(top.entry.name) and (cuda is None or cuda is top or cuda.entry.name in _LAUNCH_ERRORS):
        return top.entry
    return (cuda or top).entry


# CUDA errors of a launch itself (its arguments, its image, its resources), not ones a kernel leaves behind
_LAUNCH_ERRORS = frozenset({"cudaErrorInvalidValue", "cudaErrorNoKernelImageForDevice",
                            "cudaErrorLaunchOutOfResources"})


def _explain(said: _Said, top: Hit, cuda: Hit | None, text: str, binary: bool) -> None:
    """What the layer's message means, the CUDA error inside it, the usual causes, the module that failed."""
    e = top.entry
    what = f"{top.detail}: {top.means or e.meaning}" if top.detail else (top.means or e.meaning)
    who = ("the CUDA toolkit's PTX assembler (ptxas)" if e.name.startswith("ptxas") and _NVCC_BUILD.search(text)
           else "Triton's PTX assembler (ptxas)" if e.name.startswith("ptxas") and e.owner == "triton"
           else "Triton's compiler" if e.name.startswith("triton:")
           else owners.TITLES.get(e.owner, e.owner) if e.name.startswith(f"{e.owner}: ") else TITLES[e.kind])
    said.summary.append(f"{who[0].upper()}{who[1:]} printed this ({e.name}). {' '.join(what.split())}")
    if cuda is not None and cuda is not top:
        said.summary.append(f"The CUDA error inside it is {cuda.entry.name}: {' '.join(cuda.entry.meaning.split())}")
    causes = _own_entry(top, cuda).causes
    if causes:
        said.summary.append("Usual causes: " + "; ".join(causes[:3]) + ".")
    if e.kind == "loader":
        _failed_module(said, text, e.name)
        if e.name == "undefined-symbol" and said.owner == e.owner and _TORCH_SYMBOL.search(text):
            said.owner = "torch"  # a symbol of torch's C++ (at::, c10::, torch::) the installed torch no longer has
    if binary:
        said.summary.append("The library that failed to load is one of vLLM's own compiled modules: its kernels do "
                            "not run without it.")


def _part(kind: str, name: str, said: _Said, own: str = "") -> str | None:
    if own:
        return own  # the entry's own: a kernel library's kernel of one part (FlashInfer's attention)
    if "capture" in name.lower():
        return "compilation"  # a CUDA call a graph capture does not allow: the capture (CUDA graphs) is the part
    if said.owner == "nccl":
        return "parallel"  # a CUDA call NCCL made in one of its transports
    return {"nccl": "parallel", "nccl-hint": "parallel", "container": "platform", "loader": "platform"}.get(
        kind, "platform" if said.owner == "driver" or "device-visibility" in said.host else None)


def _tagged(fixes: list[str], kind: str) -> list[str]:
    return [f.split(":", 1)[1] for f in fixes if f.startswith(kind + ":")]


# a mangled name in PyTorch's C++ namespaces (the loader catalog's own refinement of undefined-symbol says so)
_TORCH_SYMBOL = re.compile(r"undefined symbol: _ZN[K]?(?:3c10|2at|5torch)")


def _failed_module(said: _Said, text: str, entry: str) -> None:
    """The compiled module of another package that failed to load: that package was built for another torch, CUDA
    or libc than the installed ones."""
    pkg = owners.of_shared_object(text)
    if pkg is None or pkg.name in ("vllm", "python", "user-script", "loader"):
        return
    said.summary.append(f"The module that failed to load belongs to {pkg.title} (`{pkg.package}`).")
    said.remediation.append(f"Reinstall `{pkg.package}` built for the installed torch and CUDA (a wheel made for them, "
                            "or rebuilt from source against them), or install the torch it was built for.")
    said.deps.append(pkg.name if pkg.name != "plugin" else pkg.package)
    if pkg.name == "plugin":
        said.advice.append("disable-plugin")
        said.owner = "plugin"
    elif entry == "undefined-symbol":
        said.owner = pkg.name


def _isolation(st: State, p: ProblemLine, said: _Said, top: Hit, cuda: Hit | None) -> None:
    """The switch of the part the line came through, first; then what isolates the layer itself."""
    said.knobs = _isolating_knobs(top, cuda)
    if said.knobs:
        said.remediation.insert(0, "To isolate it: " + "; ".join(f"`{k}`" for k in said.knobs) + ".")
    switch = _switch(st, p, top)
    if switch is not None:
        said.remediation.insert(0, switch[0])
        said.knobs = [switch[1], *said.knobs]
        # the plan's first step only where the entry's own fix is a switch (not a memory share, not NCCL's transport)
        said.switch = switch[0] if "switch" in _own_entry(top, cuda).fix else None
    # a CUDA error NCCL printed (`transport/p2p.cc:298 NCCL WARN Cuda failure '…'`) failed inside that transport
    nccl_said = top.entry.kind.startswith("nccl") or (cuda is top and "NCCL WARN" in (p.origin.text or p.message))
    named = _transport_named(st, p) if nccl_said else None
    if named is not None:
        where, env, own = named
        if own and top.entry.kind == "cuda":
            said.owner = "nccl"
        if own:
            said.switch = None  # NCCL's own line names its transport: that variable, not a part of vLLM, comes first
        said.remediation.insert(0, (f"NCCL's own line names the transport it failed in (`{where}`)" if own else
                                    f"The NCCL WARN line of this process just before it names a transport "
                                    f"(`{where}`)") + f": `{env.name}={env.value}` turns off {env.effect.rstrip('.')}. "
                                "If the failure goes away with it, that transport (or the hardware, driver or fabric "
                                "manager under it) is at fault: run without it — at some cost in speed — while that "
                                "is checked.")
        said.knobs = list(dict.fromkeys([f"{env.name}={env.value}", *said.knobs]))
        said.sources = list(dict.fromkeys([*said.sources, *env.sources]))


# NCCL's debug lines: `host:pid:tid [rank] file.cc:N NCCL WARN …`
_NCCL_WHO = re.compile(r"(\S+:\d+:\d+) \[\d+\] (\S+\.cc):\d+ NCCL (?:WARN|INFO)\b")


def _transport_named(st: State, p: ProblemLine) -> tuple[str, NcclEnv, bool] | None:
    """The NCCL transport the failing line names; else, when the line names no NCCL source file of its own, the one
    the nearest NCCL WARN line before it names — of the same process (`host:pid:tid`) when the line says which."""
    catalogs = load_catalogs()
    text = p.origin.text or p.message
    found = catalogs.transport_switch(text)
    if found is not None:
        return (*found, True)
    who = _NCCL_WHO.search(text)
    if who is not None:
        return None  # the line is NCCL's own, from another file: that file, not a neighbour's, is where it failed
    at = position(p.origin)
    before = sorted((q for q in (*st.ev.parsed.problems, *st.ev.parsed.loose) if position(q.origin) < at
                     and "NCCL WARN" in (q.origin.text or q.message)), key=lambda q: position(q.origin))
    if not before:
        return None
    nearest = before[-1]
    found = catalogs.transport_switch(nearest.origin.text or nearest.message)
    return (*found, False) if found is not None else None


def _versions(st: State, said: _Said, text: str, kind: str, fixes: list[str]) -> None:
    """What the versions say: NCCL's own (printed on the line), a vLLM far behind, a vLLM build for another torch."""
    nccl_version = _NCCL_VERSION.search(text)
    if kind.startswith("nccl") and nccl_version is not None:
        said.remediation.append(f"This is NCCL {nccl_version.group(1)}: NCCL fixes its own bugs in later releases — "
                                "install a newer one (the `nvidia-nccl-cu*` wheel, or a torch that ships a newer NCCL; "
                                "`VLLM_NCCL_SO_PATH` points vLLM at a given library) if the switches above do not "
                                "help.")
        said.deps.append("nccl")
    stale = stale_release(st.ev.context.vllm_version)
    if stale is not None and said.owner in ("nccl", "cuda-runtime") and kind != "loader":
        said.remediation.append(stale)
        said.advice.append("upgrade")
    if "dep:vllm-build" in fixes:
        said.remediation.append("Reinstall vLLM built for the installed torch and CUDA (the wheel's CUDA and torch are "
                                "in its release notes), or install the torch that release was built for.")
        said.deps.append("torch")


_NCCL_VERSION = re.compile(r"NCCL version (\d+\.\d+\.\d+)")
_TORCH_ARCH = re.compile(r"with CUDA capability sm_(?P<sm>\d{2,3}) is not compatible with the current PyTorch")
STALE_MINORS = 8  # a release this many minor versions behind the newest the atlas read: its code has moved on


def stale_release(version: str | None) -> str | None:
    """Advice to upgrade a release far behind the newest (a crash in code rewritten since is not worth chasing on
    it), or None."""
    from bot.core.atlas import load_atlas
    from bot.core.triage.context import parse_version

    v = parse_version(version)
    rels = load_atlas().releases
    newest = parse_version(rels[-1]) if rels else None
    if v is None or newest is None or v[0] != newest[0] or newest[1] - v[1] < STALE_MINORS:
        return None
    return (f"vLLM {version} is {newest[1] - v[1]} minor releases behind {rels[-1]}: the code on this path has been "
            "rewritten since — upgrade before chasing it further (and report it there if it remains).")


def _on_the_all_reduce_path(top: Hit) -> bool:
    """NCCL's own failure, not a connection between hosts (the network) or another layer's group (Gloo)."""
    return top.entry.owner == "nccl" and "host:network" not in top.fix


def _switch(st: State, p: ProblemLine, top: Hit) -> tuple[str, str] | None:
    """The switch to try first: the part the line's traceback ran through, else — NCCL's errors and hangs — the
    all-reduce path vLLM drives NCCL through (custom all-reduce first)."""
    from bot.core import switches
    from bot.core.parts import repo_path

    kind = top.entry.kind
    version = st.ev.context.vllm_version
    frames = [f for f in st.ev.parsed.problems if f.kind == "frame" and p.traceback_id is not None
              and f.traceback_id == p.traceback_id]
    for f in reversed(frames):
        path = repo_path(f.frame_file or "")
        sw = switches.for_frame(path, f.frame_function) if path and path.startswith("vllm/") else None
        offer = sw.offer(switches.release_hint(version, path)) if sw is not None else None
        if offer is not None:
            return offer
    if kind.startswith("nccl") and _on_the_all_reduce_path(top):
        sw = switches.by_id("custom-all-reduce")
        return sw.offer(version) if sw is not None else None
    if top.entry.switch:  # a library's kernel of one part: the switch that moves that part off the library
        sw = switches.by_id(top.entry.switch)
        return sw.offer(version) if sw is not None else None
    return None


def _title(top: Hit, cuda: Hit | None, text: str) -> str:
    e = top.entry
    if e.kind == "loader":
        return f"The dynamic loader: {top.detail or e.name} — {_clip(top.means or e.meaning, 80)}"
    if e.kind == "container":
        return f"The container's GPU runtime: {_clip(top.means or e.meaning, 100)}"
    if e.kind == "cuda":
        # (an entry named for the library that prints it — `triton: …`, `flashinfer: …` — is that library's)
        lib, sep, rest = e.name.partition(": ")
        if e.owner == "torch":
            return f"PyTorch {e.name.removeprefix('pytorch: ')}: {_clip(e.meaning, 90)}"
        if sep and e.owner == lib:
            return f"{owners.TITLES.get(lib, lib)}: {rest}: {_clip(e.meaning, 90)}"
        return f"CUDA error {e.name}: {_clip(e.meaning, 90)}"
    inner = f" ({cuda.entry.name} inside)" if cuda is not None and cuda is not top else ""
    who = "NCCL" if e.owner == "nccl" else owners.TITLES.get(e.owner, e.owner)
    return f"{who}: {_clip(e.meaning, 90)}{inner}"


_HOST_WORDS = {
    "driver": "install or upgrade the NVIDIA driver on the host to one that supports this CUDA (nvidia-smi shows "
              "the driver's CUDA version; NVIDIA's compatibility table says which)",
    "container-toolkit": "give the container the GPUs and the driver's libraries: the NVIDIA container toolkit "
                         "(`--gpus all` / `--runtime nvidia`, CDI `--device nvidia.com/gpu=all`, Kubernetes "
                         "`runtimeClassName: nvidia` with the device plugin)",
    "shm": "give the container more shared memory: `--ipc=host` or `--shm-size=16g` (Kubernetes: an emptyDir with "
           "medium Memory at /dev/shm)",
    "p2p": "fix or disable GPU peer-to-peer (IOMMU/ACS in the BIOS or kernel; `NCCL_P2P_DISABLE=1` meanwhile)",
    "gpu": "a GPU this build supports (or check the GPU itself: `nvidia-smi -q`)",
    "library": "the system library it names must be there and visible to the loader — installed, and found through "
               "the environment script of the toolkit that ships it or `LD_LIBRARY_PATH` with its directory; an OS "
               "older than the binary needs a newer base image, or a build of the package for this one",
    "cuda-toolkit": "install the CUDA runtime libraries this build expects (the torch wheel's CUDA version)",
    "memory": "more host or GPU memory for it",
    "disk": "more free space on the volume it writes to (the model cache, the download folder)",
    "device-visibility": "check which devices the process sees (`CUDA_VISIBLE_DEVICES`, the container's devices, "
                         "the scheduler's assignment)",
    "network": "check the network interfaces NCCL uses (`NCCL_SOCKET_IFNAME`, firewalls between the ranks)",
    "mig": "check the MIG / vGPU configuration the process is given",
}


def _fix_lines(fixes: list[str], host: list[str], top: Hit, binary: bool) -> list[str]:
    out = [f"Host or container: {_HOST_WORDS[h]}." for h in host if h in _HOST_WORDS]
    # (an entry that says in its own words what to install for its dependency needs no generic line for it)
    own = set(top.fix) if top.entry.remedy else set()
    for dep in (f.split(":", 1)[1] for f in fixes if f.startswith("dep:") and f != "dep:vllm-build" and f not in own):
        out.append(f"Install the `{dep}` build that matches the rest (`pip show {dep} vllm`): "
                   "the versions disagree.")
    if binary and "host:library" in fixes:
        out.append("vLLM's wheel needs a newer system library than this OS has: run it on a newer OS or image, or "
                   "install a vLLM release whose wheel targets this one (its manylinux tag on PyPI names the glibc).")
    if "upgrade" in fixes:
        out.append("vLLM's own code makes this call: a later vLLM release may have fixed the path that does — read "
                   "the newer releases' notes and upgrade.")
    if "report" in fixes and not host:
        out.append("If it persists with the part switched off, report it upstream with the traceback.")
    return out


def _isolating_knobs(top: Hit, cuda: Hit | None) -> list[str]:
    """The documented switches that isolate it (an environment variable set, or a vLLM flag)."""
    out: list[str] = []
    for h in (top, cuda):
        if h is None:
            continue
        out += h.entry.switches
    if top.entry.kind.startswith("nccl") and _on_the_all_reduce_path(top):
        out += [f"{v.name}={v.value}" for v in load_catalogs().nccl_env if v.name == "NCCL_P2P_DISABLE" and v.effect]
    return list(dict.fromkeys(out))[:4]


def _clip(text: str, n: int) -> str:
    text = " ".join(text.split())
    return text if len(text) <= n else text[: n - 1] + "…"

