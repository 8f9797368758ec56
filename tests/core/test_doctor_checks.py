"""The doctor's judgement pinned to the letter: every check (id, title, status, seen, fix, kb, order) that
bot.core.doctor draws from the probe outputs in tests/fixtures/doctor/ and from variants of them that reach
each branch the simulated host's faults do not. The expectation in expected.json is what the checks said
before they were split into one function each; regenerate it only for a change meant to alter a check's
words: `python -m tests.core.test_doctor_checks`."""

from __future__ import annotations

import json
import re
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from bot.core.doctor import container_driver
from bot.core.doctor_host import host_checks
from bot.core.doctor_proxmox import proxmox_checks

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "doctor"
EXPECTED = FIXTURES / "expected.json"


def fixture(name: str) -> str:
    return (FIXTURES / f"{name}.txt").read_text(encoding="utf-8")


def with_section(text: str, name: str, lines: list[str] | None) -> str:
    """`text` with the body of `==== name` replaced by `lines` (None: the section dropped altogether)."""
    pattern = re.compile(rf"^==== {re.escape(name)}\n(?:(?!==== ).*\n)*", re.MULTILINE)
    body = "" if lines is None else f"==== {name}\n" + "".join(f"{ln}\n" for ln in lines)
    if pattern.search(text):
        return pattern.sub(lambda _: body, text, count=1)
    return text + body


DEV = "crw-r--r-- 1 0 0 {major}, {minor} Dec  2 00:04 /sim/sys/dev/{name}"
DEVICES = {"nvidia-uvm": (508, 0), "nvidia-uvm-tools": (508, 1), "nvidia0": (195, 0), "nvidia1": (195, 1),
           "nvidiactl": (195, 255)}


def devs(*names: str) -> list[str]:
    return [DEV.format(major=DEVICES[n][0], minor=DEVICES[n][1], name=n) for n in names]


PLAIN_DEVS = [f"-rw-r--r-- 1 1000 1000 0 Dec  2 00:04 /sim/sys/dev/{n}" for n in sorted(DEVICES)]
HOLDER = 'LISTEN 0      4096       0.0.0.0:18000      0.0.0.0:*    users:(("python3",pid=4242,fd=12))'
COMPAT = ["/usr/local/cuda-12.4/compat/libcuda.so.1", "/usr/local/cuda-12.4/compat/libcuda.so.550.54.15"]
MISMATCH = ["Failed to initialize NVML: Driver/library version mismatch", "NVML library version: 550.120", "exit=18"]
GPU = ("{bus} VGA compatible controller [0300]: NVIDIA Corporation GA102GL [RTX A6000] [10de:2230] (rev a1)",
       "\tSubsystem: NVIDIA Corporation GA102GL [RTX A6000] [10de:1459]")
AUDIO = "{bus} Audio device [0403]: NVIDIA Corporation GA102 High Definition Audio Controller [10de:1aef] (rev a1)"

Host = tuple[str, Callable[[str], str], dict[str, Any]]
OMIT: Any = object()  # a keyword left out: the function's own default applies


def same(text: str) -> str:
    return text


def sec(name: str, lines: list[str] | None) -> Callable[[str], str]:
    return lambda text: with_section(text, name, lines)


def both(*edits: Callable[[str], str]) -> Callable[[str], str]:
    def run(text: str) -> str:
        for edit in edits:
            text = edit(text)
        return text
    return run


HOST_DEFAULTS: dict[str, Any] = {"host": "a6000", "port": 18000, "tp": 2, "expected_version": "0.20.1",
                                 "recorded_pid": None}
FAULTS = ("ready", "vfio", "driver-mismatch", "no-devices", "small-shm", "stale-server")
HOST_CASES: dict[str, Host] = {
    **{f"{f}": (f"host-{f}", same, {}) for f in FAULTS},
    **{f"{f}-short": (f"host-{f}", same, {"short": True}) for f in FAULTS},
    "defaults-only": ("host-ready", same, {"host": OMIT, "port": OMIT, "tp": OMIT, "expected_version": OMIT}),
    "tp1": ("host-ready", same, {"tp": 1, "expected_version": None}),
    "tp4": ("host-ready", same, {"tp": 4}),
    "tp4-short": ("host-ready", same, {"tp": 4, "short": True}),
    "no-uvm": ("host-ready", sec("devices", devs("nvidia0", "nvidia1", "nvidiactl")), {}),
    "no-ctl": ("host-ready", sec("devices", devs("nvidia-uvm", "nvidia0")), {}),
    "only-ctl": ("host-ready", sec("devices", devs("nvidiactl")), {"short": True}),
    "plain-files": ("host-ready", sec("devices", PLAIN_DEVS), {}),
    "module-ahead": ("host-ready", sec("kernel-module", ["NVRM version: NVIDIA UNIX Open Kernel Module for x86_64  "
                                                         "550.127.05  Release Build"]), {}),
    "no-libs": ("host-ready", sec("libnvidia-ml", []), {}),
    "no-libs-mismatch": ("host-driver-mismatch", sec("libnvidia-ml", None), {}),
    "smi-no-devices": ("host-ready", sec("nvidia-smi", ["No devices were found", "exit=6"]), {}),
    "smi-no-devices-and-mismatch": ("host-ready", sec("nvidia-smi", ["No devices were found", *MISMATCH]), {}),
    "smi-mismatch-only": ("host-ready", sec("nvidia-smi", MISMATCH), {"short": True}),
    "smi-empty": ("host-ready", sec("nvidia-smi", []), {}),
    "smi-rows-but-failed": ("host-ready", sec("nvidia-smi", ["0, NVIDIA RTX A6000, 550.120, 49140, 49136",
                                                             "exit=1"]), {}),
    "compat-shadows": ("host-ready", sec("cuda-compat", [*COMPAT, "LD_LIBRARY_PATH=/usr/local/cuda/compat:/usr/lib"]),
                       {}),
    "compat-off-path": ("host-ready", sec("cuda-compat", [*COMPAT, "LD_LIBRARY_PATH=/usr/lib"]), {}),
    "compat-newer": ("host-ready", sec("cuda-compat", ["/usr/local/cuda/compat/libcuda.so.560.35.03",
                                                       "LD_LIBRARY_PATH=/usr/local/cuda/compat"]), {}),
    "compat-no-module": ("host-vfio", sec("cuda-compat", [*COMPAT, "LD_LIBRARY_PATH=/usr/local/cuda/compat"]), {}),
    "compat-no-ld-line": ("host-ready", sec("cuda-compat", COMPAT), {}),
    "shm-small-tp1": ("host-small-shm", same, {"tp": 1}),
    "shm-df-only": ("host-ready", sec("shm", ["tmpfs              65536         0     65536       0% /dev/shm"]), {}),
    "shm-size-m": ("host-ready", sec("shm", ["shm /dev/shm tmpfs rw,nosuid,nodev,size=512m 0 0"]), {}),
    "shm-size-g-tp1": ("host-ready", sec("shm", ["shm /dev/shm tmpfs rw,size=2G 0 0"]), {"tp": 1}),
    "shm-size-bytes": ("host-ready", sec("shm", ["shm /dev/shm tmpfs rw,size=1073741824 0 0"]), {}),
    "shm-other-mount": ("host-ready", sec("shm", ["none /run/shm tmpfs rw,size=8g 0 0"]), {}),
    "shm-empty": ("host-ready", sec("shm", []), {}),
    "shm-gone": ("host-ready", sec("shm", None), {"tp": 1}),
    "disk-low": ("host-ready", sec("disk", ["/models/big /dev/sda 100000000 90000000 10485760 90% /models",
                                            "/srv/specops", "/x /dev/sdb 1 2 - 3% /x",
                                            "/ok /dev/sdc 100000000 1 20971520 1% /ok"]), {}),
    "disk-empty": ("host-ready", sec("disk", []), {}),
    "vllm-missing": ("host-ready", sec("vllm", ["missing=/opt/vllm/bin/vllm"]), {}),
    "vllm-other-version": ("host-ready", sec("vllm", ["bin=/opt/vllm/bin/vllm", "version=0.25.0"]), {}),
    "vllm-newer-patch": ("host-ready", sec("vllm", ["bin=/opt/vllm/bin/vllm", "version=0.20.1.post1"]), {}),
    "vllm-no-version": ("host-ready", sec("vllm", ["bin=/opt/vllm/bin/vllm", "version="]), {}),
    "vllm-unpinned": ("host-ready", sec("vllm", ["bin=/opt/vllm/bin/vllm", "version=0.25.0"]),
                      {"expected_version": None}),
    "vllm-empty": ("host-ready", sec("vllm", []), {}),
    "hf-env": ("host-ready", sec("hf-token", ["env"]), {}),
    "hf-file": ("host-ready", sec("hf-token", ["file"]), {}),
    "hf-gone": ("host-ready", sec("hf-token", None), {}),
    "port-ours": ("host-ready", both(sec("port", [HOLDER]), sec("compute-apps", ["4242, python3, 44160"])),
                  {"recorded_pid": 4242}),
    "port-theirs": ("host-ready", sec("port", [HOLDER]), {}),
    "port-recorded-other": ("host-ready", sec("port", [HOLDER]), {"recorded_pid": 7}),
    "port-no-ss": ("host-ready", sec("port", ["sh: 1: ss: not found"]), {}),
    "port-unknown-port": ("host-ready", sec("port", [HOLDER]), {"port": None}),
    "stale-recorded": ("host-stale-server", same, {"recorded_pid": 4242}),
    "stale-other": ("host-stale-server", same, {"recorded_pid": 999}),
    "stale-pid-prefix": ("host-stale-server", same, {"recorded_pid": 42}),
    "stale-two": ("host-ready", sec("compute-apps", ["4242, /opt/vllm/bin/python3, 44160", "not a pid, x",
                                                     " 5151 , python3, 100"]), {"host": "gpu-7"}),
    "everything-missing": ("host-ready", lambda _: "", {}),
    "everything-missing-short": ("host-ready", lambda _: "", {"short": True}),
}

PVE_DEFAULTS: dict[str, Any] = {"ctid": 105, "container_module": "550.120", "pve": "pve"}
PVE_CASES: dict[str, Host] = {
    **{f: (f"proxmox-{f}", same, {}) for f in ("ready", "vfio", "driver-mismatch", "no-devices")},
    "default-pve-name": ("proxmox-vfio", same, {"pve": OMIT}),
    "unknown-container-driver": ("proxmox-driver-mismatch", same, {"container_module": None}),
    "container-ahead": ("proxmox-ready", same, {"container_module": "555.42.02"}),
    "no-gpus": ("proxmox-ready", sec("lspci", []), {}),
    "audio-only": ("proxmox-ready", sec("lspci", [AUDIO.format(bus="01:00.1"), "\tKernel driver in use: vfio-pci"]),
                   {}),
    "no-driver": ("proxmox-ready", sec("lspci", [GPU[0].format(bus="01:00.0"), GPU[1],
                                                 "\tKernel driver in use: vfio-pci",
                                                 GPU[0].format(bus="41:00.0").replace("VGA compatible", "3D"), GPU[1],
                                                 "\tKernel modules: nvidia"]), {}),
    "3d-controller": ("proxmox-ready", sec("lspci", [GPU[0].format(bus="01:00.0").replace(
        "VGA compatible controller [0300]", "3D controller [0302]"), "\tKernel driver in use: nouveau"]), {}),
    "lspci-missing": ("proxmox-ready", sec("lspci", ["sh: 1: lspci: not found"]), {}),
    "conf-missing": ("proxmox-ready", sec("lxc-conf", ["cat: /etc/pve/lxc/105.conf: No such file or directory"]),
                     {}),
    "conf-empty": ("proxmox-ready", sec("lxc-conf", []), {"ctid": 200}),
    "conf-minor-allows": ("proxmox-ready", sec("lxc-conf", [
        "lxc.cgroup2.devices.allow: c 195:0 rw", "lxc.cgroup2.devices.allow: c 508:* m",
        *[f"lxc.mount.entry: /dev/{n} dev/{n} none bind,optional,create=file" for n in sorted(DEVICES)]]), {}),
    "conf-no-uvm-allow": ("proxmox-ready", sec("lxc-conf", [
        "lxc.cgroup2.devices.allow: c 195:* rwm",
        *[f"lxc.mount.entry: /dev/{n} dev/{n} none bind,optional,create=file" for n in ("nvidia0", "nvidiactl")]]),
                          {}),
    "plain-file-devices": ("proxmox-no-devices", sec("devices", PLAIN_DEVS), {}),
    "devices-gone": ("proxmox-ready", sec("devices", None), {}),
    "everything-missing": ("proxmox-ready", lambda _: "", {"container_module": None}),
}

DRIVER_CASES: dict[str, tuple[str, Callable[[str], str]]] = {
    **{f: (f"host-{f}", same) for f in FAULTS},
    "smi-only": ("host-ready", sec("libnvidia-ml", [])),
    "smi-odd-version": ("host-ready", both(sec("libnvidia-ml", []), sec("nvidia-smi", ["0, GPU, N/A, 1, 1"]))),
    "nothing": ("host-ready", lambda _: ""),
}


def _kwargs(defaults: dict[str, Any], given: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in {**defaults, **given}.items() if v is not OMIT}


def host_result(case: str) -> list[dict[str, object]]:
    name, edit, given = HOST_CASES[case]
    return [c.as_json() for c in host_checks(edit(fixture(name)), **_kwargs(HOST_DEFAULTS, given))]


def pve_result(case: str) -> list[dict[str, object]]:
    name, edit, given = PVE_CASES[case]
    return [c.as_json() for c in proxmox_checks(edit(fixture(name)), **_kwargs(PVE_DEFAULTS, given))]


def driver_result(case: str) -> str | None:
    name, edit = DRIVER_CASES[case]
    return container_driver(edit(fixture(name)))


def _expected() -> dict[str, dict[str, Any]]:
    data: dict[str, dict[str, Any]] = json.loads(EXPECTED.read_text(encoding="utf-8"))
    return data


@pytest.mark.parametrize("case", sorted(HOST_CASES))
def test_host_checks_say_exactly_what_they_said(case: str) -> None:
    assert host_result(case) == _expected()["host_checks"][case]


@pytest.mark.parametrize("case", sorted(PVE_CASES))
def test_proxmox_checks_say_exactly_what_they_said(case: str) -> None:
    assert pve_result(case) == _expected()["proxmox_checks"][case]


@pytest.mark.parametrize("case", sorted(DRIVER_CASES))
def test_container_driver_reads_what_it_read(case: str) -> None:
    assert driver_result(case) == _expected()["container_driver"][case]


def test_every_case_has_an_expectation_and_no_other() -> None:
    expected = _expected()
    assert set(expected["host_checks"]) == set(HOST_CASES)
    assert set(expected["proxmox_checks"]) == set(PVE_CASES)
    assert set(expected["container_driver"]) == set(DRIVER_CASES)


def test_the_fixtures_reach_every_check_and_status() -> None:
    # the pin is only as good as its reach: each check id shows up in each status it can take
    seen = {(c["id"], c["status"]) for case in HOST_CASES for c in host_result(case)}
    seen |= {(c["id"], c["status"]) for case in PVE_CASES for c in pve_result(case)}
    assert seen >= {("devices", "ok"), ("devices", "failed"), ("uvm", "failed"), ("driver-match", "ok"),
                    ("driver-match", "failed"), ("driver-match", "skipped"), ("nvidia-smi", "ok"),
                    ("nvidia-smi", "failed"), ("cuda-compat", "ok"), ("cuda-compat", "failed"), ("shm", "ok"),
                    ("shm", "warn"), ("shm", "failed"), ("shm", "skipped"), ("disk", "ok"), ("disk", "warn"),
                    ("vllm", "ok"), ("vllm", "warn"), ("vllm", "failed"), ("vllm", "skipped"), ("hf-token", "ok"),
                    ("hf-token", "warn"), ("port", "ok"), ("port", "warn"), ("port", "failed"),
                    ("stale-server", "ok"), ("stale-server", "failed"), ("pve-gpu-driver", "ok"),
                    ("pve-gpu-driver", "failed"), ("pve-lxc-devices", "ok"), ("pve-lxc-devices", "failed"),
                    ("pve-driver-match", "ok"), ("pve-driver-match", "failed"), ("pve-driver-match", "skipped")}


def _dump(data: dict[str, dict[str, Any]]) -> str:
    # one check a line, so that a change meant to alter a check shows as that line in the diff
    groups = []
    for group, cases in data.items():
        rows = []
        for case, value in cases.items():
            if isinstance(value, list):
                checks = ",\n".join(f"   {json.dumps(c, ensure_ascii=False)}" for c in value)
                rows.append(f"  {json.dumps(case)}: [\n{checks}\n  ]")
            else:
                rows.append(f"  {json.dumps(case)}: {json.dumps(value)}")
        groups.append(f" {json.dumps(group)}: {{\n" + ",\n".join(rows) + "\n }")
    return "{\n" + ",\n".join(groups) + "\n}\n"


if __name__ == "__main__":  # regenerate the expectation (see the module's docstring)
    EXPECTED.write_text(_dump({
        "host_checks": {case: host_result(case) for case in sorted(HOST_CASES)},
        "proxmox_checks": {case: pve_result(case) for case in sorted(PVE_CASES)},
        "container_driver": {case: driver_result(case) for case in sorted(DRIVER_CASES)},
    }), encoding="utf-8")
    sys.stdout.write(f"wrote {EXPECTED}\n")
