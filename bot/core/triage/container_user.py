"""`KeyError: 'getpwuid(): uid not found: 1000'`: the process runs as a user id the image's `/etc/passwd` does not
list (a Kubernetes `runAsUser`, OpenShift's arbitrary user ids, `docker run --user`), and code asked for the user's
name. Python's `getpass.getuser()` reads LOGNAME, USER, LNAME and USERNAME first and asks the password database only
when none is set; the database raises KeyError for a user id it does not hold. Libraries ask for the name to build
their cache directories (torch's compile caches, Triton's), so the crash comes from wherever that happens first."""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

from bot.core.triage.evidence import position
from bot.core.triage.findings import Finding

if TYPE_CHECKING:
    from bot.core.parsed_log import ProblemLine

_UID = re.compile(r"getpwuid\(\): uid not found:? ?(?P<uid>\d{1,10})")
GETUSER_DOC = "https://docs.python.org/3/library/getpass.html#getpass.getuser"
PWD_DOC = "https://docs.python.org/3/library/pwd.html"


def unknown_user(p: ProblemLine) -> Finding | None:
    text = p.origin.text or p.message
    m = _UID.search(text[:4000])
    if m is None:
        return None
    uid = m["uid"]
    return Finding(
        id="below:unknown-uid", title=f"The process runs as user id {uid}, which the image's /etc/passwd does not list",
        severity="critical", confidence="medium",
        summary=(f"Something asked for the name of the user the process runs as, and the password database has no "
                 f"entry for uid {uid}: the container runs as a user id the image was not built with, and neither "
                 f"`USER` nor `LOGNAME` is set (Python asks the database only then)."),
        evidence=[f"{p.origin.where()}: {text[:300]}"],
        remediation=[f"Set `USER` (and `HOME`, to a directory that user can write) in the container's environment: "
                     f"`getpass.getuser()` reads them before it asks the password database, so nothing looks up uid "
                     f"{uid}.",
                     f"Or run as a user the image has (the pod's `securityContext.runAsUser`, `docker run --user`), or "
                     f"add uid {uid} to the image's /etc/passwd."],
        sources=[GETUSER_DOC, PWD_DOC], priority=32, part="platform", inputs=["USER"], knobs=["USER", "HOME"],
        at=position(p.origin), level=p.origin.level or "EXCEPTION")
