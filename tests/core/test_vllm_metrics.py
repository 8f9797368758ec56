"""The vLLM series specops reads, checked against what vLLM's releases declare (the atlas, built from
their sdists) and against what the core's snapshot keeps."""

from __future__ import annotations

import pytest

from bot.core import vllm_metrics as vm
from bot.core.atlas import load_atlas
from bot.core.prom_samples import snapshot
from tests.support.core_views import metric_names

GAUGES = (vm.REQUESTS_RUNNING, vm.REQUESTS_WAITING, vm.KV_CACHE_USAGE)
COUNTERS = (vm.GENERATION_TOKENS, vm.PROMPT_TOKENS, vm.PREEMPTIONS, vm.REQUESTS_FINISHED)
SPEC_DECODE = (vm.SPEC_DRAFTS, vm.SPEC_DRAFT_TOKENS, vm.SPEC_ACCEPTED_TOKENS, vm.SPEC_ACCEPTED_PER_POSITION)
ALL = (*GAUGES, *COUNTERS, *SPEC_DECODE)


def test_names_are_unique_and_spelled_as_a_scrape_spells_them() -> None:
    names = [n for m in ALL for n in m.names]
    assert len(names) == len(set(names))
    assert all(n.startswith("vllm:") for n in names)
    assert all(m.name.endswith("_total") for m in (*COUNTERS, *SPEC_DECODE))


def test_the_newer_name_wins_and_the_older_one_still_reads() -> None:
    both = {"vllm:kv_cache_usage_perc": 0.25, "vllm:gpu_cache_usage_perc": 0.5}
    assert vm.value_of(both, vm.KV_CACHE_USAGE) == 0.25
    assert vm.value_of({"vllm:gpu_cache_usage_perc": 0.5}, vm.KV_CACHE_USAGE) == 0.5
    assert vm.value_of({}, vm.KV_CACHE_USAGE) is None


@pytest.mark.parametrize(("ratio", "percent"), [(0.123, 12.3), (1.0, 100.0), (0.0, 0.0), (0.97549, 97.5), (None, None)])
def test_kv_usage_is_a_ratio_judged_as_the_engine_lines_percent(ratio: float | None, percent: float | None) -> None:
    assert vm.kv_percent(ratio) == percent


def test_counts_keep_their_unit() -> None:
    assert vm.in_core_unit(vm.REQUESTS_WAITING, 3.0) == 3.0 and vm.in_core_unit(vm.SPEC_DRAFTS, None) is None
    assert [m.name for m in ALL if m.unit == "ratio"] == [vm.KV_CACHE_USAGE.name]


def test_every_release_exports_each_gauge_under_one_of_its_names() -> None:
    atlas = load_atlas()
    releases = atlas.package_releases["vllm"]
    assert releases
    for release in releases:
        declared = metric_names(atlas, release)
        for metric in GAUGES:
            assert set(metric.names) & set(declared), (release, metric.name)


def test_every_release_declares_each_counter_with_or_without_the_suffix() -> None:
    """V0 declared `..._total` itself; V1 declares the bare name and prometheus_client appends it."""
    atlas = load_atlas()
    from packaging.version import Version

    # the counters came with vLLM's Prometheus metrics of 0.4-0.6; the atlas reads back to 0.2.7 for the code's history
    for release in [r for r in atlas.package_releases["vllm"] if Version(r) >= Version("0.6.6")]:
        declared = metric_names(atlas, release)
        for metric in COUNTERS:
            assert {metric.name, metric.name.removesuffix("_total")} & set(declared), (release, metric.name)
    newest = metric_names(atlas)
    assert "vllm:gpu_cache_usage_perc" not in newest  # the older KV name is gone: only old servers send it
    assert newest[vm.SPEC_ACCEPTED_PER_POSITION.name.removesuffix("_total")][-1] == "position"


def test_the_snapshot_keeps_every_series_named_here() -> None:
    samples = [(name, {"position": "0"}, 1.0) for m in ALL for name in m.names]
    snap = snapshot(samples)
    kept = {*snap.gauges, *snap.counters}
    for metric in (*GAUGES, *COUNTERS):
        assert set(metric.names) <= kept, metric.name
    assert (snap.num_drafts, snap.num_draft_tokens, snap.num_accepted_tokens, snap.accepted_per_pos) == (
        1.0, 1.0, 1.0, {0: 1.0})
