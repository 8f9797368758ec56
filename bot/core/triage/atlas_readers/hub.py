"""The Hugging Face Hub's refusals of a model download (HTTP 401, 403, 404), and a model name it cannot take for a
repository (a local path that is not there, an object-store URI), wherever the log prints them."""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

from bot.core.triage.atlas_readers.quoting import quoted
from bot.core.triage.findings import Finding

if TYPE_CHECKING:
    from bot.core.parsed_log import ProblemLine
    from bot.core.triage.detectors.state import State

_HUB_HTTP_RE = re.compile(r"\b(?P<code>401|403|404)\b[^\n]{0,80}?(?:for url|url):?\s*(?P<url>https://huggingface\.co/\S+)")
_WHY = {"401": "no token, or a token the Hub does not accept",
        "403": "the token has no access to this repository (a gated model whose licence was not accepted "
               "for this account)",
        "404": "the repository or revision does not exist, or is private and the token cannot see it"}


def hub_refusals(st: State) -> None:
    """A gated model whose licence is not accepted, a token missing or without access, or a name that does not
    exist."""
    if any(f.part == "hub" and f.confidence != "low" for f in st.findings):
        return
    for p in [*st.ev.parsed.problems, *st.ev.parsed.loose]:
        hm = _HUB_HTTP_RE.search(p.message) or _HUB_HTTP_RE.search(p.origin.text or "")
        entry = _ENTRY_RE.search(p.message) if hm is None else None
        if hm is not None:
            code, url = hm["code"], hm["url"]
        elif entry is not None:
            code, url = "404", entry["url"]
        else:
            continue
        repo = "/".join(url.removeprefix("https://huggingface.co/").split("/")[:2])
        at_revision = _RESOLVE_RE.search(url) if code == "404" else None
        if entry is not None and at_revision is None:
            continue  # the repository exists (a file of it is missing): no access finding says otherwise
        if at_revision is not None:
            st.findings.append(_not_at_revision(p, url, repo, at_revision, entry=entry is not None))
            return
        st.findings.append(Finding(
            id="hub-access-refused", title=f"The Hugging Face Hub refused the model download ({code}): {repo}",
            severity="critical", confidence="high",
            summary=f"HTTP {code} from the Hub for {url}: {_WHY[code]}.",
            evidence=[quoted(p)],
            remediation=[f"Open https://huggingface.co/{repo} logged in as the account whose token the server uses, "
                         "accept the licence if it is gated, then give the server that token (`HF_TOKEN`) — or "
                         "download the model where you have access and serve it from a local path.",
                         "Check the name and revision for a 404."],
            priority=30, part="model-loading", owner="huggingface_hub", knobs=["HF_TOKEN"],
            inputs=["HF_TOKEN", "checkpoint"], host=["permissions"] if code in ("401", "403") else []))
        return


# huggingface_hub's EntryNotFoundError (a 404 for one file of a repository that exists), without the status code:
# `Entry Not Found for url: https://huggingface.co/<org>/<repo>/resolve/main/config.json.`
_ENTRY_RE = re.compile(r"\bEntry Not Found for url: (?P<url>https://huggingface\.co/[^\s]{1,500}?)\.?(?:\s|$)")
# a file's download URL: https://huggingface.co/<org>/<repo>/resolve/<revision>/<file>
_RESOLVE_RE = re.compile(r"^https://huggingface\.co/[^/\s]+/[^/\s]+/resolve/(?P<rev>[^/\s]+)/(?P<file>\S+)$")
REVISION_DOC = "https://huggingface.co/docs/huggingface_hub/guides/download#from-specific-version"
_PERCENT = re.compile(r"%([0-9A-Fa-f]{2})")  # a URL's escapes (`resolve%2F6_5`), read back


def _not_at_revision(p: ProblemLine, url: str, repo: str, hit: re.Match[str], *, entry: bool) -> Finding:
    """A 404 for one file of a repository at one revision: that revision does not hold the file (`entry`: the Hub
    said so — EntryNotFound: the repository exists)."""
    rev, file = _PERCENT.sub(lambda m: chr(int(m[1], 16)), hit["rev"]), hit["file"]
    odd = "/" in rev or rev.startswith(("resolve", "tree", "blob"))
    if entry and file == "config.json" and rev in ("main", "master"):
        return _no_config(p, url, repo)
    return Finding(
        id="hub-file-not-at-revision", title=f"The Hub has no `{file}` at revision `{rev}` of {repo} (404)",
        severity="critical", confidence="medium",
        summary=(f"HTTP 404 for {url}: the repository's revision `{rev}` holds no `{file}`"
                 + (" — and that revision is a path, not the name of a branch, tag or commit." if odd else
                    " (the files are on another branch, or the revision asked for is not the one the server used).")),
        evidence=[quoted(p)],
        remediation=[f"Give the revision that holds the files as its bare name (a branch, tag or commit: "
                     f"`--revision <name>`, not a URL fragment), and the same to `--tokenizer-revision` and "
                     f"`--code-revision` when the tokenizer and code live there too; check the repository's branches "
                     f"on https://huggingface.co/{repo} ({REVISION_DOC})."],
        sources=[REVISION_DOC], priority=30, part="model-loading", owner="huggingface_hub",
        inputs=["--revision", "checkpoint"], knobs=["--revision", "--tokenizer-revision", "--code-revision"])


def _no_config(p: ProblemLine, url: str, repo: str) -> Finding:
    """The repository's default branch has no config.json: not a checkpoint in the Transformers layout vLLM reads the
    model's architecture from (a repository of GGUF files only, an adapter, weights of another format)."""
    return Finding(
        id="hub-repository-without-config", title=f"{repo} has no `config.json`: not a Transformers-layout model",
        severity="critical", confidence="medium",
        summary=(f"HTTP 404 for {url}: the repository exists, but its default branch holds no `config.json`, which "
                 "vLLM reads the architecture from. Repositories of GGUF files only, adapters (LoRA) and weights "
                 "in other formats have none."),
        evidence=[quoted(p)],
        remediation=[f"Serve the base model's repository (the one {repo} was made from), or — for GGUF — the `.gguf` "
                     "file's local path with `--tokenizer` set to the base model's repository, on a release that "
                     f"loads GGUF ({GGUF_DOC}); for an adapter, the base model with `--enable-lora`."],
        sources=[GGUF_DOC], priority=30, part="model-loading", owner="huggingface_hub",
        inputs=["checkpoint"], advice=["checkpoint"], knobs=["--tokenizer"])


GGUF_DOC = "https://docs.vllm.ai/en/latest/features/quantization/gguf.html"


# huggingface_hub's validate_repo_id quotes what it was given (src/huggingface_hub/utils/_validators.py): vLLM hands
# the model argument to the Hub only when it is not a directory on this machine
_REPO_ID_RE = re.compile(r"Repo id must (?:be in the form|use alphanumeric)[^\n]{0,200}?: '(?P<name>[^']{1,500})'")
_URI_RE = re.compile(r"^[a-z][a-z0-9+.-]{1,15}://")


# a path under vLLM's own cache root: made by vLLM (the object-store loader's local copy), not given by the user
_VLLM_CACHE_RE = re.compile(r"/\.cache/vllm/|^~/\.cache/vllm/")


def repo_id_refusals(st: State) -> None:
    """A model given as a path the server's machine does not have, or as a URI, read by the Hub as a repository."""
    if any(f.id.startswith("hub-") for f in st.findings):
        return
    for p in [*st.ev.parsed.problems, *st.ev.parsed.loose]:
        # raised, not logged: vLLM's own metadata lookups log the Hub's refusal of a local path and go on
        # (`Error retrieving safetensors: Repo id must be …, retrying 1 of 2`)
        raised = p.kind == "exception" or p.message.lstrip().startswith("Value error, ")  # pydantic's detail line
        hm = _REPO_ID_RE.search(p.message) if raised else None
        if hm is None:
            continue
        name = hm["name"]
        if _VLLM_CACHE_RE.search(name):
            title = f"vLLM's own cache path `{name[:80]}` was read as a Hugging Face repository name"
            summary = ("The path lies under vLLM's cache root (`~/.cache/vllm`, `VLLM_CACHE_ROOT`): vLLM made it — "
                       "the object-store loader's local copy of the model's files — and the code that handed it on "
                       "asked the Hub about it as a repository. The user gave no such path.")
            fix = ["This is the loading code's defect, not the model argument's: upgrade vLLM (and any plugin that "
                   "loads models — an out-of-tree model runner, a serving framework's loader — to its release made "
                   "for this vLLM), or copy the model to a local directory and serve that path."]
            knobs, advice, inputs, confidence = ["--load-format"], ["upgrade"], [], "medium"
        elif _URI_RE.match(name):
            title = f"The model URI `{name[:80]}` was read as a Hugging Face repository name"
            summary = ("vLLM passed an object-store URI to the Hub's config download: this release (or this load "
                       "format) does not read the model's files from that URI before it asks the Hub.")
            fix = ["A URI is read by the object-store loader only (`--load-format runai_streamer`, installed with "
                   "`vllm[runai]`); releases fixed how config loading treats it — upgrade, or copy the model to a "
                   "local directory and serve that."]
            knobs, advice, inputs, confidence = ["--load-format"], ["upgrade"], ["--load-format"], "high"
        elif name.startswith(("/", "./", "../", "~")) or "\\" in name:
            title = f"The model path `{name[:80]}` is not a model directory on the server's machine"
            summary = ("vLLM reads the model argument as a local directory only when it exists there (and holds "
                       "config.json); otherwise it hands it to the Hub as a repository name, which a path is not.")
            fix = [f"Check `{name[:80]}` where the server runs (inside its container: the volume mounted at that "
                   "path), that it holds `config.json` and the weights, and that the server's user can read it; "
                   "or give the Hub repository name instead."]
            knobs, advice, inputs, confidence = [], ["checkpoint"], ["checkpoint"], "high"
        else:
            continue
        for f in st.findings:
            if f.id.startswith("atlas:huggingface_hub:") and "validate_repo_id" in f.id:
                # the Hub's own check only says the name is no repository; what the name is says why
                f.severity = "info"
        st.findings.append(Finding(
            id="hub-name-not-a-repository", title=title, severity="critical", confidence=confidence,
            summary=summary, evidence=[quoted(p)], remediation=fix, priority=25, part="model-loading",
            owner="vllm", knobs=knobs, inputs=inputs, advice=advice))
        return



# ModelScope's hub answering 404 for a model id (modelscope/hub/errors.py, handle_http_response), logged by its own
# logger and quoted by vLLM's metadata lookups (`Error retrieving file list: The request model: X does not exist!`)
MODELSCOPE_ERRORS = "https://github.com/modelscope/modelscope/blob/master/modelscope/hub/errors.py"
_MODELSCOPE_404 = re.compile(r"\bThe request model: (?P<name>\S{1,300}?) does not exist!")


def modelscope_refusals(st: State) -> None:
    """ModelScope's hub has no model by the name the server was given (VLLM_USE_MODELSCOPE on): the name is not a
    ModelScope id — ids there are `namespace/name` — nor a local directory."""
    if any(f.id.startswith(("hub-", "modelscope-")) for f in st.findings):
        return
    for p in [*st.ev.parsed.problems, *st.ev.parsed.loose]:
        hm = _MODELSCOPE_404.search(p.message)
        if hm is None:
            continue
        name = hm["name"]
        if name.startswith(("/", "./", "../", "~")):
            return  # a local path asked about by vLLM's lookups: read from the path (local_path_lookups' note)
        bare = "/" not in name
        for f in st.findings:
            if f.severity != "info" and any(hm.group(0) in e for e in f.evidence):
                f.severity = "info"  # the same refusal, placed by its words: this finding says what it means
        st.findings.append(Finding(
            id="modelscope-model-not-found", title=f"ModelScope has no model `{name[:80]}` (404)",
            severity="critical", confidence="medium",
            summary=(f"With `VLLM_USE_MODELSCOPE` on, vLLM fetches the model's files from ModelScope, whose hub "
                     f"answered 404 for `{name[:80]}`"
                     + (": a name without its namespace — ModelScope's ids are `namespace/name` — and no directory "
                        "of that name where the server runs." if bare else
                        ": no model of that id there (a Hugging Face id may differ from ModelScope's).")),
            evidence=[quoted(p)],
            remediation=["Give `--model` the model's ModelScope id as its page shows it (`namespace/name`), or the "
                         "path of a local directory that holds its files (inside a container: the mounted path of "
                         "the downloaded snapshot); or turn `VLLM_USE_MODELSCOPE` off to fetch a Hugging Face id."],
            sources=[MODELSCOPE_ERRORS], priority=30, part="model-loading", owner="modelscope",
            inputs=["--model"], knobs=["--model", "VLLM_USE_MODELSCOPE"]))
        return


def local_path_lookups(st: State) -> None:
    """vLLM's own metadata lookups ask the Hub about the model argument and log the Hub's refusal of a local path
    (`Error retrieving file list: Repo id must …: '../model'., retrying 1 of 2`), then read the files from the path:
    a note, not a failure."""
    for p in st.ev.parsed.problems:
        hm = _REPO_ID_RE.search(p.message) if p.kind == "level" else None
        if hm is None or not hm["name"].startswith(("/", "./", "../", "~")):
            continue
        for f in st.findings:
            if f.severity != "info" and any(p.message[:80] in e for e in f.evidence):
                f.severity = "info"
                f.summary = (f.summary + " Not a failure: vLLM asked the Hub about the local path it was given, "
                             "logged the Hub's refusal and reads the model from the path.").strip()


# the Hub not reached at all (requests' and huggingface_hub's words for a connection that failed)
_UNREACHABLE_RE = re.compile(r"HTTPSConnectionPool\(host='huggingface\.co'|Failed to resolve '?huggingface\.co|"
                             r"couldn't connect to '?https://huggingface\.co|Connection to huggingface\.co timed out")


def hub_unreachable(st: State) -> None:
    """A raised connection failure to huggingface.co: the host cannot reach the Hub (offline, a proxy, DNS)."""
    if any(f.id.startswith("hub-") for f in st.findings):
        return
    for p in st.ev.parsed.problems:
        if p.kind != "exception" or not _UNREACHABLE_RE.search(p.message):
            continue
        st.findings.append(Finding(
            id="hub-unreachable", title="The server could not reach huggingface.co",
            severity="critical", confidence="medium",
            summary=("The model (or a file of it) was fetched from the Hugging Face Hub and the connection failed: "
                     "the host is offline, behind a proxy it was not given, or cannot resolve the Hub."),
            evidence=[quoted(p)],
            remediation=["Serve a model the host already has: give `--model` its local directory (or set "
                         "`HF_HUB_OFFLINE=1` with the model in the Hugging Face cache), or let the host reach the Hub "
                         "(`HTTPS_PROXY`, a mirror through `HF_ENDPOINT`)."],
            priority=32, part="model-loading", owner="huggingface_hub", inputs=["--model"],
            knobs=["--model", "HF_HUB_OFFLINE"], host=["network"]))
        return
