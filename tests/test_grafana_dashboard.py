"""The shipped Grafana dashboard (deploy/grafana/specops-spec-decode.json) and recording rules
(deploy/prometheus-recording-rules.yml), checked where they are used:

- the JSON through Grafana's own schema models (grafana-foundation-sdk, Grafana 11.6's types) and a strict
  structural walk of its panels, rows' nested panels included;
- every panel target, annotation and template query, with its variables filled from the label_values
  queries' real answers, run against a real Prometheus (Debian's) that loads the recording rules and scrapes
  two simulated vLLM servers under load, one restarted on the way: each must return data. A second
  Prometheus without the rules answers the same panels (the dashboard works before the rules are loaded);
- the same against the real vLLM CPU build when tests/support/realvllm.py has prepared it (skipped, with
  the reason, otherwise);
- and a pip user gets both: the built wheel's `specops init --deploy-files` writes them.
"""

from __future__ import annotations

import functools
import itertools
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
import zipfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml

from bot.app.prometheus.exported import ServedSetting
from bot.core import vllm_metrics
from bot.sim.host import SimHost
from tests.support import realvllm
from tests.support.core_views import metric_names
from tests.support.prometheus import BINARY, Prometheus
from tests.support.served import wait_for
from tests.support.specops_exporter import SpecopsExporter
from tests.support.sshd import free_port

ROOT = Path(__file__).resolve().parents[1]
DEPLOY = ROOT / "deploy"
DASHBOARD = DEPLOY / "grafana" / "specops-spec-decode.json"
RULES = DEPLOY / "prometheus-recording-rules.yml"
SHIPPED = ("grafana/specops-spec-decode.json", "grafana/README.md", "prometheus-recording-rules.yml",
           "prometheus-recording-rules.test.yml")
DS_REF = {"type": "prometheus", "uid": "${datasource}"}
# what Grafana fills in before a query leaves it; values a test-length range can answer
TIME_VARS = {"__rate_interval": "1m", "__interval": "15s", "__range": "10m", "__range_s": "600", "__range_ms": "600000"}
# keys Grafana's generic dashboard schema leaves to the datasource (the Prometheus annotation's own
# fields) or that only the editor reads (a query variable's `definition`): the schema models drop them
SCHEMA_OPEN = {"annotations.list[].titleFormat", "annotations.list[].textFormat", "annotations.list[].tagKeys",
               "annotations.list[].useValueForTime", "annotations.list[].step", "templating.list[].definition"}
LABEL_VALUES = re.compile(r"^label_values\((?:(?P<selector>.+),\s*)?(?P<label>[a-zA-Z_][a-zA-Z0-9_]*)\)\s*$")


def load() -> dict[str, Any]:
    data: dict[str, Any] = json.loads(DASHBOARD.read_text(encoding="utf-8"))
    return data


def all_panels(dashboard: dict[str, Any]) -> list[dict[str, Any]]:
    """Every panel, the rows and the panels folded inside collapsed rows included, in layout order."""
    out: list[dict[str, Any]] = []
    for panel in dashboard.get("panels", []):
        out.append(panel)
        out.extend(panel.get("panels", []) if panel.get("type") == "row" else [])
    return out


@dataclass(frozen=True)
class Query:
    where: str
    expr: str


def queries(dashboard: dict[str, Any]) -> list[Query]:
    """Every PromQL the dashboard sends: panel targets and Prometheus annotations."""
    found = [Query(f"panel {p['id']} {p['title']!r} target {t['refId']}", t["expr"])
             for p in all_panels(dashboard) if p["type"] != "row" for t in p["targets"]]
    found += [Query(f"annotation {a['name']!r}", a["expr"]) for a in dashboard["annotations"]["list"]
              if a.get("datasource") == DS_REF]
    return found


def template_queries(dashboard: dict[str, Any]) -> list[tuple[str, str | None, str]]:
    """(variable, series selector or None, label) of each label_values() query variable."""
    out = []
    for var in dashboard["templating"]["list"]:
        if var["type"] == "query":
            query = var["query"] if isinstance(var["query"], str) else var["query"]["query"]
            m = LABEL_VALUES.match(query)
            assert m, f"variable {var['name']}: {query!r} is not label_values(...)"
            out.append((var["name"], m["selector"], m["label"]))
    return out


def regex_escape(value: str) -> str:
    """Grafana's Prometheus escape of a multi-value variable's value: a regex inside a PromQL string."""
    return re.sub(r"([\\^$*+?.()|{}\[\]])", r"\\\\\1", value)


def fill(expr: str, values: dict[str, list[str]]) -> str:
    """`expr` as Grafana sends it: each multi-value variable becomes (a|b) of escaped values, each time
    macro its value. Longest names first so $__range_s is not read as $__range."""
    subs = {name: (vals[0] if len(vals) == 1 else "(" + "|".join(vals) + ")")
            for name, vals in ((n, [regex_escape(v) for v in vs]) for n, vs in values.items())}
    subs.update(TIME_VARS)
    for name in sorted(subs, key=len, reverse=True):
        expr = expr.replace("${" + name + "}", subs[name]).replace("$" + name, subs[name])
    # `$1` is label_replace's capture group: Grafana leaves a name no variable has as it is
    assert not re.search(r"\$(?!\d)", expr), f"a variable is left unfilled: {expr}"
    return expr


# --- the JSON ------------------------------------------------------------------------------------

def schema_problems(dashboard: dict[str, Any]) -> list[str]:
    """What Grafana's schema models (grafana-foundation-sdk) do not keep of the dashboard: a key they drop
    is unknown to the schema (a typo, a removed option), a value they change has the wrong type."""
    from grafana_foundation_sdk.cog import plugins
    from grafana_foundation_sdk.cog.encoder import JSONEncoder
    from grafana_foundation_sdk.models.dashboard import Dashboard

    plugins.register_default_plugins()  # the panel and datasource types, so their options are decoded too
    back = json.loads(json.dumps(Dashboard.from_json(dashboard), cls=JSONEncoder))
    problems: list[str] = []

    def walk(a: Any, b: Any, path: str, shape: str) -> None:
        if isinstance(a, dict):
            if not isinstance(b, dict):
                problems.append(f"{path}: {type(b).__name__} instead of an object")
                return
            for key, value in a.items():
                if key not in b:
                    if f"{shape}.{key}".lstrip(".") not in SCHEMA_OPEN:
                        problems.append(f"{path}.{key}: not in the schema")
                else:
                    walk(value, b[key], f"{path}.{key}", f"{shape}.{key}")
        elif isinstance(a, list):
            if not isinstance(b, list) or len(a) != len(b):
                problems.append(f"{path}: the list is not kept")
                return
            for i, (x, y) in enumerate(zip(a, b, strict=True)):
                walk(x, y, f"{path}[{i}]", f"{shape}[]")
        elif a != b:
            problems.append(f"{path}: {a!r} comes back as {b!r}")

    walk(dashboard, back, "", "")
    return problems


def structure_problems(dashboard: dict[str, Any]) -> list[str]:
    problems: list[str] = []
    if not isinstance(dashboard.get("schemaVersion"), int) or dashboard["schemaVersion"] < 39:
        problems.append(f"schemaVersion {dashboard.get('schemaVersion')!r} < 39")
    if not dashboard.get("uid") or not dashboard.get("title"):
        problems.append("no uid or title")
    variables = {v["name"]: v for v in dashboard["templating"]["list"]}
    ds = variables.get("datasource")
    if ds is None or ds["type"] != "datasource" or ds["query"] != "prometheus":
        problems.append("no `datasource` variable of type prometheus")
    for name in ("instance", "model_name"):
        var = variables.get(name)
        if var is None or var["type"] != "query" or var.get("datasource") != DS_REF:
            problems.append(f"no query variable {name} on ${{datasource}}")
    panels = all_panels(dashboard)
    ids = [p.get("id") for p in panels]
    if len(ids) != len(set(ids)) or not all(isinstance(i, int) for i in ids):
        problems.append(f"panel ids not unique integers: {ids}")
    cells: dict[tuple[int, int], int] = {}
    for p in panels:
        where = f"panel {p.get('id')} {p.get('title')!r}"
        grid = p.get("gridPos") or {}
        if not all(isinstance(grid.get(k), int) for k in "xywh") or grid["x"] < 0 or grid["x"] + grid["w"] > 24:
            problems.append(f"{where}: gridPos {grid} is not inside the 24 columns")
            continue
        for cell in itertools.product(range(grid["x"], grid["x"] + grid["w"]), range(grid["y"], grid["y"] + grid["h"])):
            if cell in cells:
                problems.append(f"{where} overlaps panel {cells[cell]} at {cell}")
                break
            cells[cell] = p["id"]
        if p.get("type") == "row":
            if p.get("panels") and not p.get("collapsed"):
                problems.append(f"{where}: an open row holds panels (Grafana keeps them only in a collapsed one)")
            continue
        if not p.get("type") or not p.get("title"):
            problems.append(f"{where}: no type or title")
        if p.get("datasource") != DS_REF:
            problems.append(f"{where}: datasource {p.get('datasource')} is not the ${{datasource}} variable")
        targets = p.get("targets") or []
        refs = [t.get("refId") for t in targets]
        if not targets or len(refs) != len(set(refs)) or not all(refs):
            problems.append(f"{where}: targets need unique refIds: {refs}")
        for t in targets:
            if not str(t.get("expr", "")).strip() or t.get("datasource") != DS_REF:
                problems.append(f"{where} target {t.get('refId')}: no expr, or not on ${{datasource}}")
    for a in dashboard["annotations"]["list"]:
        if a.get("builtIn") == 1:
            continue  # Grafana's own "Annotations & Alerts"
        if a.get("datasource") != DS_REF or not str(a.get("expr", "")).strip():
            problems.append(f"annotation {a.get('name')!r}: no expr on ${{datasource}}")
    return problems


def test_the_dashboard_passes_grafanas_schema_and_the_structure_check() -> None:
    dashboard = load()
    assert schema_problems(dashboard) == []
    assert structure_problems(dashboard) == []
    titles = {p["title"] for p in all_panels(dashboard)}
    for wanted in ("Mean acceptance length", "Position 0 against its floor", "Acceptance by draft position (now)",
                   "Accepted vs drafted tokens/s", "Generation tokens/s", "KV cache usage", "Restarts in range",
                   "Deployment as specops recorded it", "Drafted tokens per draft (k)", "Time to first token (TTFT)",
                   "Inter-token latency (ITL)", "Time per output token (TPOT)"):
        assert wanted in titles, titles
    assert {p["type"] for p in all_panels(dashboard)} >= {"heatmap", "bargauge", "stat", "timeseries", "row"}
    assert [a["name"] for a in dashboard["annotations"]["list"] if a.get("datasource") == DS_REF] == [
        "Restarts", "Deployments"]
    assert [name for name, _, _ in template_queries(dashboard)] == ["instance", "model_name"]


def test_the_judgment_panel_holds_a_server_specops_does_not_describe_to_the_triages_default_floor() -> None:
    """The panel divides by specops' exported floor, else by the default: the number bot/core/triage/acceptance.py
    judges with (and deploy/prometheus-rules.yml), so the three never drift apart."""
    from bot.core.triage.acceptance import COLLAPSE_P1

    [panel] = [p for p in all_panels(load()) if p["title"] == "Position 0 against its floor"]
    expr = panel["targets"][0]["expr"]
    assert "specops_acceptance_floor" in expr and "mean_acceptance_length" not in expr
    assert [float(x) for x in re.findall(r"/ ([0-9.]+) unless", expr)] == [COLLAPSE_P1]
    assert [s["value"] for s in panel["fieldConfig"]["defaults"]["thresholds"]["steps"]] == [None, 1]


def test_the_checks_catch_a_broken_dashboard() -> None:
    """The checks above are not vacuous: an unknown option, a wrong type, a stray datasource and an
    overlapping panel are each reported."""
    broken = load()
    panels = all_panels(broken)
    panels[1]["options"]["colourMode"] = "value"  # a misspelling
    panels[2]["gridPos"]["x"] = "6"
    panels[3]["datasource"] = {"type": "prometheus", "uid": "P1809F7CD0C75ACF3"}  # one Grafana's own uid
    panels[4]["gridPos"] = dict(panels[3]["gridPos"])
    assert any("colourMode: not in the schema" in p for p in schema_problems(broken))
    found = "\n".join(structure_problems(broken))
    assert "not inside the 24 columns" in found and "is not the ${datasource} variable" in found
    assert "overlaps panel" in found


def test_every_vllm_series_the_dashboard_reads_is_one_specops_knows() -> None:
    """The names are vLLM's, as bot/core/vllm_metrics.py records them (legacy aliases included), or a histogram's
    series of a metric some vLLM release exports (the atlas's metric names per release: the latency panels)."""
    from bot.core.atlas import load_atlas

    atlas = load_atlas()
    exported = {n for r in atlas.package_releases["vllm"] for n in metric_names(atlas, r)}
    known = {name for m in vars(vllm_metrics).values() if isinstance(m, vllm_metrics.Metric) for name in m.names}
    known |= {f"{n}_bucket" for n in exported}
    texts = [q.expr for q in queries(load())] + [sel or "" for _, sel, _ in template_queries(load())]
    used = {name for text in texts for name in re.findall(r"vllm:[a-z_:]+", text)}
    assert used and used <= known, used - known
    rules = RULES.read_text(encoding="utf-8")
    assert set(re.findall(r"vllm:[a-z_:]+", rules)) <= known


def test_the_recording_rules_pass_promtool() -> None:
    promtool = shutil.which("promtool")
    if promtool is None:
        pytest.skip("promtool is not installed here (.ci/run installs Debian's prometheus)")
    for argv in (["check", "rules", RULES.name], ["test", "rules", "prometheus-recording-rules.test.yml"]):
        done = subprocess.run([promtool, *argv], cwd=DEPLOY, capture_output=True, text=True, timeout=60)
        assert done.returncode == 0, done.stdout + done.stderr
    names = set(re.findall(r"specops:[a-z_:0-9]+", RULES.read_text(encoding="utf-8")))
    used = {n for q in queries(load()) for n in re.findall(r"specops:[a-z_:0-9]+", q.expr)}
    assert used and used <= names, used - names  # the dashboard reads the rules it ships with


def test_a_restart_slower_than_the_rate_interval_is_marked_at_the_new_servers_first_scrape(tmp_path: Path) -> None:
    """A model of tens of GB loads for minutes: the old process's last scrape and the new one's first are
    further apart than $__rate_interval. promtool evaluates the Restarts annotation as Grafana fills it."""
    promtool = shutil.which("promtool")
    if promtool is None:
        pytest.skip("promtool is not installed here (.ci/run installs Debian's prometheus)")
    (mark,) = [q for q in queries(load()) if q.where == "annotation 'Restarts'"]
    expr = fill(mark.expr, {"instance": ["a:8000"], "model_name": ["q"]})
    start, tokens = 'process_start_time_seconds{instance="a:8000", job="vllm"}', \
        'vllm:generation_tokens_total{instance="a:8000", model_name="q", job="vllm"}'
    marked = [{"labels": '{instance="a:8000"}', "value": 700}]
    cases = [("3m", []), ("9m", marked), ("12m", [])]  # steady; the new server's first scrape; a while after
    spec = {"rule_files": [], "evaluation_interval": "1m", "tests": [{
        "interval": "1m",
        "input_series": [{"series": start, "values": "100x4 _x4 700x5"},  # five minutes without a scrape
                         {"series": tokens, "values": "0+10x4 _x4 0+10x5"}],
        "promql_expr_test": [{"expr": expr, "eval_time": at, "exp_samples": exp} for at, exp in cases]}]}
    (tmp_path / "restart.test.yml").write_text(yaml.safe_dump(spec))
    done = subprocess.run([promtool, "test", "rules", "restart.test.yml"], cwd=tmp_path, capture_output=True,
                          text=True, timeout=60)
    assert done.returncode == 0, done.stdout + done.stderr


# --- a real Prometheus ---------------------------------------------------------------------------

def label_values(prom: Prometheus, label: str, selector: str | None) -> list[str]:
    """What a label_values(selector, label) variable lists: Prometheus' label values API, as Grafana asks it."""
    params = {"match[]": selector} if selector else {}
    data = httpx.get(f"{prom.url}/api/v1/label/{label}/values", params=params, timeout=5, trust_env=False).json()
    assert data.get("status") == "success", data
    return sorted(data["data"])


def checked(prom: Prometheus, promql: str, at: float | None = None) -> list[dict[str, Any]]:
    """The query's result (at `at`, else now); a query Prometheus refuses fails the test with its error."""
    params: dict[str, str] = {"query": promql} | ({"time": f"{at:.3f}"} if at is not None else {})
    data = httpx.get(f"{prom.url}/api/v1/query", params=params, timeout=5, trust_env=False).json()
    assert data.get("status") == "success", f"{data.get('error')}\n{promql}"
    result: list[dict[str, Any]] = data["data"]["result"]
    return result


def variable_sets(prom: Prometheus, dashboard: dict[str, Any]) -> list[dict[str, list[str]]]:
    """Each instance alone, then every instance ("All"), with the model_name values Prometheus gives for
    that choice: the answers of the template queries themselves, in their order."""
    (_, inst_sel, inst_label), (_, model_sel, model_label) = template_queries(dashboard)
    instances = label_values(prom, inst_label, fill(inst_sel, {}) if inst_sel else None)
    assert instances, "the instance variable's query answers nothing"
    out = []
    for chosen in [*([i] for i in instances), instances]:
        models = label_values(prom, model_label, fill(model_sel, {"instance": chosen}) if model_sel else None)
        assert models, f"the model_name variable's query answers nothing for {chosen}"
        out.append({"instance": chosen, "model_name": models})
    return out


def answers(prom: Prometheus, dashboard: dict[str, Any], values: dict[str, list[str]],
            at: float | None = None) -> dict[str, Any]:
    """Every panel's answer at one instant: two panels compared with each other (a ratio and its parts) read the same
    samples, even while a restarted server's counters still move from one scrape to the next."""
    return {q.where: checked(prom, fill(q.expr, values), at) for q in queries(dashboard)}


def wait_all_answer(prom: Prometheus, dashboard: dict[str, Any], restarted: set[str] | None,
                    timeout: float = 90) -> list[dict[str, Any]]:
    """For every variable choice, every query's answer, once all of them return data (within the deadline);
    otherwise the test fails naming the empty ones. A restart mark is data only where a server restarted:
    for a choice with one of `restarted` it must mark that server and no other, for any other choice it
    must be empty (None: the marks are not checked)."""
    deadline = time.monotonic() + timeout
    while True:
        sets = variable_sets(prom, dashboard)
        at = time.time()
        results = [answers(prom, dashboard, values, at) for values in sets]
        wrong = []
        for values, result in zip(sets, results, strict=True):
            for where, series in result.items():
                if not where.startswith("annotation"):
                    # per instance where the series say which: a restarted server's panels fill a scrape or two
                    # after the other's (a panel with the one and not yet the other was taken as answered)
                    seen = {s["metric"].get("instance") for s in series}
                    ok = bool(series) and (None in seen or set(values["instance"]) <= seen)
                elif restarted is None or where != "annotation 'Restarts'":
                    ok = True  # the deployment marks are specops', by host: the sim test checks them
                else:
                    marked = {s["metric"].get("instance") for s in series}
                    ok = marked == restarted & set(values["instance"])
                if not ok:
                    wrong.append(f"{where} with {values}: {series}")
        if not wrong:
            return results
        assert time.monotonic() < deadline, "queries without the data they should have:\n" + "\n".join(wrong)
        time.sleep(1)


# --- simulated vLLM servers under load -----------------------------------------------------------

class FakeServers:
    """Two simulated vLLM servers started directly (their own sessions, stopped by PID): DFlash k = 15
    (vLLM 0.26.0) and MTP k = 3 (0.20.1), each under a steady stream of completions."""

    def __init__(self, root: Path) -> None:
        self.sim = SimHost(root, stats_interval=0.5, startup_seconds=0.3, max_request_seconds=0.3)
        models = self.sim.root / "models"
        target = str(models / "Qwen3.6-27B")
        self.servers = {
            "dflash": ("0.26.0", "Qwen/Qwen3.6-27B",
                       {"method": "dflash", "model": str(models / "Qwen3.6-27B-DFlash"), "num_speculative_tokens": 15},
                       {"VLLM_USE_V2_MODEL_RUNNER": "1"}),
            "mtp": ("0.20.1", "Qwen/Qwen3.6-27B-MTP", {"method": "mtp", "num_speculative_tokens": 3}, {}),
        }
        self.target = target
        self.ports = {name: free_port() for name in self.servers}
        self.procs: dict[str, subprocess.Popen[bytes]] = {}
        self._stop = threading.Event()
        self._threads: list[threading.Thread] = []
        for name in self.servers:
            self.start(name)

    def instance(self, name: str) -> str:
        return f"127.0.0.1:{self.ports[name]}"

    def start(self, name: str) -> None:
        version, served, spec, env = self.servers[name]
        log = open(self.sim.root / f"{name}.log", "ab")  # noqa: SIM115 - the child keeps it
        self.procs[name] = subprocess.Popen(
            [str(self.sim.root / "opt" / f"vllm-{version}" / "bin" / "vllm"), "serve", self.target,
             "--port", str(self.ports[name]), "--served-model-name", served, "--speculative-config", json.dumps(spec)],
            env={**self.sim.env(), **env}, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
        log.close()
        wait_for(f"{name} /health", lambda: self._healthy(name), timeout=60)

    def _healthy(self, name: str) -> bool:
        assert self.procs[name].poll() is None, (self.sim.root / f"{name}.log").read_text()
        try:
            return httpx.get(f"http://{self.instance(name)}/health", timeout=1, trust_env=False).status_code == 200
        except httpx.HTTPError:
            return False

    def stop(self, name: str) -> None:
        proc = self.procs[name]
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGTERM)  # the session this fixture started
            proc.wait(timeout=30)

    def restart(self, name: str) -> None:
        self.stop(name)
        self.start(name)

    def load(self) -> None:
        def drive(name: str) -> None:
            served = self.servers[name][1]
            with httpx.Client(trust_env=False, timeout=30) as http:
                while not self._stop.is_set():
                    try:
                        http.post(f"http://{self.instance(name)}/v1/completions",
                                  json={"model": served, "prompt": "hello", "max_tokens": 32})
                    except httpx.HTTPError:
                        self._stop.wait(0.2)  # restarting: try again shortly

        for name in self.servers:
            t = threading.Thread(target=drive, args=(name,), daemon=True)
            t.start()
            self._threads.append(t)

    def close(self) -> None:
        self._stop.set()
        for t in self._threads:
            t.join(timeout=30)
        for name in self.procs:
            self.stop(name)


def drafting(prom: Prometheus, instance: str) -> bool:
    return (prom.value(f'increase(vllm:spec_decode_num_drafts_total{{instance="{instance}"}}[30s])') or 0) > 0


@dataclass
class Scraped:
    servers: FakeServers
    rules: Prometheus
    bare: Prometheus
    exporter: SpecopsExporter


# the two servers' hosts as specops recorded them (the scrape labels their targets with specops_host)
SERVED = {"dflash": ServedSetting("sim-dflash", "dflash", "dflash", 15, 0.3),
          "mtp": ServedSetting("sim-mtp", "mtp", "mtp", 3, 0.5)}


@pytest.fixture(scope="module")
def scraped(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Scraped]:
    if BINARY is None:
        pytest.skip("prometheus is not installed (.ci/run installs it)")
    tmp = tmp_path_factory.mktemp("grafana")
    servers = FakeServers(tmp / "sim")
    exporter = SpecopsExporter(list(SERVED.values()))
    proms: list[Prometheus] = []
    try:
        servers.load()
        targets = [servers.instance(n) for n in servers.servers]
        scrape: dict[str, Any] = {
            "labels": {servers.instance(n): {"specops_host": SERVED[n].host} for n in servers.servers},
            "jobs": {"specops": [exporter.instance]}}
        rules = Prometheus(tmp / "prom-rules", targets, rule_files=[RULES], **scrape)
        proms.append(rules)
        bare = Prometheus(tmp / "prom-bare", targets, **scrape)
        proms.append(bare)
        for prom in proms:  # drafts in two scrapes of each server: rate() has something to say
            for inst in targets:
                wait_for(f"drafts of {inst}", functools.partial(drafting, prom, inst), timeout=90)
        yield Scraped(servers, rules, bare, exporter)
    finally:
        for prom in proms:
            prom.stop()
        exporter.stop()
        servers.close()


def test_every_panel_query_returns_data_from_a_real_prometheus_scraping_the_simulated_hosts(
        scraped: Scraped) -> None:
    dashboard = load()
    prom = scraped.rules
    dflash, mtp = scraped.servers.instance("dflash"), scraped.servers.instance("mtp")
    # a restart of one server, so the restart marks have something to mark (within $__rate_interval), and specops
    # deploying another profile there (what the deployment marks show)
    scraped.servers.restart("mtp")
    scraped.exporter.served = [SERVED["dflash"], ServedSetting("sim-mtp", "mtp-again", "mtp", 3, 0.5)]
    # the panels are read at one instant below: that instant must come after Prometheus scraped the new deployment
    wait_for("the new deployment in Prometheus", lambda: any(
        s["metric"].get("profile") == "mtp-again" for s in prom.query("specops_deployment_info")), timeout=60)
    wait_for("the restart in Prometheus", lambda: (prom.value(
        f'resets(vllm:generation_tokens_total{{instance="{mtp}"}}[1m])') or 0) > 0, timeout=60)
    sets = variable_sets(prom, dashboard)
    both = sorted([dflash, mtp])
    assert [s["instance"] for s in sets] == [[i] for i in both] + [both]  # each alone, then All
    results = wait_all_answer(prom, dashboard, restarted={mtp})
    by_choice = {tuple(values["instance"]): result for values, result in zip(sets, results, strict=True)}
    everything = by_choice[tuple(both)]

    def panel(title: str, ref: str = "A") -> str:
        return next(w for w in everything if f"{title!r} target {ref}" in w)

    # per position: k = 15 on DFlash, k = 3 on MTP, every one a rate in 0..1, from the recording rule
    positions = {(s["metric"]["instance"], int(s["metric"]["position"])): float(s["value"][1])
                 for s in everything[panel("Acceptance by draft position (now)")]}
    assert sorted(p for i, p in positions if i == dflash) == list(range(15))
    assert sorted(p for i, p in positions if i == mtp) == list(range(3))
    # in numeric order as the bar gauge sorts them, by label: 00, 01, … 09, 10, … 14
    labels = [s["metric"]["position"] for s in everything[panel("Acceptance by draft position (now)")]
              if s["metric"]["instance"] == dflash]
    assert sorted(labels) == [f"{i:02d}" for i in range(15)], labels
    # the one judgment: position 0 over its method's floor (0.3 for DFlash, the config's 0.5 for this MTP)
    judged = {s["metric"]["instance"]: float(s["value"][1]) for s in everything[panel("Position 0 against its floor")]}
    assert set(judged) == {dflash, mtp} and all(v > 1 for v in judged.values()), judged
    assert abs(judged[mtp] * 0.5 - positions[(mtp, 0)]) < 0.05  # the MTP host's own floor, not the default
    # what specops deployed, joined to each server by its host; the k each one drafts with, measured
    deployed = {s["metric"]["instance"]: (s["metric"]["profile"], s["metric"]["method"], s["metric"]["k"])
                for s in everything[panel("Deployment as specops recorded it")]}
    assert deployed[dflash] == ("dflash", "dflash", "15") and deployed[mtp][1:] == ("mtp", "3"), deployed
    ks = {s["metric"]["instance"]: float(s["value"][1]) for s in everything[panel("Drafted tokens per draft (k)")]}
    assert ks == {dflash: 15.0, mtp: 3.0}, ks
    for title in ("Time to first token (TTFT)", "Inter-token latency (ITL)", "Time per output token (TPOT)"):
        for ref in ("A", "B"):
            assert {s["metric"]["instance"] for s in everything[panel(title, ref)]} == {dflash, mtp}, (title, ref)
    marks = {s["metric"]["specops_host"]: s["metric"]["profile"] for s in everything["annotation 'Deployments'"]}
    assert marks.get("sim-mtp") == "mtp-again", marks
    assert all(0 <= v <= 1 for v in positions.values())
    assert all(s["metric"]["__name__"] == "specops:spec_decode_acceptance_by_position:rate5m"
               for s in everything[panel("Acceptance by draft position (now)")])
    lengths = {s["metric"]["instance"]: float(s["value"][1]) for s in everything[panel("Mean acceptance length")]}
    assert set(lengths) == {dflash, mtp} and all(1 < v <= 16 for v in lengths.values()), lengths
    # one instance chosen: only its series
    for inst in (dflash, mtp):
        chosen = by_choice[(inst,)]
        assert {s["metric"]["instance"] for w, r in chosen.items() for s in r
                if w != "annotation 'Deployments'"} == {inst}  # specops' marks are by host, not by server
    # the restart is marked on the restarted server only
    marks = everything["annotation 'Restarts'"]
    assert [s["metric"]["instance"] for s in marks] == [mtp], marks
    restarts = {s["metric"]["instance"]: float(s["value"][1]) for s in everything[panel("Restarts in range")]}
    assert restarts[mtp] >= 1 and restarts[dflash] == 0, restarts
    print(f"mean acceptance length {lengths}; restarts {restarts}")


def test_the_dashboard_works_before_the_recording_rules_are_loaded(scraped: Scraped) -> None:
    """Day one: a Prometheus without the rules answers every panel from the raw counters, with the same
    series the rules give (the `or` fallback), never both."""
    dashboard = load()
    with_rules = wait_all_answer(scraped.rules, dashboard, restarted=None)
    without = wait_all_answer(scraped.bare, dashboard, restarted=None)
    for a, b in zip(with_rules, without, strict=True):
        for where in a:
            def keys(result: list[dict[str, Any]]) -> list[tuple[tuple[str, str], ...]]:
                return sorted(tuple(sorted((k, v) for k, v in s["metric"].items() if k != "__name__"))
                              for s in result)
            if where.startswith("annotation") or "Restarts" in where:
                continue  # restarts are no recording rule's; each Prometheus saw them at its own scrape
            assert keys(a[where]) == keys(b[where]), where
    bare_names = {s["metric"].get("__name__") for r in without for series in r.values() for s in series}
    assert not any(str(n).startswith("specops:") for n in bare_names)


# --- the real vLLM (CPU build) -------------------------------------------------------------------

REPETITIVE = " ".join(["one two three four five six seven eight"] * 12)


class RealVllm:
    """`vllm serve` of tests/support/realvllm.py's install, ngram k = 3 on the tiny model, in its own
    session (shared/reference/real-vllm-cpu.md has the recipe)."""

    def __init__(self, root: Path, status: dict[str, object]) -> None:
        self.root = root
        (root / "cache").mkdir(parents=True, exist_ok=True)
        # vLLM binds ZeroMQ ipc sockets under TMPDIR, and a socket path has at most 107 characters: a pytest
        # tmp_path (pytest-of-root/pytest-NNN/test_…/) can be longer, so a short directory of its own
        self.tmp = Path(tempfile.mkdtemp(prefix="specops-vllm-"))
        self.port = free_port()
        self.model = str(Path(str(status["models"])) / "tiny-a")
        self.env = {**{k: v for k, v in os.environ.items() if not k.lower().endswith("_proxy")},
                    "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "VLLM_CPU_KVCACHE_SPACE": "1",
                    "VLLM_NO_USAGE_STATS": "1", "VLLM_CACHE_ROOT": str(root / "cache"), "TMPDIR": str(self.tmp),
                    "VLLM_LOG_STATS_INTERVAL": "2"}
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        log = open(self.root / "vllm.log", "ab")  # noqa: SIM115 - the child keeps it
        spec = {"method": "ngram", "num_speculative_tokens": 3, "prompt_lookup_max": 4, "prompt_lookup_min": 2}
        self.proc = subprocess.Popen(
            [str(realvllm.vllm_bin()), "serve", self.model, "--port", str(self.port), "--host", "127.0.0.1",
             "--served-model-name", "tiny", "--max-model-len", "512", "--dtype", "bfloat16", "--enforce-eager",
             "--speculative-config", json.dumps(spec)],
            env=self.env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
        log.close()
        wait_for("the real vLLM's /health", self._healthy, timeout=300)

    def _healthy(self) -> bool:
        assert self.proc is not None and self.proc.poll() is None, (self.root / "vllm.log").read_text()[-3000:]
        try:
            return httpx.get(f"http://127.0.0.1:{self.port}/health", timeout=2, trust_env=False).status_code == 200
        except httpx.HTTPError:
            return False

    def requests(self, n: int) -> None:
        with httpx.Client(trust_env=False, timeout=120) as http:
            for _ in range(n):
                http.post(f"http://127.0.0.1:{self.port}/v1/completions",
                          json={"model": "tiny", "prompt": REPETITIVE, "max_tokens": 48, "temperature": 0,
                                "ignore_eos": True})

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGTERM)  # the session this test started: API server, engine, worker
            try:
                self.proc.wait(timeout=60)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait(timeout=30)
        shutil.rmtree(self.tmp, ignore_errors=True)


@pytest.mark.realvllm
def test_every_panel_query_returns_data_from_the_real_vllm(tmp_path: Path) -> None:
    status = realvllm.status()
    if not status.get("ready"):
        pytest.skip(f"real vLLM not available: {status.get('reason')}")
    if BINARY is None:
        pytest.skip("prometheus is not installed (.ci/run installs it)")
    server = RealVllm(tmp_path / "vllm", status)
    prom: Prometheus | None = None
    exporter: SpecopsExporter | None = None
    try:
        server.start()
        inst = f"127.0.0.1:{server.port}"
        exporter = SpecopsExporter([ServedSetting("cpu", "ngram", "ngram", 3, 0.3)])
        prom = live = Prometheus(tmp_path / "prom", [inst], rule_files=[RULES], labels={inst: {"specops_host": "cpu"}},
                                 jobs={"specops": [exporter.instance]})
        drafts = f'sum(vllm:spec_decode_num_drafts_total{{instance="{inst}"}})'
        wait_for("the first scrape", lambda: live.value(drafts) is not None, timeout=60)
        server.requests(3)
        # the real server exports its process start time: the restart marks read it
        assert checked(prom, f'process_start_time_seconds{{instance="{inst}"}}')
        started = prom.value(f'process_start_time_seconds{{instance="{inst}"}}')
        server.stop()
        server.start()
        wait_for("the new process start time in Prometheus", lambda: live.value(
            f'process_start_time_seconds{{instance="{inst}"}}') not in (None, started), timeout=120)
        seen = time.time()  # the mark stands for $__rate_interval from the new process's first scrape
        for _ in range(3):  # the new process drafts in more than one scrape
            server.requests(1)
            time.sleep(1)
        dashboard = load()
        result = wait_all_answer(prom, dashboard, restarted=None, timeout=120)[0]
        positions = sorted(int(s["metric"]["position"]) for s in
                           next(r for w, r in result.items() if "Acceptance by draft position (now)" in w))
        assert positions == [0, 1, 2]
        # a loaded machine may fill the other panels only after the mark's interval: it is read where it stands
        (restarts,) = [q for q in queries(dashboard) if q.where == "annotation 'Restarts'"]
        values = variable_sets(prom, dashboard)[0]  # the one instance alone
        assert [s["metric"]["instance"] for s in checked(prom, fill(restarts.expr, values), seen)] == [inst]
        print("real vLLM:", {w: [s["value"][1] for s in r] for w, r in result.items()})
    finally:
        if prom is not None:
            prom.stop()
        if exporter is not None:
            exporter.stop()
        server.stop()


# --- what a pip user gets ------------------------------------------------------------------------

def test_a_pip_user_gets_the_dashboard_and_the_rules_from_init_deploy_files(tmp_path: Path) -> None:
    """The wheel carries them and `specops init --deploy-files` (the wheel's own code, outside the
    checkout) writes them, byte for byte."""
    pytest.importorskip("hatchling", reason="the wheel is built offline with hatchling (pip install '.[test]')")
    subprocess.run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "--no-build-isolation", str(ROOT),
                    "-w", str(tmp_path / "dist")], check=True, capture_output=True, timeout=300)
    wheel = next((tmp_path / "dist").glob("specops-*.whl"))
    with zipfile.ZipFile(wheel) as zf:
        names = set(zf.namelist())
        for name in SHIPPED:
            assert f"bot/_data/deploy/{name}" in names, name
        zf.extractall(tmp_path / "site")
    empty = tmp_path / "empty"
    empty.mkdir()
    env = {k: v for k, v in os.environ.items() if not k.startswith("SPECOPS_")}
    env.update(PYTHONPATH=str(tmp_path / "site"), HOME=str(tmp_path / "home"))
    out = tmp_path / "out"
    where = subprocess.run([sys.executable, "-c", "import bot; print(bot.__file__)"], capture_output=True,
                           text=True, cwd=empty, env=env, timeout=60, check=True).stdout
    assert where.startswith(str(tmp_path / "site")), where  # the wheel's code, not the checkout's
    done = subprocess.run([sys.executable, "-m", "bot", "init", "--deploy-files", str(out)], capture_output=True,
                          text=True, cwd=empty, env=env, timeout=120)
    assert done.returncode == 0, done.stderr
    for name in SHIPPED:
        assert (out / name).read_bytes() == (DEPLOY / name).read_bytes(), name
    assert list(empty.iterdir()) == []


def test_init_does_not_write_the_dashboard_through_a_symlinked_grafana_folder(tmp_path: Path) -> None:
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    out = tmp_path / "out"
    out.mkdir()
    (out / "grafana").symlink_to(elsewhere)
    env = {k: v for k, v in os.environ.items() if not k.startswith("SPECOPS_")}
    env["HOME"] = str(tmp_path / "home")
    done = subprocess.run([sys.executable, "-m", "bot", "init", "--deploy-files", str(out), "--force"],
                          capture_output=True, text=True, cwd=ROOT, env=env, timeout=120)
    assert done.returncode == 2, done.stdout + done.stderr
    assert f"{out / 'grafana'} is a symbolic link" in done.stderr and "Traceback" not in done.stderr
    assert list(elsewhere.iterdir()) == []
