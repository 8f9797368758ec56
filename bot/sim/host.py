"""The simulated A6000 host: a temporary root with fake `vllm` installs and `nvidia-smi`, model
directories, and an in-process SSH server on 127.0.0.1 with its own host key.

It is what `specops demo` and the tests deploy to. Everything it runs stays in its root and on
loopback.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import stat
import sys
import tempfile
from pathlib import Path
from typing import Any

from bot.config import Config, HostConfig, Profile, ProxmoxRef, Settings, VllmInstall
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
# the target's architecture as Qwen3.5-27B's (Qwen3.6-27B shares it: hybrid, one full-attention layer in four, the
# rest Gated DeltaNet), from a public training recipe: https://github.com/THUDM/slime (scripts/models/qwen3.5-27B.sh)
QWEN36_TARGET_CONFIG: dict[str, Any] = {
    "architectures": ["Qwen3_5ForConditionalGeneration"],
    "text_config": {"num_hidden_layers": 64, "hidden_size": 5120, "num_attention_heads": 24, "num_key_value_heads": 4,
                    "head_dim": 256, "full_attention_interval": 4, "vocab_size": 248320,
                    "max_position_embeddings": 262144, "rope_theta": 10000000, "partial_rotary_factor": 0.25,
                    "torch_dtype": "bfloat16"},
}
# what the simulated checkpoints' weight files hold (their safetensors index; no weights are there): the target's
# ~27.8 B bf16 parameters, the drafter's a round figure for its five layers
WEIGHT_BYTES = {"Qwen3.6-27B": 55_600_000_000, "Qwen3.6-27B-DFlash": 3_400_000_000}
VERSIONS = ("0.20.1", "0.25.0", "0.26.0")
HUB_NAMES = {"Qwen/Qwen3.6-27B": "Qwen3.6-27B", "z-lab/Qwen3.6-27B-DFlash": "Qwen3.6-27B-DFlash"}


class SimHost:
    def __init__(self, root: Path | None = None, *, stats_interval: float = 1.0, startup_seconds: float = 1.0,
                 base_tps: float = 30.0, max_request_seconds: float = 3.0, name: str = "a6000",
                 gpu_used_mib: int | None = None) -> None:
        """`name` is the machine's hostname (its Proxmox container's); `gpu_used_mib` what each of its GPUs
        reports in use (None: the fake nvidia-smi's default, 4 MiB), so hosts of a fleet tell apart."""
        self._own_root = root is None
        self.root = (root or Path(tempfile.mkdtemp(prefix="specops-sim-"))).resolve()
        self.state = self.root / "sim"
        self.name = name
        self.gpu_used_mib = gpu_used_mib
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
        self._script(self.root / "bin" / "lspci", f'exec "{py}" -m bot.sim.fake_nvidia_smi --lspci "$@"\n')
        self._gpu_files()
        if self.gpu_used_mib is not None:  # read by the fake nvidia-smi from this host's SPECOPS_SIM_STATE
            (self.state / "nvidia-smi.used-mib").write_text(f"{self.gpu_used_mib}\n")
        for version in VERSIONS:
            self._script(self.root / "opt" / f"vllm-{version}" / "bin" / "vllm",
                         f'SPECOPS_SIM_VLLM_VERSION={version} exec "{py}" -m bot.sim.fake_vllm "$@"\n')
        models = self.root / "models"
        for name, cfg in (("Qwen3.6-27B", QWEN36_TARGET_CONFIG), ("Qwen3.6-27B-DFlash", QWEN36_DFLASH_CONFIG)):
            (models / name).mkdir(exist_ok=True)
            (models / name / "config.json").write_text(json.dumps(cfg, indent=2) + "\n")
            (models / name / "model.safetensors.index.json").write_text(json.dumps(
                {"metadata": {"total_size": WEIGHT_BYTES[name]}, "weight_map": {}}) + "\n")
        # the same two in the Hugging Face cache ($HOME/.cache/huggingface/hub) under their hub names, as a host
        # that downloaded them holds them: `check` reads a profile naming `Qwen/Qwen3.6-27B` from there
        for hub, name in HUB_NAMES.items():
            snapshot = (self.root / ".cache/huggingface/hub" / f"models--{hub.replace('/', '--')}" / "snapshots"
                        / hashlib.sha1(hub.encode()).hexdigest())
            snapshot.mkdir(parents=True, exist_ok=True)
            for f in ("config.json", "model.safetensors.index.json"):
                shutil.copyfile(models / name / f, snapshot / f)
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
            "SPECOPS_SYSROOT": str(self.root / "sys"),  # /dev, /proc and /etc/pve as the doctor reads them
        }

    # --- the GPU side: what `specops doctor` reads (under SPECOPS_SYSROOT) -----------------------

    DRIVER = "550.120"
    DEVICES = (("nvidia0", 195, 0), ("nvidia1", 195, 1), ("nvidiactl", 195, 255), ("nvidia-uvm", 508, 0),
               ("nvidia-uvm-tools", 508, 1))
    FAULTS = ("vfio", "driver-mismatch", "no-devices", "small-shm", "stale-server")
    CTID = 105

    @property
    def sysroot(self) -> Path:
        return self.root / "sys"

    def _gpu_files(self, devices: bool = True, module: str | None = DRIVER, shm: str = "8388608k") -> None:
        r = self.sysroot
        for d in ("dev/shm", "proc/driver/nvidia", "usr/lib/x86_64-linux-gnu", "etc/pve/lxc"):
            (r / d).mkdir(parents=True, exist_ok=True)
        for name, _major, _minor in self.DEVICES:
            (r / "dev" / name).unlink(missing_ok=True)
        if devices:
            for name, major, minor in self.DEVICES:
                try:  # a device node, as on a real host (root may make one); else a plain file stands in
                    os.mknod(r / "dev" / name, 0o666 | stat.S_IFCHR, os.makedev(major, minor))
                except OSError:
                    (r / "dev" / name).touch()
        version = r / "proc/driver/nvidia/version"
        if module is None:
            version.unlink(missing_ok=True)
        else:
            version.write_text(f"NVRM version: NVIDIA UNIX x86_64 Kernel Module  {module}  Sat Sep 28 2024\n"
                               "GCC version:  gcc version 12.2.0 (Debian 12.2.0-14)\n")
        lib = r / "usr/lib/x86_64-linux-gnu"
        for old in lib.glob("libnvidia-ml.so.*"):
            old.unlink()
        (lib / f"libnvidia-ml.so.{self.DRIVER}").touch()
        (lib / "libnvidia-ml.so.1").touch()
        (r / "proc/mounts").write_text(
            "/dev/mapper/pve-vm--105--disk--0 / ext4 rw,relatime 0 0\n"
            f"none /dev/shm tmpfs rw,nosuid,nodev,size={shm},inode64 0 0\n")
        lines = [f"arch: amd64\nhostname: {self.name}\nmemory: 131072\n"
                 f"rootfs: local-lvm:vm-{self.CTID}-disk-0,size=200G",
                 "lxc.cgroup2.devices.allow: c 195:* rwm", "lxc.cgroup2.devices.allow: c 508:* rwm"]
        if devices:
            lines += [f"lxc.mount.entry: /dev/{n} dev/{n} none bind,optional,create=file" for n, _, _ in self.DEVICES]
        (r / f"etc/pve/lxc/{self.CTID}.conf").write_text("\n".join(lines) + "\n")

    def fault(self, name: str | None) -> None:
        """Break the host the way the brief's did (or mend it: None). Each fails one doctor check."""
        if name is not None and name not in self.FAULTS:
            raise ValueError(f"unknown fault {name!r}; one of {', '.join(self.FAULTS)}")
        for flag in ("nvidia-smi.no-devices", "nvidia-smi.mismatch", "nvidia-smi.no-driver", "lspci.vfio",
                     "nvidia-smi.apps"):
            (self.state / flag).unlink(missing_ok=True)
        self._gpu_files()
        if name == "vfio":  # the GPUs reserved for VM passthrough: no nvidia driver on them at all
            (self.state / "lspci.vfio").touch()
            (self.state / "nvidia-smi.no-driver").touch()
            self._gpu_files(devices=False, module=None)
        elif name == "driver-mismatch":  # the host's module was upgraded, the container's library was not
            (self.state / "nvidia-smi.mismatch").touch()
            self._gpu_files(module="550.127.05")
        elif name == "no-devices":  # the container's config binds no /dev/nvidia*
            (self.state / "nvidia-smi.no-driver").touch()
            self._gpu_files(devices=False)
        elif name == "small-shm":  # a container's 64 MB default
            self._gpu_files(shm="65536k")
        elif name == "stale-server":  # a server from an earlier run still holds the GPUs
            (self.state / "nvidia-smi.apps").write_text("4242, /opt/vllm-0.20.1/bin/python3, 44160\n")

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
                                  "port": port, "baseline_tps": 73.5, "baseline_method": "mtp",
                                  "startup_timeout": 60.0}
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

    def doctor_config(self, host_name: str = "a6000", port: int = 18000) -> Config:
        """The config with the Proxmox host named: `pve`, the same simulated machine, container CTID."""
        cfg = self.config(host_name, port)
        pve = self.host_config()
        cfg.hosts[host_name] = cfg.hosts[host_name].model_copy(
            update={"proxmox": ProxmoxRef(host="pve", ctid=self.CTID)})
        cfg.hosts["pve"] = pve
        return cfg

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
