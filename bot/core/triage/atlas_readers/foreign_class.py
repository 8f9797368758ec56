"""`type object 'XBackend' has no attribute 'is_y'`: a class no vLLM release defines, missing a method vLLM's own
classes of the same kind (`…Backend`) have — an out-of-tree class (a plugin's, an out-of-tree platform's) written
against another vLLM release's interface, called by this one.

The code's history decides both halves: the class is in no release read, the method is defined by classes of vLLM's
whose names end in the same word. The release that first has the method says from which vLLM on the plugin's class
falls short."""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

from bot.core import owners
from bot.core.history import History, load_history
from bot.core.triage.atlas_readers.api_surface import API_FILES
from bot.core.triage.atlas_readers.candidates import Candidate
from bot.core.triage.atlas_readers.quoting import quoted
from bot.core.triage.atlas_readers.releases import newer
from bot.core.triage.findings import Finding

if TYPE_CHECKING:
    from bot.core.atlas import Atlas

_NO_ATTR = re.compile(r"^(?:type object '(?P<tcls>[A-Z]\w{2,80})'|'(?P<cls>[A-Z]\w{2,80})' object) has no attribute "
                      r"'(?P<attr>\w{1,80})'")
# a class's own `__getattr__` in its own words, unquoted (transformers' tokenizers: `X has no attribute y`)
_NO_ATTR_BARE = re.compile(r"^(?P<cls>[A-Z]\w{2,80}) has no attribute (?P<attr>\w{1,80})$")
# the last word of a CamelCase name: what kind of thing the class is. Only the kinds out-of-tree code supplies to
# vLLM through its plugin system (platforms and what they bring: attention backends, workers, executors, model runners,
# communicators; KV connectors; schedulers): a `…Config` or `…Tokenizer` is most often Hugging Face's, not a plugin's
_KIND = re.compile(r"(?:Backend|Platform|Connector|Worker|Executor|Runner|Communicator|Scheduler)$")
PLUGIN_ENV = "VLLM_PLUGINS"


def no_attribute(cand: Candidate, bare: bool = False) -> tuple[str, str] | None:
    """The class and the attribute of an AttributeError in Python's words (or, with `bare`, a class's own)."""
    p = cand.line
    if (p.exception or "").rsplit(".", 1)[-1] != "AttributeError":
        return None
    text = p.message.strip()
    hit = _NO_ATTR.match(text) or (_NO_ATTR_BARE.match(text) if bare else None)
    return (hit.groupdict().get("tcls") or hit["cls"], hit["attr"]) if hit is not None else None


def foreign_class(atlas: Atlas, cand: Candidate, version: str | None) -> Finding | None:
    named = no_attribute(cand)
    if named is None:
        return None
    cls, attr = named
    hist = load_history()
    found = _interface_of(atlas, hist, cand, cls, attr) if hist is not None else None
    if found is None or hist is None:
        return None
    base, path, inner = found
    newest = hist.releases[-1]
    if inner is None and version and newer(version, newest):
        return None  # a release newer than any read may define the class itself
    rels = hist.function_releases(path, attr)
    since = f" (vLLM's `{base}.{attr}` is in vLLM {rels[0]}–{rels[-1]} of the releases read)" if rels else ""
    called = "vLLM's own code calls it" if inner is not None else "the line alone does not say who called it"
    return _out_of_tree(
        atlas, cand, version, f"foreign-class:{cls}.{attr}", path, inner,
        f"`{cls}`, a class from outside vLLM, lacks `{attr}`, which vLLM's own `{base}` has",
        f"AttributeError: `{cls}` is a class no vLLM release read (up to {newest}) defines or names, and `{attr}` is "
        f"a method of vLLM's own `{base}` ({path}){since}; {called}. An out-of-tree class — a plugin's or an "
        "out-of-tree platform's — written against another vLLM release's interface.", [cls])


def _out_of_tree(atlas: Atlas, cand: Candidate, version: str | None, fid: str, path: str,
                 inner: owners.Owner | None, title: str, summary: str, inputs: list[str]) -> Finding:
    """A class from outside vLLM that does not fit the interface vLLM calls: the plugin's (or the framework's that
    hands vLLM the class) release made for this vLLM, or vLLM pinned to the one it supports; and how to run
    without it."""
    target = f"vLLM {version}" if version else "your vLLM release"
    return Finding(
        id=fid, title=title, severity="critical", confidence="medium" if inner is not None else "low",
        summary=summary, evidence=[quoted(cand.line)],
        remediation=[f"Install the release of the plugin (or the package that hands vLLM the class) made for "
                     f"{target} (its release notes or requirements name the vLLM it supports), or pin vLLM to the "
                     "release it supports.",
                     f"To confirm, run without it: `{PLUGIN_ENV}=` (empty) loads no general plugin; an out-of-tree "
                     "platform is left out by uninstalling it, a class passed by name (`--distributed-executor-"
                     "backend`, `--worker-cls`) by not passing it."],
        sources=[owners.PLUGIN_DOC], priority=40, part=atlas.part_of(path), owner="plugin", inputs=inputs,
        advice=["disable-plugin", "pin"])


def _interface_of(atlas: Atlas, hist: History, cand: Candidate, cls: str,
                  method: str) -> tuple[str, str, owners.Owner | None] | None:
    """For a class no vLLM release defines, of a kind plugins supply, called by vLLM's code (or by code the line does
    not show): vLLM's own class of that kind whose `method` the most releases have — the interface's, not one
    backend's override — its file, and the caller's owner."""
    kind = _KIND.search(cls)
    if kind is None or _vllms(atlas, hist, cls):
        return None
    inner = owners.of_path(cand.frames[-1].frame_file or "") if cand.frames else None
    if inner is not None and inner.name != "vllm":
        return None  # another's code called it (the user's, a library's): the frames say whose, frame_first names it
    bases = [(c, f) for c, f in hist.classes_with(method) if c.endswith(kind.group(0)) and c != cls]
    if not bases:
        return None
    base, path = max(bases, key=lambda b: (len(hist.function_releases(b[1], method)), -len(b[0])))
    return base, path, inner


def _vllms(atlas: Atlas, hist: History, cls: str) -> bool:
    """A class of vLLM's: defined with methods in a release read, named by its messages or code (a class with no
    methods of its own), or one vLLM makes at run time by prefixing one of its own (`ChunkedLocalAttention_X`)."""
    if hist.has_class(cls) or atlas.mentions(cls):
        return True
    _, sep, tail = cls.rpartition("_")
    return bool(sep) and (hist.has_class(tail) or atlas.mentions(tail))


# owners whose frame is no caller of vLLM's API: vLLM itself, Python, and the layers under it
_NOT_CALLERS = ("vllm", "python", "torch", "cuda-runtime", "driver", "nccl", "loader")


def stale_caller(atlas: Atlas, cand: Candidate, version: str | None) -> Finding | None:
    """`'AsyncLLM' object has no attribute 'engine'` raised in another's code (a serving framework, a trainer, the
    user's program): the class is vLLM's, the attribute is one that code expects from another vLLM release (or the
    other engine). The caller's frame says whose code to change; the fix is the caller's release made for this vLLM,
    or the vLLM release the caller was written for."""
    p = cand.line
    named = no_attribute(cand)
    if named is None or not cand.frames:
        return None
    cls, attr = named
    inner = owners.of_path(cand.frames[-1].frame_file or "")
    hist = load_history()
    path = atlas.class_file(cls)
    # a class of vLLM's API only (`AsyncLLM`, `LLM`, `EngineArgs`): `Request` or `Sampler` is as likely Starlette's or
    # PyTorch's as vLLM's
    if inner is None or inner.name in _NOT_CALLERS or hist is None or path is None or not hist.has_class(cls) \
            or not path.startswith(API_FILES):
        return None
    had = hist.function_releases(path, attr)
    if had and hist.release_at(version) in had:
        return None  # this release has it: something else is wrong (a half-built object), not the caller's age
    when = (f" vLLM's `{cls}` had `{attr}` in {had[0]}–{had[-1]} of the releases read." if had else
            f" `{attr}` is no method of `{cls}` in any release read: the caller expects another of vLLM's classes "
            "in its place (another engine, an older interface).")
    own = inner.name == "user-script"
    caller = "your program" if own else f"`{inner.package}`"
    where = cand.frames[-1].frame_file or ""
    target = f"vLLM {version}" if version else "this vLLM"
    first = (f"Update your program for {target}: read what replaced `{cls}.{attr}` in its {path}; or pin vLLM to "
             "the release the program was written for." if own else
             f"Install the release of {caller} made for {target} (its requirements or release notes name the vLLM "
             "it supports), or pin vLLM to the release it was written for.")
    return Finding(
        id=f"stale-caller:{cls}.{attr}", title=f"{caller} reads `{cls}.{attr}`, which this vLLM's `{cls}` does not "
                                              "have",
        severity="critical", confidence="medium",
        summary=(f"AttributeError raised in {caller} ({where}), not in vLLM: it reaches into vLLM's `{cls}` ({path}) "
                 f"for `{attr}`, written against another vLLM release or engine than this one.{when}"),
        evidence=[quoted(p)], remediation=[first],
        priority=40, part=atlas.part_of(path), owner=inner.name if inner.name in ("user-script", "plugin") else "other",
        inputs=[cls], advice=["pin"], deps=[inner.package] if inner.name != "user-script" else [],
        callers_release=True)


_KWARG_REFUSED = re.compile(r"^(?P<cls>[A-Z]\w{2,80})\.(?P<fn>\w{1,80})\(\) got an unexpected keyword argument "
                            r"'(?P<kw>\w{1,80})'")


def foreign_signature(atlas: Atlas, cand: Candidate, version: str | None) -> Finding | None:
    """`XExecutor.collective_rpc() got an unexpected keyword argument 'y'`: a class no vLLM release defines, of a
    kind plugins supply, overriding a method vLLM's own classes of that kind have — vLLM calls the method with an
    argument the out-of-tree override, written against another release's interface, does not take."""
    p = cand.line
    hit = _KWARG_REFUSED.match(p.message.strip()) \
        if (p.exception or "").rsplit(".", 1)[-1] == "TypeError" else None
    hist = load_history() if hit is not None else None
    if hit is None or hist is None:
        return None
    cls, fn, kw = hit["cls"], hit["fn"], hit["kw"]
    found = _interface_of(atlas, hist, cand, cls, fn)
    if found is None:
        return None
    base, path, inner = found
    return _out_of_tree(
        atlas, cand, version, f"foreign-signature:{cls}.{fn}", path, inner,
        f"`{cls}.{fn}()`, from outside vLLM, does not take `{kw}`, which vLLM's own `{base}.{fn}` is called with",
        f"TypeError: `{cls}` is a class no vLLM release read defines or names; it overrides `{fn}` of vLLM's "
        f"`{base}` ({path}), and the caller passes `{kw}`, an argument the override does not take. An out-of-tree "
        "class — a plugin's, or the executor or worker class a framework hands vLLM — written against another vLLM "
        "release's interface.", [cls, kw])


_IMPORT_REFUSED = re.compile(r"^cannot import name '(?P<name>\w{1,80})' from '(?P<mod>vllm(?:\.\w{1,80}){0,8})'|"
                             r"^No module named '(?P<module>vllm(?:\.\w{1,80}){1,8})'")


def stale_import(atlas: Atlas, cand: Candidate, version: str | None) -> Finding | None:
    """`cannot import name 'X' from 'vllm.y'` or `No module named 'vllm.y.z'` raised in another's code (a trainer, a
    serving framework, the user's program): the caller was written against a vLLM release that had it there. The
    code's history says which releases had it: the caller's release made for this vLLM, or vLLM moved into them."""
    p = cand.line
    hit = _IMPORT_REFUSED.match(p.message.strip()) \
        if (p.exception or "").rsplit(".", 1)[-1] in ("ImportError", "ModuleNotFoundError") and cand.frames else None
    inner = owners.of_path(cand.frames[-1].frame_file or "") if hit is not None else None
    hist = load_history() if inner is not None and inner.name not in _NOT_CALLERS else None
    if hit is None or inner is None or hist is None:
        return None
    what, had, path = _imported(hist, hit)
    if not had or hist.release_at(version) in had or (version and not newer(version, had[-1])
                                                      and not newer(had[0], version)):
        return None  # no release read had it, or this one lies among those that have it: not the caller's age
    # the release unknown: what the newest release read still has, the caller's vLLM lacked for being older
    older = newer(had[0], version) if version else had[-1] == hist.releases[-1]
    own = inner.name == "user-script"
    caller = "your program" if own else f"`{inner.package}`"
    target = f"vLLM {version}" if version else "this vLLM"
    move = (f"upgrade vLLM to {had[0]} or later (the first release read with it)" if older else
            f"pin vLLM to {had[-1]} (the last release read with it)")
    first = (f"Update your program for {target}, or {move}." if own else
             f"Install the release of {caller} made for {target} (its requirements or release notes name the vLLM "
             f"it supports), or {move}.")
    return Finding(
        id=f"stale-import:{what}", title=f"{caller} imports `{what}`, which this vLLM does not have",
        severity="critical", confidence="medium",
        summary=(f"{p.exception} raised in {caller} ({cand.frames[-1].frame_file or ''}), not in vLLM: it imports "
                 f"`{what}`, which vLLM has in {had[0]}–{had[-1]} of the releases read ({path}): the caller was "
                 f"written against {'a newer' if older else 'an older'} vLLM release."),
        evidence=[quoted(p)], remediation=[first], priority=40,
        part=atlas.part_of(path), owner=inner.name if inner.name in ("user-script", "plugin") else "other",
        inputs=[what], advice=["upgrade"] if older else ["pin"], deps=[inner.package] if not own else [],
        callers_release=True)


def _imported(hist: History, hit: re.Match[str]) -> tuple[str, list[str], str]:
    """What was imported, the releases read that have it, and its file (a class's, or a module's or package's)."""
    if hit["module"]:
        base = hit["module"].replace(".", "/")
        files = [f for f in (base + ".py", base + "/__init__.py") if hist.has_file(f)]
        rels = sorted({r for f in files for r in hist.module_releases(f)}, key=hist.releases.index)
        return hit["module"], rels, files[0] if files else base
    name, mod = hit["name"], hit["mod"]
    path = next((f for f in (mod.replace(".", "/") + ".py", mod.replace(".", "/") + "/__init__.py")
                 if hist.has_file(f)), None)
    # a class (its methods' releases), or a module-level function of that name
    rels = (hist.class_releases(path, name) or hist.function_releases(path, name)) if path is not None else []
    return f"{mod}.{name}", rels, path or ""
