"""`KeyError: 'getpwuid(): uid not found: 1000'`: the process runs as a user id the image's `/etc/passwd` does not
list (a Kubernetes `runAsUser`, OpenShift's arbitrary user ids, `docker run --user`), and code asked the password
database for the user's name, which raises KeyError for a user id it does not hold. `getpass.getuser()` asks it only
when none of LOGNAME, USER, LNAME and USERNAME is set; libraries ask it to name their cache directories (torch's
inductor cache is named for the user), so the crash comes from wherever that happens first."""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

from bot.core.triage.evidence import position
from bot.core.triage.findings import Finding

if TYPE_CHECKING:
    from bot.core.parsed_log import ProblemLine

_UID = re.compile(r"getpwuid\(\): uid not found:? ?(?P<uid>\d{1,10})\b")
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
        summary=(f"Something asked the password database for the name of the user the process runs as, and it has "
                 f"no entry for uid {uid}: the container runs as a user id the image was not built with, and no "
                 f"variable that names the user (`USER`, `LOGNAME`) is set."),
        evidence=[f"{p.origin.where()}: {text[:300]}"],
        remediation=[f"Set `USER` in the container's environment: `getpass.getuser()` reads LOGNAME, USER, LNAME and "
                     f"USERNAME before it asks the database, so `getuser()` does not look up uid {uid}. Set `HOME` "
                     f"too, to a directory that user can write (without it, caches land under a literal `~`).",
                     f"Or run as a user the image has (the pod's `securityContext.runAsUser`, `docker run --user`), or "
                     f"add uid {uid} to the image's /etc/passwd."],
        sources=[GETUSER_DOC, PWD_DOC], priority=32, part="platform", inputs=["USER"], knobs=["USER", "HOME"],
        at=position(p.origin), level=p.origin.level or "EXCEPTION")
