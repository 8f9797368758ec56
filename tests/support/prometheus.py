"""A real Prometheus (Debian's package) on 127.0.0.1 for the tests: scrapes the given targets every
second, started in its own session, stopped by its PID."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path
from typing import Any

import httpx

from tests.support.served import wait_for
from tests.support.sshd import free_port

BINARY = shutil.which("prometheus")


class Prometheus:
    def __init__(self, root: Path, targets: list[str], job: str = "vllm") -> None:
        assert BINARY is not None, "prometheus is not installed (.ci/run installs it)"
        root.mkdir(parents=True, exist_ok=True)
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        quoted = ", ".join(f"'{t}'" for t in targets)
        (root / "prom.yml").write_text(
            "global: {scrape_interval: 1s, evaluation_interval: 1s}\n"
            "scrape_configs:\n"
            f"  - job_name: {job}\n    static_configs: [{{targets: [{quoted}]}}]\n")
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
