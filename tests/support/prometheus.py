"""A real Prometheus (Debian's package) on 127.0.0.1 for the tests: scrapes the given targets every
second, started in its own session, stopped by its PID."""

from __future__ import annotations

import shutil
import subprocess
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import httpx

from tests.support.served import wait_for
from tests.support.sshd import free_port

BINARY = shutil.which("prometheus")


def prometheus_yml(targets: Sequence[str], job: str = "vllm", *, labels: Mapping[str, Mapping[str, str]] | None = None,
                   jobs: Mapping[str, Sequence[str]] | None = None, rule_files: Sequence[Path] = ()) -> str:
    """A scrape every second of `targets` in `job` (each with its `labels`, e.g. specops_host, as an operator
    labels vLLM's targets), of each further job's targets, with the rule files evaluated every second."""
    out = "global: {scrape_interval: 1s, evaluation_interval: 1s}\n"
    if rule_files:
        out += "rule_files: [" + ", ".join(f"'{p}'" for p in rule_files) + "]\n"
    out += "scrape_configs:\n"
    for name, listed in {job: targets, **(jobs or {})}.items():
        out += f"  - job_name: {name}\n    static_configs:\n"
        for t in listed:
            extra = (labels or {}).get(t, {}) if name == job else {}
            tagged = ", ".join(f"{k}: '{v}'" for k, v in extra.items())
            out += f"      - {{targets: ['{t}']" + (f", labels: {{{tagged}}}" if tagged else "") + "}\n"
    return out


class Prometheus:
    def __init__(self, root: Path, targets: list[str], job: str = "vllm", *,
                 labels: Mapping[str, Mapping[str, str]] | None = None, jobs: Mapping[str, Sequence[str]] | None = None,
                 rule_files: Sequence[Path] = ()) -> None:
        assert BINARY is not None, "prometheus is not installed (.ci/run installs it)"
        root.mkdir(parents=True, exist_ok=True)
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        (root / "prom.yml").write_text(prometheus_yml(targets, job, labels=labels, jobs=jobs, rule_files=rule_files))
        self.log = open(root / "prometheus.log", "w")  # noqa: SIM115 - closed in stop()
        self.proc = subprocess.Popen(
            [BINARY, f"--config.file={root / 'prom.yml'}", f"--storage.tsdb.path={root / 'tsdb'}",
             f"--web.listen-address=127.0.0.1:{self.port}"],
            stdout=self.log, stderr=subprocess.STDOUT, start_new_session=True)
        wait_for("Prometheus to answer", lambda: self.value("up") is not None or self._ready(), timeout=60)

    def _ready(self) -> bool:
        try:
            return httpx.get(f"{self.url}/-/ready", timeout=2, trust_env=False).status_code == 200
        except httpx.HTTPError:
            return False

    def query(self, promql: str) -> list[dict[str, Any]]:
        try:
            data = httpx.get(f"{self.url}/api/v1/query", params={"query": promql}, timeout=2,
                             trust_env=False).json()
        except (httpx.HTTPError, ValueError):
            return []
        result = data.get("data", {}).get("result", [])
        return result if isinstance(result, list) else []

    def value(self, promql: str) -> float | None:
        result = self.query(promql)
        return float(result[0]["value"][1]) if result else None

    def stop(self) -> None:
        self.proc.terminate()  # the process this fixture started, by its PID
        try:
            self.proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(timeout=10)
        self.log.close()
