"""The Containerfile's HEALTHCHECK, run as the container runtime runs it, against a real `specops serve` in
Socket Mode (the image's default command): healthy while Slack's socket is up, unhealthy once it is lost,
and never a traceback in the health log (issue 22, item 8)."""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path

from bot.sim.host import SimHost
from tests.support.served import ROOT, Served, bot_config, wait_for
from tests.support.slack_emulator import SlackEmulator, WebSocketServer
from tests.support.sshd import free_port


def _healthcheck_argv() -> list[str]:
    text = (ROOT / "deploy" / "Containerfile").read_text(encoding="utf-8")
    joined = re.sub(r"\\\n\s*", " ", "\n".join(line for line in text.splitlines() if not line.lstrip().startswith("#")))
    m = re.search(r"^HEALTHCHECK\b.*?\bCMD\s+(\[.*\])\s*$", joined, re.M)
    assert m, "the Containerfile has no HEALTHCHECK … CMD [exec form]"
    argv = json.loads(m.group(1))
    assert isinstance(argv, list) and argv[0] == "python", argv  # python:3.11-slim has no curl or wget
    return [str(a) for a in argv]


def _run(argv: list[str], port: int) -> subprocess.CompletedProcess[str]:
    # the image's bot listens on 127.0.0.1:3000; this test's bot on a free port
    swapped = [a.replace("127.0.0.1:3000", f"127.0.0.1:{port}") for a in argv]
    assert swapped != argv, "the HEALTHCHECK does not ask 127.0.0.1:3000 (serve's default --port)"
    return subprocess.run(["python3" if swapped[0] == "python" else swapped[0], *swapped[1:]], capture_output=True,
                          text=True, timeout=30)


def test_the_healthcheck_follows_the_bots_healthz(sim: SimHost, tmp_path: Path) -> None:
    argv = _healthcheck_argv()
    emu = SlackEmulator().start()
    ws = WebSocketServer().start()
    emu.wss_url = ws.url
    path = tmp_path / "specops.json"
    path.write_text(bot_config(sim.config(port=free_port())).model_dump_json())
    bot = Served(tmp_path, path, emu, socket_mode=True)
    try:
        ws.wait_connected(timeout=10)
        healthy = _run(argv, bot.port)
        assert healthy.returncode == 0, healthy.stdout + healthy.stderr
        ws.stop()  # Slack's socket is gone: /healthz answers 503
        unhealthy = wait_for("the healthcheck to fail", lambda: r if (r := _run(argv, bot.port)).returncode else None)
        assert unhealthy.returncode == 1 and "Traceback" not in unhealthy.stdout + unhealthy.stderr, unhealthy
    finally:
        bot.kill(15)
        ws.stop()
        emu.stop()
    gone = _run(argv, bot.port)  # nothing listens any more
    assert gone.returncode == 1 and "Traceback" not in gone.stdout + gone.stderr, gone
