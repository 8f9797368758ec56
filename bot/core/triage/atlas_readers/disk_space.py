"""A disk too full for the weights: huggingface_hub's own warning before a download that will not fit (it names the
file's size, the target folder and the space left), or the kernel's ENOSPC (`[Errno 28] No space left on device`)
on any write. The fix is the volume, not vLLM: more space where the cache or download folder lives, or a folder on a
volume that has it.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

from bot.core.triage.atlas_readers.quoting import quoted
from bot.core.triage.evidence import position
from bot.core.triage.findings import Finding

if TYPE_CHECKING:
    from bot.core.triage.detectors.state import State

# huggingface_hub's file_download `_check_disk_space` (a UserWarning), and errno 28 in Python's OSError words
_HUB_SPACE = re.compile(r"Not enough free disk space to download the file\.(?: The expected file size is: "
                        r"(?P<need>[\d.]{1,12}) MB\. The target location (?P<where>\S{1,300}) only has "
                        r"(?P<free>[\d.]{1,12}) MB free)?")
_ENOSPC = re.compile(r"\[Errno 28\] No space left on device")
_SHM = re.compile(r"/dev/shm\b")
SOURCES = ("https://github.com/huggingface/huggingface_hub/blob/main/src/huggingface_hub/file_download.py",
           "https://man7.org/linux/man-pages/man3/errno.3.html")


def disk_space(st: State) -> None:
    lines = [*st.ev.parsed.problems, *st.ev.parsed.loose]
    line = next((p for p in lines if _HUB_SPACE.search(p.origin.text or p.message)), None) or next(
        (p for p in lines if _ENOSPC.search(p.origin.text or p.message)), None)
    if line is None or any(f.id == "disk-full" for f in st.findings) or _SHM.search(line.origin.text or ""):
        return  # /dev/shm full is shared memory's (NCCL's segments, the container's size), not the weights' disk
    hub = _HUB_SPACE.search(line.origin.text or line.message)
    where = f" (`{hub['where']}`: {hub['free']} MB free for a {hub['need']} MB file)" if hub and hub["where"] else ""
    # the hub warns and goes on: the download fails once the volume fills — sure when the file is larger than the
    # space left; ENOSPC is the write failing itself
    failed = hub is None or any(f.severity == "critical" for f in st.findings) or bool(
        hub["need"] and hub["free"] and float(hub["need"]) > float(hub["free"]))
    st.findings.append(Finding(
        id="disk-full", severity="critical" if failed else "warning", confidence="medium",
        title="The disk the weights go to is too full" + where,
        summary=("huggingface_hub found less free space than the file it was about to download needs" + where
                 + "; the download fails when the volume fills." if hub else
                 "A write failed with ENOSPC: the volume it wrote to has no space left."),
        evidence=[quoted(line)],
        remediation=["Give the volume that holds the model cache more space (a larger disk or persistent volume "
                     "claim), or point the cache to one that has it (`HF_HOME`, or vLLM's `--download-dir`); a "
                     "model's weights need their full size free, and a partial download is left behind to delete."],
        sources=list(SOURCES), priority=20, part="model-loading" if hub else None, host=["disk"],
        knobs=["--download-dir", "HF_HOME"], at=position(line.origin)))
