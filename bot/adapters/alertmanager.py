"""Prometheus Alertmanager webhook receiver: alerts open and resolve specops incidents.

POST /alertmanager with `Authorization: Bearer <token>` (the token from the environment). A bad
token gets 401, a malformed payload 400, and neither changes anything.
"""

from __future__ import annotations

import hashlib
import hmac
import json
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from bot.app.watching.incidents import IncidentManager
from bot.config import Config
from bot.core.alerts import Alert

MAX_ALERTS = 500


class AMAlert(BaseModel):
    model_config = ConfigDict(extra="allow")
    status: Literal["firing", "resolved"]
    labels: dict[str, str]
    annotations: dict[str, str] = Field(default_factory=dict)
    fingerprint: str | None = None


class AMPayload(BaseModel):
    model_config = ConfigDict(extra="allow")
    status: Literal["firing", "resolved"]
    alerts: list[AMAlert] = Field(min_length=1, max_length=MAX_ALERTS)
    groupKey: str | None = None  # Alertmanager's own field name
    version: str | None = None


Response = tuple[int, dict[str, str], bytes]


def _json(status: int, data: dict[str, Any]) -> Response:
    return status, {"Content-Type": "application/json"}, (json.dumps(data) + "\n").encode()


def key_for(alert: AMAlert, config: Config) -> tuple[str, str]:
    """(incident key, host): alerts about a host share its incident with specops' own watch."""
    labels = alert.labels
    host = labels.get("specops_host") or labels.get("host") or labels.get("instance", "").split(":")[0]
    if host in config.hosts:
        return host, host
    return f"alertmanager:{labels.get('alertname', 'alert')}:{host or '-'}", host or "-"


def receive(config: Config, manager: IncidentManager, token: str | None, headers: dict[str, str],
            body: bytes) -> Response:
    if not token:
        return _json(503, {"ok": False, "error": "the Alertmanager receiver has no token configured"})
    given = headers.get("authorization", "")
    if not (given.startswith("Bearer ") and hmac.compare_digest(given[7:].encode(), token.encode())):
        return _json(401, {"ok": False, "error": "bad or missing bearer token"})
    try:
        payload = AMPayload.model_validate_json(body)
    except ValidationError as exc:
        problems = [f"{'.'.join(str(x) for x in e['loc']) or 'body'}: {e['msg']}" for e in exc.errors()[:10]]
        return _json(400, {"ok": False, "error": "malformed Alertmanager payload", "problems": problems})
    opened: list[int] = []
    resolved: list[int] = []
    firing: dict[str, list[tuple[str, Alert, str]]] = {}
    done: dict[str, list[str]] = {}
    for a in payload.alerts:
        key, host = key_for(a, config)
        name = a.labels.get("alertname", "alert")
        fp = f"alertmanager:{fingerprint(a)}"
        if a.status == "firing":
            title = a.annotations.get("summary") or f"{name} on {host}"
            detail = a.annotations.get("description") or ", ".join(f"{k}={v}" for k, v in sorted(a.labels.items()))
            firing.setdefault(key, []).append((host, Alert(f"prometheus:{name}", title, detail[:1000]), fp))
        else:
            done.setdefault(key, []).append(fp)
    # resolutions first: one payload may resolve one alert of a host and fire another
    for key, prints in done.items():
        closed = manager.on_resolved(key, prints, "alertmanager")
        if closed is not None:
            resolved.append(closed.id)
    for key, items in firing.items():
        inc = manager.on_alerts(key, items[0][0], [alert for _, alert, _ in items], source="alertmanager",
                                fingerprints=[fp for _, _, fp in items])
        opened.append(inc.id)
    return _json(200, {"ok": True, "incidents": sorted(set(opened)), "resolved": resolved})


def fingerprint(alert: AMAlert) -> str:
    """Alertmanager's own fingerprint, or one of the labels (as Alertmanager computes it: the label set)."""
    if alert.fingerprint:
        return alert.fingerprint
    labels = json.dumps(sorted(alert.labels.items()), separators=(",", ":"))
    return hashlib.sha256(labels.encode()).hexdigest()[:16]
