"""`KeyError: 'getpwuid(): uid not found: 1000'`: the process runs as a user id the image's `/etc/passwd` does not
list (a Kubernetes `runAsUser`, OpenShift's arbitrary user ids, `docker run --user`), and code asked the password
database about it, which raises KeyError for a user id it does not hold. Python asks it for the user's name only when
none of LOGNAME, USER, LNAME and USERNAME is set (`getpass.getuser()`), and for the home directory only when HOME is
unset (`os.path.expanduser('~')`). Libraries ask both to place their caches (torch's compile caches, Triton's), so the
crash comes from wherever that happens first."""

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
EXPANDUSER_DOC = "https://docs.python.org/3/library/os.path.html#os.path.expanduser"


def unknown_user(p: ProblemLine) -> Finding | None:
    text = p.origin.text or p.message
    m = _UID.search(text[:4000])
    if m is None:
        return None
    uid = m["uid"]
    return Finding(
        id="below:unknown-uid", title=f"The process runs as user id {uid}, which the image's /etc/passwd does not list",
        severity="critical", confidence="medium",
        summary=(f"Something asked the password database about the user the process runs as, and it has no entry "
                 f"for uid {uid}: the container runs as a user id the image was not built with, and a variable that "
                 f"spares the lookup is unset (`USER` for the name, `HOME` for the home directory)."),
        evidence=[f"{p.origin.where()}: {text[:300]}"],
        remediation=[f"Set `HOME` (a directory uid {uid} can write: Python looks the home directory up only when HOME "
                     f"is unset) and `USER` (`getpass.getuser()` reads LOGNAME, USER, LNAME and USERNAME before the "
                     f"database) in the container's environment.",
                     f"Or run as a user the image has (the pod's `securityContext.runAsUser`, `docker run --user`), or "
                     f"add uid {uid} to the image's /etc/passwd."],
        sources=[GETUSER_DOC, EXPANDUSER_DOC, PWD_DOC], priority=32, part="platform", inputs=["USER", "HOME"],
        knobs=["HOME", "USER"],
        at=position(p.origin), level=p.origin.level or "EXCEPTION")
