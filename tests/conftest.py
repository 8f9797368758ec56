from __future__ import annotations

from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
LOGS = ROOT / "bot" / "sim" / "logs"
FIXTURES = Path(__file__).resolve().parent / "fixtures"
SHARED = ROOT.parent / "shared" / "reference"


@pytest.fixture
def logs() -> Path:
    return LOGS


@pytest.fixture
def fixtures() -> Path:
    return FIXTURES
