"""The code's history: written by tools/atlas/build.py from each release's functions, read by bot/core/history.py."""

from __future__ import annotations

import ast
import sys
from array import array
from pathlib import Path

from bot.core.history import History, load_history

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tools" / "atlas"))

from build import history  # noqa: E402
from extract import Release  # noqa: E402
from history import functions, line_hash  # noqa: E402

V1 = '''
def load_weights(self, weights):
    for name, w in weights:
        param = params_dict[name]
        param.copy_(w)
'''
V2 = '''
def load_weights(self, weights):
    for name, w in weights:
        if name not in params_dict:
            continue
        param = params_dict[name]
        param.copy_(w)
'''
V3 = '''
def load_weights(self, weights):
    for name, w in weights:
        param = params_dict.get(name)
        param.copy_(w)
'''


def _release(version: str, source: str) -> Release:
    rec = Release("vllm", version)
    for qual, (_start, hashes) in functions(ast.parse(source), source).items():
        rec.funcs[("vllm/model_executor/models/x.py", qual)] = array("H", hashes).tobytes()
    return rec


def _history() -> History:
    return History(history([_release("0.1.0", V1), _release("0.2.0", V2), _release("0.3.0", V3)]))


def test_a_line_changed_in_a_later_release_says_where() -> None:
    h = _history().line("vllm/model_executor/models/x.py", "load_weights", "param = params_dict[name]", "0.1.0")
    assert h is not None and h.has_line and h.changed_in == "0.3.0" and h.function_changed_in == "0.2.0"
    assert h.compare_url("0.3.0").endswith("/compare/v0.1.0...v0.3.0")


def test_a_line_new_in_the_users_release_is_a_regression_candidate() -> None:
    h = _history().line("vllm/model_executor/models/x.py", "load_weights", "param = params_dict.get(name)", "0.3.0")
    assert h is not None and h.introduced_in == "0.3.0" and h.previous == "0.2.0"


def test_a_line_no_release_has_is_none_and_the_function_is_still_known() -> None:
    hist = _history()
    assert hist.line("vllm/model_executor/models/x.py", "load_weights", "raise KeyError(name)", "0.1.0") is None
    assert hist.function_releases("vllm/model_executor/models/x.py", "load_weights") == ["0.1.0", "0.2.0", "0.3.0"]


def test_a_traceback_line_is_keyed_as_the_traceback_prints_it() -> None:
    assert line_hash("    param = params_dict[name]  ") == line_hash("param = params_dict[name]")


def test_the_shipped_history_covers_the_atlas_releases() -> None:
    hist = load_history()
    assert hist is not None and hist.releases[0] == "0.2.7" and len(hist.releases) >= 40
    assert hist.module_releases("vllm/envs.py")
