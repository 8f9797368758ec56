"""The store's schema migrations (Alembic, bot/migrations): a state file written by the previous release opens
and keeps its rows; a revision that fails is rolled back whole, the old schema stays and the store does not
open, with the reason — on SQLite and on PostgreSQL."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import tarfile
from io import BytesIO
from pathlib import Path

import pytest
import sqlalchemy as sa
import yaml

from bot.errors import MigrationFailed
from bot.redact import Redactor
from bot.store.facade import Store
from bot.store.schema import MIGRATIONS
from tests.support.store_engines import ENGINES, state_on

ROOT = Path(__file__).resolve().parents[1]
PREVIOUS = "0ae96b7"  # the release before migrations: CREATE TABLE IF NOT EXISTS and ALTER TABLE at open

# what the previous release's Store writes: one row of every kind
WRITE_OLD = """
import sys
from bot.redact import Redactor
from bot.store import Store

s = Store(sys.argv[1], Redactor())
s.acquire("a6000", "U1", "deploy mtp")
dep = s.record_deployment("a6000", "mtp", "fp1", "running", pid=4242, detail={"message": "starting"})
s.update_deployment(dep, status="serving")
s.add_sample("a6000", True, {"p99": 1.25}, at=1000.0)
inc, _ = s.open_incident("down:a6000", "a6000", "a6000 is down", {"kind": "opened"})
s.update_incident(inc.id, channel="C1", ts="1.5", active={"fp": {"source": "watch"}})
s.set_cursor("a6000", "/var/log/vllm.log", "head", 77)
s.claim_report("report:a6000", "2026-12-01 08:00")
s.mark_report_posted("report:a6000", "2026-12-01 08:00")
s.claim_report("report:a6000", "2026-12-02 08:00")
s.audit_queue(source="slack", text="deploy mtp", user="U1", result="ok", closed=True).committed()
s.close()
print("written")
"""


@pytest.fixture(scope="module")
def previous_release(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The previous release's `bot` package, from git (its Store is what wrote the state files users have)."""
    out = tmp_path_factory.mktemp("previous")
    archive = subprocess.run(["git", "archive", "--format=tar", PREVIOUS, "bot"], cwd=ROOT, capture_output=True,
                             check=True).stdout
    with tarfile.open(fileobj=BytesIO(archive)) as tar:
        tar.extractall(out, filter="data")
    assert not (out / "bot" / "migrations").exists()
    return out


def write_with_previous_release(release: Path, state: Path) -> None:
    done = subprocess.run([sys.executable, "-c", WRITE_OLD, str(state)], cwd=release, capture_output=True,
                          text=True, timeout=120, env={"PATH": "/usr/bin:/bin", "PYTHONPATH": str(release),
                                                        "HOME": str(release)})
    assert done.returncode == 0 and done.stdout.strip() == "written", done.stderr


def specops(config: Path, *args: str, prelude: str = "pass") -> subprocess.CompletedProcess[str]:
    """The CLI as a user runs it (`prelude`: Python run first in the same process, e.g. a test's script dir)."""
    code = f"import sys; {prelude}; from bot.adapters.cli.main import main; sys.argv[0] = 'specops'; main()"
    return subprocess.run([sys.executable, "-c", code, "--config", str(config), *args], capture_output=True,
                          text=True, timeout=120, cwd=ROOT, env={"PATH": "/usr/bin:/bin", "PYTHONPATH": str(ROOT),
                                                                   "HOME": str(config.parent)})


def settings_config(tmp: Path, state: str | Path, **more: str) -> Path:
    path = tmp / "specops.yaml"
    path.write_text(yaml.safe_dump({"settings": {"state": str(state), **more}}))
    return path


def columns(state: str | Path) -> dict[str, list[str]]:
    engine = sa.create_engine(state if isinstance(state, str) else f"sqlite:///{state}", poolclass=sa.pool.NullPool)
    try:
        with engine.connect() as db:
            inspector = sa.inspect(db)
            return {t: sorted(c["name"] for c in inspector.get_columns(t)) for t in sorted(inspector.get_table_names())}
    finally:
        engine.dispose()


def version(state: str | Path) -> list[str]:
    engine = sa.create_engine(state if isinstance(state, str) else f"sqlite:///{state}", poolclass=sa.pool.NullPool)
    try:
        with engine.connect() as db:
            return [r[0] for r in db.execute(sa.text("SELECT version_num FROM alembic_version"))]
    finally:
        engine.dispose()


def test_a_state_file_of_the_previous_release_opens_and_keeps_its_rows(previous_release: Path, tmp_path: Path) -> None:
    old = tmp_path / "old.db"
    write_with_previous_release(previous_release, old)
    before = columns(old)
    assert "alembic_version" not in before and "startup_runs" not in before  # what the new release must add
    cfg = settings_config(tmp_path, old)

    audit = specops(cfg, "audit", "--format", "json")
    assert audit.returncode == 0, audit.stderr
    assert [(r["source"], r["text"], r["result"]) for r in json.loads(audit.stdout)] == [("slack", "deploy mtp", "ok")]
    incidents = specops(cfg, "incidents", "--format", "json")
    assert incidents.returncode == 0, incidents.stderr
    assert [(i["key"], i["state"]) for i in json.loads(incidents.stdout)] == [("down:a6000", "open")]

    assert version(old) == ["rollouts"]  # brought to the baseline, stamped, then forward
    fresh = tmp_path / "fresh.db"
    Store(fresh, Redactor()).close()
    assert columns(old) == columns(fresh)  # the same schema as a new file's
    store = Store(old, Redactor())
    try:
        lock = store.locks.holder("a6000")
        assert lock is not None and lock[:2] == ("U1", "deploy mtp")
        dep = store.deployments.latest("a6000")
        assert dep is not None and (dep.status, dep.pid, dep.detail["message"]) == ("serving", 4242, "starting")
        assert store.samples.for_host("a6000") == [(1000.0, True, {"p99": 1.25})]
        inc = store.incidents.unresolved("a6000")[0]
        assert (inc.ts, inc.active) == ("1.5", {"fp": {"source": "watch"}})
        assert store.cursors.get("a6000") == ("/var/log/vllm.log", "head", 77)
        assert store.reports.posted("report:a6000", "2026-12-01 08:00")
        assert store.reports.unposted() == [("report:a6000", "2026-12-02 08:00")]
        assert store.startups.history("a6000", "mtp").runs == ()  # the table it lacked is there now
    finally:
        store.close()


def test_an_older_file_without_the_altered_columns_is_brought_forward(tmp_path: Path) -> None:
    """A file from before the ALTER TABLEs (report_runs without posted_at, locks without their holder): what
    was claimed then was posted then, and the columns are there now."""
    import re
    import sqlite3

    from bot.store.schema import SCHEMA

    path = tmp_path / "ancient.db"
    db = sqlite3.connect(path)
    db.executescript(re.sub(r"CREATE TABLE IF NOT EXISTS startup_runs \(.*?\);\nCREATE INDEX[^;]*;\n", "", SCHEMA,
                            flags=re.S))
    db.execute("INSERT INTO report_runs(report, period, at) VALUES ('report:h1', 'p1', 5.0)")
    db.commit()
    db.close()
    with_columns = columns(path)
    assert "posted_at" not in with_columns["report_runs"] and "pid" not in with_columns["locks"]
    store = Store(path, Redactor())
    try:
        assert store.reports.posted("report:h1", "p1") and store.reports.unposted() == []
        store.locks.acquire("h1", "U1", "deploy")
    finally:
        store.close()


BROKEN = '''"""broken: a revision that fails half-way (a test's)"""
import sqlalchemy as sa
from alembic import op

revision = "broken"
down_revision = "rollouts"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.add_column("locks", sa.Column("lease_until", sa.Float))
    op.create_table("leases", sa.Column("id", sa.Integer, primary_key=True))
    with op.batch_alter_table("deployments") as batch:  # SQLite: a copy of the table, in the transaction
        batch.drop_column("holder_boot")
    op.execute("UPDATE no_such_table SET x = 1")


def downgrade() -> None:
    raise NotImplementedError
'''


@pytest.fixture
def broken_scripts(tmp_path: Path) -> Path:
    """The shipped migrations plus one failing revision after them (a script dir of the test's own)."""
    scripts = tmp_path / "migrations"
    shutil.copytree(MIGRATIONS, scripts, ignore=shutil.ignore_patterns("__pycache__"))
    (scripts / "versions" / "broken.py").write_text(BROKEN)
    return scripts


@pytest.fixture(params=ENGINES)
def state(request: pytest.FixtureRequest, tmp_path: Path) -> str | Path:
    return state_on(request.param, tmp_path, request)


def test_a_failing_migration_leaves_the_old_schema_and_says_why(state: str | Path, broken_scripts: Path) -> None:
    store = Store(state, Redactor())
    store.locks.acquire("h1", "U1", "deploy")
    store.deployments.record("h1", "mtp", "fp", "serving")
    store.close()
    before = columns(state)

    with pytest.raises(MigrationFailed) as failed:
        Store(state, Redactor(), migrations=broken_scripts)
    said = str(failed.value)
    assert "rolled back" in said and "no_such_table" in said, said
    assert "Traceback" not in said and "\n" not in said

    assert columns(state) == before  # no lease_until, no leases, holder_boot still there
    assert version(state) == ["rollouts"]
    with _open(state) as again:  # the release's own revisions: it opens, rows kept
        assert again.locks.holder("h1") is not None and again.deployments.latest("h1") is not None


class _open:
    def __init__(self, state: str | Path) -> None:
        self.store = Store(state, Redactor())

    def __enter__(self) -> Store:
        return self.store

    def __exit__(self, *exc: object) -> None:
        self.store.close()


def test_the_cli_exits_with_the_migrations_reason(tmp_path: Path, broken_scripts: Path) -> None:
    path = tmp_path / "s.db"
    Store(path, Redactor()).close()
    cfg = settings_config(tmp_path, path)
    # bot.store.database.MIGRATIONS: the name the open reads its script directory from
    prelude = (f"import bot.store.database, pathlib; "
               f"bot.store.database.MIGRATIONS = pathlib.Path({str(broken_scripts)!r})")
    done = specops(cfg, "incidents", "show", "1", prelude=prelude)
    assert done.returncode != 0
    assert "Traceback" not in done.stderr and "internal error" not in done.stderr, done.stderr
    assert "schema migration failed and was rolled back" in done.stderr and "no_such_table" in done.stderr
    assert version(path) == ["rollouts"]


def test_a_store_a_newer_specops_migrated_is_refused_in_words_and_left_alone(tmp_path: Path) -> None:
    """Going back a release (a rollback of the bot) meets a schema it does not know: it says so, changes
    nothing, and the command line exits without a traceback."""
    path = tmp_path / "specops.db"
    Store(path, Redactor()).close()
    engine = sa.create_engine(f"sqlite:///{path}")
    with engine.begin() as db:
        db.execute(sa.text("UPDATE alembic_version SET version_num = 'from_a_newer_release'"))
    engine.dispose()
    with pytest.raises(MigrationFailed, match="written by a newer specops") as raised:
        Store(path, Redactor())
    assert "from_a_newer_release" in str(raised.value) and "nothing was changed" in str(raised.value)
    assert version(path) == ["from_a_newer_release"]
    cfg = tmp_path / "specops.yaml"
    cfg.write_text(yaml.safe_dump({"hosts": {}, "profiles": {}, "settings": {"state": str(path)}}))
    cli = subprocess.run([sys.executable, "-m", "bot", "--config", str(cfg), "audit"],
                         capture_output=True, text=True, timeout=60, cwd=Path(__file__).resolve().parents[1])
    assert cli.returncode != 0 and "written by a newer specops" in cli.stderr and "Traceback" not in cli.stderr, \
        cli.stderr


def test_an_open_waits_for_another_process_opening_the_same_file(tmp_path: Path) -> None:
    """Two processes opening one new SQLite file: the second waits for the first's migration on a file lock, not
    in SQLite's busy timeout (which a long migration on a loaded machine outlasted: "database is locked")."""
    import fcntl
    import threading
    import time

    from bot.errors import StoreUnavailable
    from bot.store.schema import one_migrator

    state = tmp_path / "specops.db"
    holder = open(tmp_path / "specops.db.lock", "a")  # noqa: SIM115 - what the first process holds while it migrates
    fcntl.flock(holder, fcntl.LOCK_EX)
    opened: list[object] = []
    opener = threading.Thread(target=lambda: opened.append(Store(state, Redactor())))
    opener.start()
    time.sleep(0.5)
    assert not opened  # waiting, not failed
    fcntl.flock(holder, fcntl.LOCK_UN)
    opener.join(60)
    assert len(opened) == 1 and isinstance(opened[0], Store), opened
    opened[0].close()  # type: ignore[attr-defined]

    fcntl.flock(holder, fcntl.LOCK_EX)
    try:
        with pytest.raises(StoreUnavailable, match="another process has been opening it for 0 s"), \
                one_migrator(state, wait=0.2):
            pass
    finally:
        holder.close()
