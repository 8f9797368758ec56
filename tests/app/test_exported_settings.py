"""What the bot exports of each host's deployment on /metrics (bot.app.prometheus.exported, adapters.selfmetrics): the
profile, method and k Prometheus cannot know, and the acceptance floor the alert rules and the dashboard judge
with — the config's, the same number the watch and every diagnosis use."""

from __future__ import annotations

from pathlib import Path

from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.registry import Collector

from bot.adapters.selfmetrics import served_families
from bot.app.prometheus.exported import ServedSetting, served_settings
from bot.config import AlertRules, Config, HostConfig, Profile, WatchSettings
from bot.redact import Redactor
from bot.store.facade import Store


def _config() -> Config:
    profiles = {"mtp-k1": Profile(model="q", method="mtp", num_speculative_tokens=1),
                "dflash": Profile(model="q", method="dflash", drafter="d", num_speculative_tokens=15),
                "plain": Profile(model="q")}
    return Config(hosts={"a": HostConfig(address="127.0.0.1", user="u", workdir="/srv/w")}, profiles=profiles,
                  watch=WatchSettings(rules=AlertRules(first_position_floor={"dflash": 0.4})))


def test_each_serving_host_with_its_profile_method_k_and_floor(tmp_path: Path) -> None:
    store = Store(tmp_path / "state.db", Redactor())
    try:
        for host, profile in (("a", "mtp-k1"), ("b", "dflash"), ("c", "plain"), ("d", "gone-from-config")):
            store.deployments.update(store.deployments.record(host, profile, "fp", "running"), status="serving")
        store.deployments.update(store.deployments.record("e", "dflash", "fp", "running"), status="failed")
        assert served_settings(_config(), store.deployments) == [
            ServedSetting("a", "mtp-k1", "mtp", 1, 0.3), ServedSetting("b", "dflash", "dflash", 15, 0.4),
            ServedSetting("c", "plain", "none", None, None)]
    finally:
        store.close()


def test_the_exposition_is_what_the_alert_rules_join_on() -> None:
    served = [ServedSetting("a6000", "mtp-k1", "mtp", 1, 0.3), ServedSetting("c", "plain", "none", None, None)]

    class Served(Collector):
        def collect(self):  # type: ignore[no-untyped-def]
            return served_families(served)

    registry = CollectorRegistry()
    registry.register(Served())
    text = generate_latest(registry).decode()
    assert 'specops_deployment_info{k="1",method="mtp",profile="mtp-k1",specops_host="a6000"} 1.0' in text
    assert 'specops_deployment_info{k="",method="none",profile="plain",specops_host="c"} 1.0' in text
    assert 'specops_acceptance_floor{method="mtp",profile="mtp-k1",specops_host="a6000"} 0.3' in text
    assert 'specops_acceptance_floor{method="none"' not in text
