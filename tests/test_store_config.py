"""`settings.state` as a path or a SQLAlchemy URL, through the CLI: a URL stays a URL (never a file name), one
whose backend or driver is missing is a config error `specops config check` names, and the password — from the
URL or from the variable `settings.state_password_env` names — is said nowhere, not even when it is refused."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa
import yaml

from bot.config import Settings, StateURL
from tests.support.postgres import Postgres

ROOT = Path(__file__).resolve().parents[1]
WRONG = "not-the-Passw0rd-at-all"


def specops(tmp: Path, data: dict[str, Any], *args: str, env: dict[str, str] | None = None
            ) -> subprocess.CompletedProcess[str]:
    path = tmp / "specops.yaml"
    path.write_text(yaml.safe_dump(data))
    return subprocess.run([sys.executable, "-m", "bot", "--config", str(path), *args], capture_output=True,
                          text=True, timeout=120, cwd=ROOT,
                          env={"PATH": "/usr/bin:/bin", "HOME": str(tmp), "PYTHONPATH": str(ROOT), **(env or {})})


def inventory(state: str) -> dict[str, Any]:
    return {"settings": {"state": state},
            "hosts": {"a6000": {"address": "127.0.0.1", "user": "vllm"}},
            "profiles": {"mtp": {"model": "/models/Qwen3.6-27B", "method": "mtp", "num_speculative_tokens": 3,
                                 "vllm": {"bin": "/opt/vllm/bin/vllm", "version": "0.20.1"}}}}


def test_a_url_stays_a_url_and_a_path_a_path() -> None:
    url = "postgresql+psycopg://specops:s3cret@db.example:5432/specops"
    state = Settings(state=url).state
    assert isinstance(state, StateURL) and state == url  # not Path's 'postgresql+psycopg:/specops:…'
    assert Settings(state="~/x/specops.db").state == Path("~/x/specops.db")


@pytest.mark.parametrize(("url", "said"), [
    ("mysql://specops:s3cret-pw@db/specops", "settings.state: mysql://specops:***@db/specops: the store runs on "
                                             "SQLite (a path) or PostgreSQL"),
    ("postgresql+nodriver://specops:s3cret-pw@db/specops", "SQLAlchemy knows no driver 'postgresql+nodriver'"),
    ("postgresql+pg8000://specops:s3cret-pw@db/specops", "the driver of 'postgresql+pg8000' is not installed"),
])
def test_config_check_names_a_url_the_store_cannot_use(tmp_path: Path, url: str, said: str) -> None:
    done = specops(tmp_path, inventory(url), "config", "check")
    out = done.stdout + done.stderr
    assert done.returncode != 0 and said in out, out
    assert "s3cret-pw" not in out and "Traceback" not in out
    assert not any(p.name.startswith(("mysql", "postgresql")) for p in tmp_path.rglob("*"))  # no file of that name


def test_the_password_comes_from_the_variable_the_config_names(tmp_path: Path, postgres_server: Postgres) -> None:
    full = sa.make_url(postgres_server.create_database("config_env"))
    state = f"postgresql+psycopg://{full.username}@{full.host}:{full.port}/{full.database}"  # no password here
    data = {"settings": {"state": state, "state_password_env": "SPECOPS_STATE_PASSWORD"}}
    done = specops(tmp_path, data, "audit", "--format", "json",
                   env={"SPECOPS_STATE_PASSWORD": postgres_server.password})
    assert done.returncode == 0 and done.stdout.strip() == "[]", done.stderr
    with sa.create_engine(full, poolclass=sa.pool.NullPool).connect() as db:
        assert db.execute(sa.text("SELECT version_num FROM alembic_version")).scalar_one() == "rollouts"

    missing = specops(tmp_path, data, "incidents", "show", "1")
    assert missing.returncode == 1 and "settings.state_password_env names SPECOPS_STATE_PASSWORD, which is not set" \
        in missing.stderr, missing.stderr


def test_a_refused_password_is_one_line_and_redacted(tmp_path: Path, postgres_server: Postgres) -> None:
    wrong = postgres_server.url_for("specops", password=WRONG)
    done = specops(tmp_path, {"settings": {"state": wrong}}, "incidents", "show", "1")
    assert done.returncode == 1, done.stderr
    assert "password authentication failed" in done.stderr and "cannot open the state store" in done.stderr
    assert WRONG not in done.stderr + done.stdout and "Traceback" not in done.stderr
    assert len(done.stderr.strip().splitlines()) == 1, done.stderr

    by_env = {"settings": {"state": wrong.replace(f":{WRONG}@", "@"), "state_password_env": "PW"}}
    done = specops(tmp_path, by_env, "incidents", "show", "1", env={"PW": WRONG})
    assert done.returncode == 1 and "password authentication failed" in done.stderr, done.stderr
    assert WRONG not in done.stderr + done.stdout
