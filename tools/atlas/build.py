"""Build the vLLM message atlas (`bot/core/knowledge/atlas/`) from the released source of vLLM,
huggingface_hub and transformers, as the package index serves it.

    python3 tools/atlas/build.py                       # every release the atlas covers (see `select`)
    python3 tools/atlas/build.py --releases vllm==0.33.0 vllm==0.32.0 --out /tmp/atlas
    python3 tools/atlas/build.py --metrics-only        # just metrics_templates.json (vLLM releases only)

One release at a time per worker: the sdist (or, without one, a wheel) is downloaded, its `.py`
members read straight from the archive (nothing installed, nothing of it imported), and the download
deleted. The output is a function of the releases read, so a rebuild over the same releases writes
the same data but for the build date.
"""

from __future__ import annotations

import argparse
import datetime as dt
import gzip
import json
import multiprocessing
import os
import sys
import tarfile
import tempfile
import time
import zipfile
from collections import defaultdict
from pathlib import Path
from typing import Any

import httpx
from packaging.version import InvalidVersion, Version

sys.path.insert(0, str(Path(__file__).resolve().parent))
from extract import SEP, Release, cli_flags, read_cpp, read_file

ROOT = Path(__file__).resolve().parents[2]
DEFAULT_OUT = ROOT / "bot" / "core" / "knowledge" / "atlas"
# the folder a package's source lives in inside its GitHub repository (what links point at)
REPO_ROOT = {"vllm": "vllm/", "huggingface_hub": "src/huggingface_hub/", "transformers": "src/transformers/"}
REPOS = {"vllm": "vllm-project/vllm", "huggingface_hub": "huggingface/huggingface_hub",
         "transformers": "huggingface/transformers"}
FORMAT = 3


def index_url(package: str) -> str:
    base = os.environ.get("PIP_INDEX_URL")
    if not base:
        from pip._internal.models.index import PyPI

        base = PyPI.simple_url
    return base.rstrip("/") + f"/{package}/"


def listing(client: httpx.Client, package: str) -> dict[str, Any]:
    r = client.get(index_url(package), headers={"Accept": "application/vnd.pypi.simple.v1+json"})
    r.raise_for_status()
    data: dict[str, Any] = r.json()
    return data


def _final(versions: list[str]) -> list[Version]:
    out = []
    for v in versions:
        try:
            pv = Version(v)
        except InvalidVersion:
            continue
        if not (pv.is_prerelease or pv.is_devrelease or pv.local):
            out.append(pv)
    return sorted(set(out))


def _last_of_each_minor(vs: list[Version], since: Version) -> list[Version]:
    best: dict[tuple[int, int], Version] = {}
    for v in vs:
        if v >= since:
            key = (v.major, v.minor)
            best[key] = max(best.get(key, v), v)
    return sorted(best.values())


def select(package: str, versions: list[str]) -> list[str]:
    """The releases the atlas reads: last patch of each minor (vLLM since 0.2, huggingface_hub since 0.20,
    transformers since 4.40), and for vLLM every release since 0.18 and 0.6.3."""
    vs = _final(versions)
    if package == "vllm":
        # the old minors too (0.2–0.5, and 0.6.3 beside 0.6.6): threads from then name those releases, and the code's
        # history says what changed after them
        chosen = (set(_last_of_each_minor(vs, Version("0.2"))) | {v for v in vs if v >= Version("0.18")}
                  | {v for v in vs if v == Version("0.6.3")})
    elif package == "huggingface_hub":
        chosen = set(_last_of_each_minor(vs, Version("0.20")))
    else:
        chosen = set(_last_of_each_minor(vs, Version("4.40")))
    return [str(v) for v in sorted(chosen)]


def pick_file(files: list[dict[str, Any]], package: str, version: str) -> dict[str, Any] | None:
    norm = package.replace("-", "_").lower()

    def ver_of(name: str) -> str | None:
        stem = name[: -len(".tar.gz")] if name.endswith(".tar.gz") else name
        head, _, rest = stem.partition("-")
        if head.replace("-", "_").lower() != norm:
            return None
        return rest.split("-")[0]

    live = [f for f in files if not f.get("yanked")]
    sdists = [f for f in live if f["filename"].endswith(".tar.gz") and ver_of(f["filename"]) == version]
    if sdists:
        return sdists[0]
    wheels = [f for f in live if f["filename"].endswith(".whl") and ver_of(f["filename"]) == version]
    wheels.sort(key=lambda f: (0 if "none-any" in f["filename"] else 1 if "x86_64" in f["filename"] else 2,
                               f.get("size") or 0))
    return wheels[0] if wheels else None


def _members(path: Path, cpp: bool = False) -> Any:
    """(path inside the repository, text) of each .py member of an sdist or a wheel (and with `cpp`, each file of
    an sdist's `csrc/`)."""
    if path.name.endswith(".whl"):
        with zipfile.ZipFile(path) as z:
            for info in z.infolist():
                if info.filename.endswith(".py"):
                    yield info.filename, z.read(info).decode("utf-8", "replace")
        return
    with tarfile.open(path, "r:gz") as t:
        for m in t:
            inner = m.name.split("/", 1)[1] if "/" in m.name else m.name
            if m.isfile() and (m.name.endswith(".py") or (cpp and inner.startswith("csrc/"))):
                f = t.extractfile(m)
                if f is not None:
                    yield m.name.split("/", 1)[1] if "/" in m.name else m.name, f.read().decode("utf-8", "replace")


def read_release(job: tuple[str, str, dict[str, Any], bool]) -> Release:
    package, version, info, metrics_only = job
    rec = Release(package, version)
    root = REPO_ROOT[package]
    with tempfile.TemporaryDirectory(prefix="atlas-") as tmp:
        dest = Path(tmp) / info["filename"]
        with httpx.Client(timeout=600, follow_redirects=True) as c, c.stream("GET", info["url"]) as r:
            r.raise_for_status()
            with dest.open("wb") as out:
                for chunk in r.iter_bytes(1 << 20):
                    out.write(chunk)
        arg_utils: str | None = None
        for name, text in _members(dest, cpp=package == "vllm" and not metrics_only):
            if name.startswith("csrc/"):
                read_cpp(name, text, rec)
                continue
            if dest.name.endswith(".whl") and package != "vllm":
                name = "src/" + name  # a wheel drops the repository's src/ folder
            if not name.startswith(root):
                continue
            inner = name[len(root):]
            if package == "transformers" and inner.startswith("models/") and not inner.startswith("models/auto/"):
                continue
            if metrics_only and not any(k in text for k in ("SpecDecoding metrics", "Speculative metrics",
                                                            "Avg prompt throughput")):
                continue
            if package == "vllm" and inner == "engine/arg_utils.py":
                arg_utils = text
            read_file(name, text, inner, not metrics_only, rec)
        dest.unlink()  # nothing of a release stays on disk once it is read
    if arg_utils is not None:
        import ast

        rec.flags = cli_flags(ast.parse(arg_utils), rec.fields)
    return rec


# ---- merging ---------------------------------------------------------------------------------------

def runs(indices: list[int]) -> list[int]:
    """Sorted release indices as flat [start, end, start, end, ...] runs."""
    out: list[int] = []
    for i in sorted(set(indices)):
        if out and out[-1] == i - 1:
            out[-1] = i
        else:
            out.extend([i, i])
    return out


class Strings:
    def __init__(self) -> None:
        self.table: list[str] = []
        self.index: dict[str, int] = {}

    def __call__(self, s: str | None) -> int:
        if s is None:
            return -1
        i = self.index.get(s)
        if i is None:
            i = self.index[s] = len(self.table)
            self.table.append(s)
        return i


NEEDLE = 24  # the automaton's build time grows with the needles' total length: a prefix of the chunk suffices


def needle_of(template: str) -> str:
    """A literal chunk of the template's first line, as a log line shows it: the first one of 12 characters or
    more (a truncated line still holds the start of a message), else the longest; cut to NEEDLE characters."""
    parts = template.split(SEP)
    chunks: list[str] = []
    for i, p in enumerate(parts):
        if i % 2:
            continue
        first, nl, _ = p.partition("\n")
        chunks.append(first.strip())
        if nl:
            break
    good = [c for c in chunks if len(c) >= 12]
    best = good[0] if good else max(chunks, key=len, default="")
    return best[:NEEDLE].strip()


def _runs_text(runs_: list[int]) -> str:
    return ",".join(f"{a}" if a == b else f"{a}-{b}" for a, b in zip(runs_[::2], runs_[1::2], strict=True))


def merge(releases: dict[str, list[Release]]) -> dict[str, Any]:
    S = Strings()
    sites: dict[tuple[str, str, str, str, str, str], dict[str, Any]] = {}
    packages: dict[str, Any] = {}
    for pkg, recs in releases.items():
        packages[pkg] = {"releases": [r.version for r in recs], "repo": REPOS[pkg],
                         "files": [r.files for r in recs], "sites": [len(r.sites) for r in recs]}
        for ri, rec in enumerate(recs):
            for s in rec.sites:
                key = (pkg, s.file, s.function, s.template, s.kind, s.who)
                e = sites.setdefault(key, {"rel": {}, "cond": None})
                e["rel"].setdefault(ri, s.line)  # the first call site in the release, if a function repeats it
                e["cond"] = s.condition  # the newest release's guard
    cols: dict[str, list[Any]] = {k: [] for k in ("pkg", "file", "func", "kind", "who", "tmpl", "cond", "needle",
                                                  "rel", "lines")}
    pkg_ids = {p: i for i, p in enumerate(packages)}
    for key in sorted(sites, key=lambda k: (pkg_ids[k[0]], k[1], k[2], k[3], k[4], k[5])):
        pkg, file, func, tmpl, kind, who = key
        e = sites[key]
        rel = sorted(e["rel"])
        line_runs: list[int] = []
        for ri in rel:
            ln = e["rel"][ri]
            if line_runs and line_runs[-1] == ln and line_runs[-2] == ri - 1:
                line_runs[-2] = ri
            else:
                line_runs.extend([ri, ri, ln])
        cols["pkg"].append(pkg_ids[pkg])
        cols["file"].append(S(file))
        cols["func"].append(S(func))
        cols["kind"].append(0 if kind == "raise" else 1)
        cols["who"].append(S(who))
        cols["tmpl"].append(tmpl)
        cols["cond"].append(S(e["cond"]))
        n = needle_of(tmpl)
        cols["needle"].append(S(n) if len(n) >= 8 else -1)
        # as text, parsed only for the sites a line matches: a list of lists per site costs the load its time
        cols["rel"].append(_runs_text(runs(rel)))
        cols["lines"].append(",".join(f"{a}-{b}:{ln}" if a != b else f"{a}:{ln}"
                                      for a, b, ln in zip(line_runs[::3], line_runs[1::3], line_runs[2::3],
                                                          strict=True)))
    vllm = releases.get("vllm", [])
    fields: dict[tuple[str, str, str], list[int]] = defaultdict(list)
    flags: dict[tuple[str, str | None, str, str], list[int]] = defaultdict(list)
    metrics: dict[tuple[str, tuple[str, ...]], list[int]] = defaultdict(list)
    envs: dict[tuple[str, str], list[int]] = defaultdict(list)
    cli: dict[str, list[int]] = defaultdict(list)
    cli_help: dict[str, str] = {}
    archs: dict[tuple[str, str], list[int]] = defaultdict(list)
    quant_caps: dict[tuple[str, int], list[int]] = defaultdict(list)
    for ri, rec in enumerate(vllm):
        for arch, group in rec.archs.items():
            archs[(arch, group)].append(ri)
        for method, cap in rec.quant_caps.items():
            quant_caps[(method, cap)].append(ri)
        for flag, help_text in rec.cli.items():
            cli[flag].append(ri)
            if help_text:
                cli_help[flag] = help_text  # the newest release's words
        for name, help_text in rec.env.items():
            envs[(name, help_text)].append(ri)
        for cls, flds in rec.fields.items():
            for f, doc in flds.items():
                fields[(cls, f, doc)].append(ri)
        for flag, k, target, help_text in rec.flags:
            flags[(flag, k, target, help_text)].append(ri)
        for name, labels in rec.metrics.items():
            metrics[(name, tuple(labels))].append(ri)
    csrc: dict[str, list[int]] = defaultdict(list)
    for ri, rec in enumerate(vllm):
        for f in rec.csrc:
            csrc[f].append(ri)
    return {
        "format": FORMAT,
        # vLLM's C++/CUDA sources per release range (the sdist's csrc/): a frame or a message naming one is placed
        "csrc": [[f, _runs_text(runs(r))] for f, r in sorted(csrc.items())],
        "packages": packages,
        "strings": S.table,
        "sites": cols,
        "fields": [[c, f, S(d) if d else -1, runs(r)] for (c, f, d), r in sorted(fields.items())],
        "flags": [[fl, k, t, S(h) if h else -1, runs(r)] for (fl, k, t, h), r in sorted(flags.items(),
                                                                                       key=lambda kv: str(kv[0]))],
        "metrics": [[n, list(lb), runs(r)] for (n, lb), r in sorted(metrics.items())],
        # vLLM's own environment variables (vllm/envs.py) per release range: name, help (the comment above it)
        "envs": [[n, S(h) if h else -1, runs(r)] for (n, h), r in sorted(envs.items())],
        # the model registry's architecture names per release range: name, the registry dict that holds it
        "archs": [[a, g, runs(r)] for (a, g), r in sorted(archs.items())],
        # each quantization method's least compute capability (`get_min_capability()`), per release range
        "quant_caps": [[m, c, runs(r)] for (m, c), r in sorted(quant_caps.items())],
        # every long flag any argparse parser of a release adds (engine, API server, `vllm` CLI): flag, help, runs
        "cli": [[f, S(cli_help[f]) if cli_help.get(f) else -1, runs(r)] for f, r in sorted(cli.items())],
        # per package, over all its releases read: raise/log calls, those whose message is all holes (not
        # sites), and those whose message reads a variable the function built (`msg = f"..."`)
        "stats": {p: {k: sum(r.stats.get(k, 0) for r in recs) for k in ("calls", "holes_only", "resolved",
                                                                           "holes_only_unresolved")}
                  for p, recs in releases.items()},
    }


HISTORY_MAGIC = b"SPH1"


def history(vllm: list[Release]) -> bytes:
    """The code's history: per function of vLLM, each distinct body's releases, and each distinct line (16-bit
    hash) with the releases that have it in that function. Binary: magic, a JSON header, 4-byte entries. The header
    holds each file's functions as a JSON text of its own, parsed only when a frame in that file is looked up."""
    import struct

    keys = sorted({k for rec in vllm for k in rec.funcs})
    files: dict[str, list[list[Any]]] = defaultdict(list)
    entries = bytearray()
    n = 0
    for key in keys:
        bodies: dict[bytes, list[int]] = defaultdict(list)
        lines: dict[int, list[int]] = defaultdict(list)
        for ri, rec in enumerate(vllm):
            body = rec.funcs.get(key)
            if body is None:
                continue
            bodies[body].append(ri)
            for h in set(struct.unpack(f"<{len(body) // 2}H", body)):
                lines[h].append(ri)
        start = n
        for h in sorted(lines):
            r = runs(lines[h])
            for a, b in zip(r[::2], r[1::2], strict=True):
                entries += struct.pack("<HBB", h, a, b)
                n += 1
        # each distinct body's releases, oldest first: where the function changed
        versions = sorted(bodies.values(), key=lambda v: v[0])
        files[key[0]].append([key[1], start, n - start, ";".join(_runs_text(runs(v)) for v in versions)])
    header = json.dumps({"releases": [r.version for r in vllm],
                         "files": {f: json.dumps(fs, separators=(",", ":")) for f, fs in sorted(files.items())}},
                        separators=(",", ":")).encode()
    return HISTORY_MAGIC + struct.pack("<I", len(header)) + header + bytes(entries)


def metrics_templates(vllm: list[Release]) -> list[dict[str, Any]]:
    seen: dict[str, dict[str, Any]] = {}
    for rec in vllm:
        for m in rec.metrics_lines:
            body = {k: m[k] for k in ("kind", "file", "function", "template", "args", "parts", "joiner",
                                      "source_style", "prefix")}
            key = json.dumps(body, sort_keys=True)
            e = seen.setdefault(key, {**body, "releases": [], "lines": {}})
            if rec.version not in e["releases"]:
                e["releases"].append(rec.version)
                e["lines"][rec.version] = m["line"]
    order = {r.version: i for i, r in enumerate(vllm)}
    out = []
    for e in seen.values():
        rels = sorted(e["releases"], key=order.__getitem__)
        out.append({"kind": e["kind"], "first": rels[0], "last": rels[-1], "releases": rels,
                    "file": e["file"], "function": e["function"], "lines": e["lines"],
                    "template": e["template"], "args": e["args"], "source_style": e["source_style"],
                    "joiner": e["joiner"], "prefix": e["prefix"], "parts": e["parts"]})
    out.sort(key=lambda e: (e["kind"], order[e["first"]], e["file"], e["template"]))
    return out


def write_metrics(out: Path, vllm: list[Release]) -> int:
    data = {"source": "vLLM's released source, read by tools/atlas/build.py; template is a %-format, args are the "
                      "source expressions that fill it in order; parts (when the line is joined from a list) say "
                      "which pieces are optional and under what condition",
            "releases": [r.version for r in vllm], "templates": metrics_templates(vllm),
            "fields": {"kind": "v1-spec | v0-spec | engine",
                       "first/last/releases": "the vLLM releases whose source has it",
                       "lines": "release -> line of the logging call in file",
                       "source_style": "percent (a %-literal), fstring (an f-string, rewritten as %), or percent-parts "
                                       "(joined from a list: template holds the parts always present, in order)",
                       "joiner": "what the parts are joined with", "prefix": "an expression logged before the parts",
                       "parts": "[{text, args, optional, condition}] in logging order"}}
    (out / "metrics_templates.json").write_text(json.dumps(data, indent=1, ensure_ascii=False) + "\n")
    return len(data["templates"])


def write_sources(out: Path, data: dict[str, Any], seconds: float) -> None:
    lines = ["# The vLLM message atlas: what it was built from", "",
             f"Built {data.get('built') or dt.datetime.now(dt.UTC).strftime('%Y-%m-%dT%H:%M:%SZ')} "
             f"in {seconds:.0f} s by "
             "`python3 tools/atlas/build.py` (refresh: run it again; it lists the releases from the project's "
             "package index, reads each release's `.py` files from its sdist, or its wheel where there is none, "
             "and rewrites this folder).", "",
             f"Sites (distinct raise/log call sites over all releases): {len(data['sites']['tmpl'])}; "
             f"config fields: {len(data['fields'])}; flag mappings: {len(data['flags'])}; "
             f"Prometheus names: {len({m[0] for m in data['metrics']})}; "
             f"environment variables: {len({e[0] for e in data.get('envs', [])})}; "
             f"model architectures: {len({a[0] for a in data.get('archs', [])})}; "
             f"quantization methods with a least compute capability: "
             f"{len({q[0] for q in data.get('quant_caps', [])})}.", "",
             "Messages built in a variable (`msg = f\"...\"`, `msg += ...`, then `raise ValueError(msg)` or "
             "`f\"{msg} To allow ...\"`) are read with the text the variable holds there (one site per text when "
             "branches build it differently). Raise/log calls read, summed over releases (a call is counted once "
             "per release): "
             + "; ".join(f"{p} {st['calls']}, of which all holes {st['holes_only']} (without the variables "
                         f"resolved {st['holes_only_unresolved']}), reading a built variable {st['resolved']}"
                         for p, st in data.get("stats", {}).items()) + ".", "",
             "Files: " + ", ".join(f"`{f.name}` {f.stat().st_size / 1e6:.2f} MB" for f in sorted(out.iterdir())
                                   if f.is_file() and f.name != "SOURCES.md") + ".", "",
             "| package | repository | releases | .py files read (last) | sites in the last release |",
             "|---|---|---|---|---|"]
    for pkg, p in data["packages"].items():
        lines.append(f"| {pkg} | {p['repo']} | {len(p['releases'])} | {p['files'][-1] if p['files'] else 0} | "
                     f"{p['sites'][-1] if p['sites'] else 0} |")
    lines.append("")
    for pkg, p in data["packages"].items():
        lines.append(f"{pkg}: " + ", ".join(p["releases"]))
        lines.append("")
    lines += ["Each site's source is its release, file and line: "
              "`https://github.com/<repository>/blob/v<release>/<file>#L<line>`.", ""]
    (out / "SOURCES.md").write_text("\n".join(lines))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--releases", nargs="*", help="pkg==version (or a bare vLLM version); default: all selected")
    ap.add_argument("--packages", nargs="*", default=["vllm", "huggingface_hub", "transformers"])
    ap.add_argument("--out", type=Path, default=DEFAULT_OUT)
    ap.add_argument("--jobs", type=int, default=min(2, os.cpu_count() or 1))
    ap.add_argument("--metrics-only", action="store_true")
    args = ap.parse_args(argv)
    t0 = time.monotonic()
    args.out.mkdir(parents=True, exist_ok=True)
    wanted: dict[str, list[str]] = defaultdict(list)
    for r in args.releases or []:
        pkg, _, ver = r.rpartition("==")
        wanted[pkg or "vllm"].append(ver)
    packages = ["vllm"] if args.metrics_only else (list(wanted) if wanted else args.packages)
    jobs: list[tuple[str, str, dict[str, Any], bool]] = []
    with httpx.Client(timeout=120, follow_redirects=True) as client:
        for pkg in packages:
            data = listing(client, pkg)
            chosen = wanted.get(pkg) or select(pkg, data.get("versions", []))
            for ver in sorted(chosen, key=Version):
                info = pick_file(data["files"], pkg, ver)
                if info is None:
                    print(f"{pkg} {ver}: no sdist and no wheel, skipped", file=sys.stderr)
                    continue
                jobs.append((pkg, ver, info, args.metrics_only))
    print(f"{len(jobs)} releases to read", file=sys.stderr)
    done: dict[str, list[Release]] = defaultdict(list)
    ctx = multiprocessing.get_context("fork")
    with ctx.Pool(args.jobs, maxtasksperchild=4) as pool:
        for rec in pool.imap(read_release, jobs):
            done[rec.package].append(rec)
            print(f"{time.monotonic() - t0:6.0f}s {rec.package} {rec.version}: {rec.files} files, {len(rec.sites)} "
                  f"sites, {len(rec.metrics)} metrics, {len(rec.flags)} flags, {len(rec.metrics_lines)} metric lines, "
                  f"{len(rec.env)} env vars, {rec.stats.get('holes_only', 0)} all-hole messages"
                  f"{f', {rec.errors} unparsable' if rec.errors else ''}", file=sys.stderr, flush=True)
            if rec.package == "vllm" and len(done["vllm"]) == sum(1 for j in jobs if j[0] == "vllm"):
                print(f"metrics_templates.json: {write_metrics(args.out, done['vllm'])} templates", file=sys.stderr)
    for recs in done.values():
        recs.sort(key=lambda r: Version(r.version))
    if "vllm" in done:
        write_metrics(args.out, done["vllm"])
    if args.metrics_only:
        return 0
    ordered = {p: done[p] for p in ("vllm", "huggingface_hub", "transformers") if p in done}
    data = merge(ordered)
    data["built"] = dt.datetime.now(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    raw = json.dumps(data, ensure_ascii=False, separators=(",", ":")).encode()
    # gzip, not xz: it inflates in a third of the time, and the load is part of every diagnosis
    (args.out / "atlas.json.gz").write_bytes(gzip.compress(raw, compresslevel=9, mtime=0))
    if "vllm" in ordered:
        (args.out / "history.bin.gz").write_bytes(gzip.compress(history(ordered["vllm"]), compresslevel=9, mtime=0))
    stale = args.out / "atlas.json.xz"
    if stale.exists():
        stale.unlink()
    write_sources(args.out, data, time.monotonic() - t0)
    print(f"atlas: {len(data['sites']['tmpl'])} sites, {len(raw) / 1e6:.1f} MB json, "
          f"{(args.out / 'atlas.json.gz').stat().st_size / 1e6:.2f} MB gz, {time.monotonic() - t0:.0f} s",
          file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
