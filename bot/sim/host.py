"""The simulated A6000 host: a temporary root with fake `vllm` installs and `nvidia-smi`, model
directories, and an in-process SSH server on 127.0.0.1 with its own host key.

It is what `specops demo` and the tests deploy to. Everything it runs stays in its root and on
loopback.
"""

from __future__ import annotations

import json
import shutil
import sys
import tempfile
from pathlib import Path
from typing import Any

from bot.config import Config, HostConfig, Profile, Settings, VllmInstall
from bot.sim.sshd import SimSSHServer, new_ed25519

PROJECT = Path(__file__).resolve().parent.parent.parent
QWEN36_DFLASH_CONFIG: dict[str, Any] = {
    "architectures": ["DFlashDraftModel"],
    "num_hidden_layers": 5,
    "num_target_layers": 64,
    "block_size": 16,
    "sliding_window": 2048,
    "layer_types": ["sliding_attention"] * 4 + ["full_attention"],
    "dflash_config": {"mask_token_id": 248070, "target_layer_ids": [1, 16, 31, 46, 61]},
}
VERSIONS = ("0.20.1", "0.25.0", "0.26.0")


class SimHost:
    def __init__(self, root: Path | None = None, *, stats_interval: float = 1.0, startup_seconds: float = 1.0,
                 base_tps: float = 30.0, max_request_seconds: float = 3.0) -> None:
        self._own_root = root is None
        self.root = (root or Path(tempfile.mkdtemp(prefix="specops-sim-"))).resolve()
        self.state = self.root / "sim"
        self.stats_interval = stats_interval
        self.startup_seconds = startup_seconds
        self.base_tps = base_tps
        self.max_request_seconds = max_request_seconds
        self.server: SimSSHServer | None = None
        self._build()

    # --- the host's files -------------------------------------------------------------------

    def _build(self) -> None:
        for d in ("bin", "sim", "models", "srv/specops", "keys", "tmp"):
            (self.root / d).mkdir(parents=True, exist_ok=True)
        py = sys.executable
        self._script(self.root / "bin" / "nvidia-smi", f'exec "{py}" -m bot.sim.fake_nvidia_smi "$@"\n')
        for version in VERSIONS:
            self._script(self.root / "opt" / f"vllm-{version}" / "bin" / "vllm",
                         f'SPECOPS_SIM_VLLM_VERSION={version} exec "{py}" -m bot.sim.fake_vllm "$@"\n')
        models = self.root / "models"
        for name, cfg in (
            ("Qwen3.6-27B", {"architectures": ["Qwen3_5ForConditionalGeneration"], "num_hidden_layers": 64}),
            ("Qwen3.6-27B-DFlash", QWEN36_DFLASH_CONFIG),
        ):
            (models / name).mkdir(exist_ok=True)
            (models / name / "config.json").write_text(json.dumps(cfg, indent=2) + "\n")
        self.host_key = new_ed25519(self.root / "keys" / "host_ed25519")
        self.client_key_path = self.root / "keys" / "client_ed25519"
        self.client_key = new_ed25519(self.client_key_path)

    @staticmethod
    def _script(path: Path, body: str) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("#!/bin/sh\n" + body)
        path.chmod(0o755)

    def env(self) -> dict[str, str]:
        return {
            "PATH": f"{self.root / 'bin'}:/usr/local/bin:/usr/bin:/bin",
            "HOME": str(self.root),
            "TMPDIR": str(self.root / "tmp"),
            "LANG": "C.UTF-8",
            "PYTHONPATH": str(PROJECT),
            "PYTHONDONTWRITEBYTECODE": "1",
            "SPECOPS_SIM_STATE": str(self.state),
            "SPECOPS_SIM_CONTROL": str(self.state / "control.json"),
            "SPECOPS_SIM_STARTUP_SECONDS": str(self.startup_seconds),
            "SPECOPS_SIM_BASE_TPS": str(self.base_tps),
            "SPECOPS_SIM_MAX_REQUEST_SECONDS": str(self.max_request_seconds),
            "VLLM_LOG_STATS_INTERVAL": str(self.stats_interval),
        }

    # --- knobs for the story and the tests ----------------------------------------------------

    def set_gpus_visible(self, visible: bool) -> None:
        flag = self.state / "nvidia-smi.no-devices"
        if visible:
            flag.unlink(missing_ok=True)
        else:
            flag.write_text("vfio-pci\n")

    def control(self, **values: Any) -> None:
        path = self.state / "control.json"
        data = json.loads(path.read_text()) if path.exists() else {}
        data.update(values)
        path.write_text(json.dumps(data))

    # --- the SSH server ----------------------------------------------------------------------

    def start(self) -> SimHost:
        if self.server is None:
            self.server = SimSSHServer(self.root, self.host_key, [self.client_key], self.env()).start()
            known = self.root / "keys" / "known_hosts"
            known.write_text(f"[127.0.0.1]:{self.server.port} {self.host_key.get_name()} "
                             f"{self.host_key.get_base64()}\n")
        return self

    @property
    def port(self) -> int:
        assert self.server is not None, "start() the simulated host first"
        return self.server.port

    def host_config(self, port: int | None = None) -> HostConfig:
        return HostConfig(address="127.0.0.1", port=port or self.port, user="specops", key=self.client_key_path,
                          known_hosts=self.root / "keys" / "known_hosts", workdir=str(self.root / "srv" / "specops"),
                          connect_timeout=15.0, keepalive=5.0)

    def profiles(self, port: int = 18000) -> dict[str, Profile]:
        models = self.root / "models"
        target = str(models / "Qwen3.6-27B")
        drafter = str(models / "Qwen3.6-27B-DFlash")
        common: dict[str, Any] = {"model": target, "served_model_name": "Qwen/Qwen3.6-27B", "tensor_parallel_size": 2,
                                  "port": port, "baseline_tps": 73.5, "startup_timeout": 60.0}
        return {
            "dflash-0.20.1": Profile(
                **common, method="dflash", drafter=drafter, num_speculative_tokens=15,
                vllm=VllmInstall(bin=str(self.root / "opt/vllm-0.20.1/bin/vllm"), version="0.20.1"),
                extra_args={"attention-backend": "flash_attn", "max-num-batched-tokens": 32768}),
            "dflash": Profile(
                **common, method="dflash", drafter=drafter, num_speculative_tokens=15,
                vllm=VllmInstall(bin=str(self.root / "opt/vllm-0.26.0/bin/vllm"), version="0.26.0"),
                env={"VLLM_USE_V2_MODEL_RUNNER": "1"},
                extra_args={"attention-backend": "flash_attn", "max-num-batched-tokens": 32768}),
            "mtp": Profile(
                **common, method="mtp", num_speculative_tokens=3,
                vllm=VllmInstall(bin=str(self.root / "opt/vllm-0.20.1/bin/vllm"), version="0.20.1")),
        }

    def config(self, host_name: str = "a6000", port: int = 18000) -> Config:
        return Config(hosts={host_name: self.host_config()}, profiles=self.profiles(port),
                      settings=Settings(state=self.root / "specops.db"))

    def stop(self) -> None:
        if self.server is not None:
            self.server.close()
            self.server = None

    def stop_server(self) -> bool:
        """Stop the (fake) vLLM this host runs, by its recorded PID and only if it is that server."""
        import os
        import signal

        pid_file = self.root / "srv" / "specops" / "server.pid"
        try:
            pid = int(pid_file.read_text().strip())
            cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
        except (OSError, ValueError):
            return False
        if str(self.root).encode() not in cmdline:
            return False  # a reused PID: not ours
        try:
            os.killpg(pid, signal.SIGKILL)  # the session the playbook's setsid created
        except ProcessLookupError:
            return False
        return True

    def cleanup(self) -> None:
        self.stop_server()
        self.stop()
        if self._own_root:
            shutil.rmtree(self.root, ignore_errors=True)

    def __enter__(self) -> SimHost:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.cleanup()
