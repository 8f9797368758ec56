"""Who this process acts for, as locks and the audit name it (a command line's user@host)."""

from __future__ import annotations

import os
import socket


def default_owner() -> str:
    return f"{os.environ.get('USER') or os.environ.get('LOGNAME') or 'unknown'}@{socket.gethostname()} (cli)"
