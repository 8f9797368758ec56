"""What a starting server is doing, from the end of its log (shown beside the /health wait)."""

from __future__ import annotations

from bot.core.startup import last_activity


def test_the_last_logged_message_without_its_prefix() -> None:
    log = ("(APIServer pid=11) INFO 05-12 10:00:00 [api_server.py:1] vLLM API server version 0.20.1\n"
           "(EngineCore_DP0 pid=12) INFO 05-12 10:00:05 [default_loader.py:262] Loading weights took 12.31 seconds\n"
           "Traceback (most recent call last):\n\n")
    assert last_activity(log) == "Loading weights took 12.31 seconds"


def test_a_progress_bar_counts_and_debug_does_not() -> None:
    bar = "Loading safetensors checkpoint shards:  50% Completed | 3/6 [00:10<00:10,  3.3s/it]"
    log = f"INFO 05-12 10:00:00 [x.py:1] start\n{bar}\rDEBUG 05-12 10:00:01 [y.py:2] detail\n"
    assert last_activity(log) == bar


def test_nothing_to_show_and_long_lines_are_shortened() -> None:
    assert last_activity("") is None
    assert last_activity("plain text, no prefix\n") is None
    long = "INFO 05-12 10:00:00 [x.py:1] " + "k" * 500
    shown = last_activity(long)
    assert shown is not None and len(shown) <= 110 and shown.endswith("…")
