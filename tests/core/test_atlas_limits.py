"""The atlas reads where a compared limit comes from, one hop into its class (tools/atlas/extract.py): a local set
from a method of the class is read through what that method returns, an attribute through what `__init__` set it
to — so a refusal that names a limit (`exceeds limit of 2560`, `At most 1 image(s)`) reaches the setting's flag.
The sources below are written for this test in the shape vLLM's scheduler and chat helpers had."""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tools" / "atlas"))

from extract import Release, read_file  # noqa: E402

SCHEDULER = '''
import logging
logger = logging.getLogger(__name__)


class Scheduler:
    def _get_prompt_limit(self, seq_group):
        if self.scheduler_config.chunked_prefill_enabled:
            prompt_limit = self.scheduler_config.max_model_len
        else:
            prompt_limit = min(self.scheduler_config.max_model_len, self.scheduler_config.max_num_batched_tokens)
        if seq_group.lora_request:
            return seq_group.lora_request.long_lora_max_len
        return prompt_limit

    def _schedule_prefills(self, seq_group):
        num_new_tokens = self._get_num_new_tokens(seq_group)
        prompt_limit = self._get_prompt_limit(seq_group)
        if num_new_tokens > prompt_limit:
            logger.warning("Input prompt (%d tokens) is too long and exceeds limit of %d", num_new_tokens,
                           prompt_limit)
'''

TRACKER = '''
class ItemTracker:
    def __init__(self, model_config):
        self._allowed_items = model_config.multimodal_config.limit_per_prompt
        self._items = {}

    def add(self, modality):
        allowed_count = self._allowed_items.get(modality, 1)
        if len(self._items) + 1 > allowed_count:
            raise ValueError(f"At most {allowed_count} {modality}(s) may be provided in one request.")
'''


def _conditions(source: str, path: str) -> dict[str, str | None]:
    rec = Release("vllm", "0.5.5")
    read_file(path, source, path, True, rec)
    return {s.function: s.condition for s in rec.sites}


def test_a_local_set_by_a_method_of_the_class_is_read_through_what_it_returns() -> None:
    cond = _conditions(SCHEDULER, "vllm/core/scheduler.py")["Scheduler._schedule_prefills"]
    assert cond is not None and cond.startswith("num_new_tokens > prompt_limit (where ")
    assert "prompt_limit = self._get_prompt_limit(seq_group)" in cond
    assert "_get_prompt_limit() returns " in cond and "self.scheduler_config.max_num_batched_tokens" in cond


def test_an_attribute_is_read_through_what_init_set_it_to() -> None:
    cond = _conditions(TRACKER, "vllm/entrypoints/chat_utils.py")["ItemTracker.add"]
    assert cond is not None and "self._allowed_items = model_config.multimodal_config.limit_per_prompt" in cond


def test_a_local_whose_name_is_inside_another_word_of_its_source_is_still_shown() -> None:
    # `prompt_limit = self._get_prompt_limit(...)` holds its own name inside a longer one: not `x = x + 1`
    cond = _conditions(SCHEDULER, "vllm/core/scheduler.py")["Scheduler._schedule_prefills"]
    assert cond is not None and "prompt_limit = self._get_prompt_limit" in cond
