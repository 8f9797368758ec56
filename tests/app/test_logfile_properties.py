"""Hypothesis: reading a log file never raises, whatever the file holds (moved from tests/core: reading is app)."""

from __future__ import annotations

from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from bot.app.diagnosis.logfile import read_log


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.binary(max_size=4000))
def test_read_log_never_raises_on_a_file(tmp_path: Path, data: bytes) -> None:
    path = tmp_path / "any.log"
    path.write_bytes(data)
    read_log(path)
    read_log(path, full=True)
