"""A cache directory the server cannot write (`PermissionError: [Errno 13] Permission denied: '/.triton'`, a
read-only file system): whose cache it is, the variable that moves it, and — when it lies right under `/` — that the
process's HOME is `/` (a container run under an arbitrary non-root user, as OpenShift's restricted policy does).

Each cache, its owner, the part of vLLM that writes it and its variable, from the code that reads the variable."""

from __future__ import annotations

import re
from dataclasses import dataclass

from bot.core import owners
from bot.core.parsed_log import ProblemLine
from bot.core.triage.detectors.state import Found, State
from bot.core.triage.evidence import position
from bot.core.triage.findings import Finding

# OpenShift runs a container as an arbitrary user in the root group: what it writes must be group-writable
OWNERSHIP_DOC = "https://docs.openshift.com/container-platform/4.14/openshift_images/create-images.html"


@dataclass(frozen=True)
class Cache:
    component: re.Pattern[str]  # a path component (or two) that names the cache
    owner: str
    part: str | None
    variable: str
    what: str
    source: str
    sure: bool = True  # the path names the cache; False for the root several caches share (whose it is, a guess)


CACHES: tuple[Cache, ...] = (
    Cache(re.compile(r"(?:^|/)\.triton(?:/|$)|/triton/cache(?:/|$)"), "triton", "compilation", "TRITON_CACHE_DIR",
          "Triton's kernel cache (torch.compile and vLLM's Triton kernels compile into it)",
          "https://github.com/pytorch/pytorch/blob/main/torch/_inductor/runtime/cache_dir_utils.py"),
    Cache(re.compile(r"(?:^|/)torchinductor_[^/]*(?:/|$)"), "torch", "compilation", "TORCHINDUCTOR_CACHE_DIR",
          "torch.compile's Inductor cache",
          "https://github.com/pytorch/pytorch/blob/main/torch/_inductor/runtime/cache_dir_utils.py"),
    Cache(re.compile(r"(?:^|/)\.cache/vllm(?:/|$)"), "vllm", "compilation", "VLLM_CACHE_ROOT",
          "vLLM's own cache (compiled graphs, downloaded assets)",
          "https://github.com/vllm-project/vllm/blob/main/vllm/envs.py"),
    Cache(re.compile(r"(?:^|/)\.config(?:/vllm)?(?:/|$)"), "vllm", None, "VLLM_CONFIG_ROOT",
          "vLLM's config folder (usage statistics)",
          "https://github.com/vllm-project/vllm/blob/main/vllm/envs.py"),
    Cache(re.compile(r"(?:^|/)\.cache/huggingface(?:/|$)"), "huggingface_hub", "model-loading", "HF_HOME",
          "the Hugging Face cache (downloaded weights and tokenizers)",
          "https://github.com/huggingface/huggingface_hub/blob/main/src/huggingface_hub/constants.py"),
    # the Hub's own layout inside whatever folder holds its cache (`models--org--name`, `.locks`), as huggingface_hub
    # names a repository's folder (file_download.repo_folder_name): a cache set elsewhere, such as a mounted volume
    Cache(re.compile(r"(?:^|/)(?:models|datasets|spaces)--[^/]+--[^/]+(?:/|$)|(?:^|/)\.locks(?:/|$)"),
          "huggingface_hub", "model-loading", "HF_HUB_CACHE",
          "the Hugging Face Hub cache (a repository's folder in it: the Hub writes its locks, links and downloads "
          "there)",
          "https://github.com/huggingface/huggingface_hub/blob/main/src/huggingface_hub/file_download.py"),
    # the cache root itself (`~/.cache`, not yet made): the first to write under it at startup is the model's
    # download into the Hugging Face cache; XDG_CACHE_HOME moves the root for it and for vLLM's own
    Cache(re.compile(r"(?:^|/)\.cache/?$"), "huggingface_hub", "model-loading", "HF_HOME",
          "the cache root (~/.cache: the Hugging Face cache, and vLLM's, under it; XDG_CACHE_HOME moves them all)",
          "https://github.com/huggingface/huggingface_hub/blob/main/src/huggingface_hub/constants.py", sure=False),
)
# (a paste may retype Python's words in another case: `permissionError: [error 13] Permission denied: '/.cache'`)
# (a paste may lose the quotes around the path: `Permission denied: /usr/local/lib/…/flashinfer_cubin/cubins`)
_DENIED = re.compile(r"\[(?:Errno|error) (?:13|30)\] (?:Permission denied|Read-only file system): "
                     r"(?:'(?P<path>/[^'\n]{0,300})'|(?P<bare>/[^\s']{1,300}))", re.IGNORECASE)
# a folder inside an installed package (`…/dist-packages/flashinfer_cubin/cubins/…`): the package writes beside its
# own code at run time (generated kernels, links to its binaries)
_INSTALLED = re.compile(r"/(?:site|dist)-packages/(?P<pkg>[A-Za-z_]\w{0,80})/")


_ERRNO = re.compile(r"\[(?:Errno|error) \d", re.IGNORECASE)


def _cache_of(path: str) -> Cache | None:
    return next((c for c in CACHES if c.component.search(path)), None)


def _denied(problems: list[ProblemLine]) -> list[tuple[ProblemLine, str, Cache | None]]:
    """The paths writing was refused at: a cache's (each cache once), or a folder inside an installed package."""
    out: list[tuple[ProblemLine, str, Cache | None]] = []
    for p in problems:
        if p.kind not in ("exception", "level", "loose") or _ERRNO.search(p.message) is None:
            continue
        for m in _DENIED.finditer(p.message):
            path = m["path"] or m["bare"]
            cache = _cache_of(path)
            if cache is not None and all(c is not cache for _, _, c in out):
                out.append((p, path, cache))
            elif cache is None and _package_folder(p, path) and all(q != path for _, q, _ in out):
                out.append((p, path, None))
    return out


def unwritable_caches(st: State) -> Found:
    out = Found()
    for p, path, cache in _denied(list(st.ev.parsed.problems)):
        if cache is None:
            out.findings.append(_installed_package(p, path))
            continue
        at_root = path.count("/") == 1 or path.startswith(("/.triton", "/.cache", "/.config"))
        remediation = [f"Give `{cache.variable}` a writable folder (a volume, or a folder under /tmp) in the server's "
                       f"environment: {cache.what} goes there instead of `{path}`."]
        if at_root:
            remediation.append("The path lies under `/`: the process's HOME is `/` — the image runs as a user without "
                               "a home of its own (OpenShift's restricted policy gives each pod an arbitrary non-root "
                               "user). Set HOME to a writable folder, or mount one where the caches go.")
        fatal = p.kind == "exception" or (p.origin.level or "").upper() in ("ERROR", "CRITICAL")
        how = "read-only" if re.search(r"(?:Errno|error) 30", p.message, re.IGNORECASE) else "permission denied"
        if how == "read-only":
            hub = cache.owner == "huggingface_hub"
            offline = (" — or, for a Hub cache that already holds every file and is read-only on purpose, "
                       "`HF_HUB_OFFLINE=1`, so the Hub writes nothing there") if hub else ""
            remediation.insert(0, f"`{path}` lies on a file system mounted read-only (a volume mounted read-only, or "
                                  f"a read-only root file system): mount it read-write, or move the cache off "
                                  f"it{offline}.")
        out.findings.append(Finding(
            id=f"unwritable-cache:{cache.variable}", title=f"The server cannot write {cache.what}: `{path}`",
            severity="critical" if fatal else "warning", confidence="medium" if cache.sure else "low",
            summary=f"Writing `{path}` was refused ({how}). It is {cache.what}, whose folder `{cache.variable}` sets.",
            evidence=[f"{p.origin.where()}: {p.message[:300]}"], remediation=remediation, sources=[cache.source],
            priority=30, part=cache.part, owner=cache.owner, inputs=[cache.variable], knobs=[cache.variable],
            host=["permissions"], at=position(p.origin), level=p.origin.level or "EXCEPTION"))
    return out


# a file's name (an extension) or a program's folder: Errno 13 there is as often a read or a run refused as a write
_FILE_OR_PROGRAM = re.compile(r"\.[A-Za-z0-9]{1,8}$|/(?:s?bin|libexec)/")


def _package_folder(p: ProblemLine, path: str) -> bool:
    """A folder inside an installed package (not a file, not a program, not a namespace shared by packages) the
    process was refused — or any path there on a read-only file system, which only writing meets."""
    found = _INSTALLED.search(path)
    if found is None or found["pkg"] in _NAMESPACES:
        return False
    return _read_only(p) or _FILE_OR_PROGRAM.search(path) is None


# top-level folders several distributions share (NVIDIA's CUDA wheels): no one package's
_NAMESPACES = frozenset({"nvidia", "google", "azure"})


def _read_only(p: ProblemLine) -> bool:
    return re.search(r"(?:Errno|error) 30", p.message, re.IGNORECASE) is not None


def _installed_package(p: ProblemLine, path: str) -> Finding:
    """Writing refused inside an installed package's own folder: the package writes beside its code at run time,
    and the folder belongs to whoever installed it (root, in an image) while the server runs as another user, or the
    image's file system is read-only."""
    found = _INSTALLED.search(path)
    package = found["pkg"] if found else path
    owner = owners.of_package(package)
    how = "read-only" if _read_only(p) else "permission denied"
    fatal = p.kind == "exception" or (p.origin.level or "").upper() in ("ERROR", "CRITICAL")
    return Finding(
        id=f"unwritable-package:{package}", title=f"The server cannot write inside the installed package "
                                                  f"`{package}`: `{path}`",
        severity="critical" if fatal else "warning", confidence="medium",
        summary=(f"Writing `{path}` was refused ({how}). It lies inside `{package}`'s own install folder: the "
                 f"package writes files beside its code at run time (generated or linked kernels, a cache), and the "
                 "folder belongs to the user that installed it — root, in an image — while the server runs as another "
                 "user (a non-root user, an arbitrary one under OpenShift), or the file system is read-only."),
        evidence=[f"{p.origin.where()}: {p.message[:300]}"],
        remediation=[f"Make `{path.rsplit('/', 1)[0]}` writable for the user the server runs as (in the image: "
                     "`chgrp -R 0` and `chmod -R g+w` on it, OpenShift's arbitrary users being in group 0), or run "
                     "the server as the user that installed the package — or, on a read-only file system, mount that "
                     "folder writable."],
        sources=[OWNERSHIP_DOC], priority=30, owner=owner.name, host=["permissions"], at=position(p.origin),
        level=p.origin.level or "EXCEPTION")
