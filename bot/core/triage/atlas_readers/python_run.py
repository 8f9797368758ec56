"""The interpreter's own refusal to run vLLM's module: Python found no `vllm` package to import."""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

from bot.core.triage.atlas_readers.quoting import quoted
from bot.core.triage.findings import Finding

if TYPE_CHECKING:
    from bot.core.triage.detectors.state import State

# CPython's own words when `python -m vllm…` cannot import the package (runpy, printed after the interpreter's path):
# `/usr/bin/python3: Error while finding module specification for 'vllm.entrypoints…' (ModuleNotFoundError: No
# module named 'vllm')`
_NO_MODULE_RE = re.compile(r"(?P<python>\S*python[\d.]*): Error while finding module specification for "
                           r"'(?P<spec>[\w.]+)' \(ModuleNotFoundError: No module named '(?P<missing>vllm[\w.]*)'\)")


def vllm_not_importable(st: State) -> None:
    """The interpreter that was told to run vLLM's module cannot import vLLM at all: vLLM is not in that Python's
    environment, or what the image installed is hidden (a volume mounted over its directory)."""
    for p in [*st.ev.parsed.problems, *st.ev.parsed.loose]:
        m = _NO_MODULE_RE.search(p.origin.text or p.message)
        if m is None:
            continue
        for f in st.findings:
            if f.id.startswith("atlas:") and any(m.group(0)[:60] in e for e in f.evidence):
                f.severity = "info"  # the interpreter's words, not vLLM's: the atlas only matched them
        st.findings.append(Finding(
            id="vllm-not-importable", title=f"`{m['python']}` cannot import `{m['missing']}`",
            severity="critical", confidence="high",
            summary=(f"Python was told to run `{m['spec']}` and found no `{m['missing']}` package: vLLM is not "
                     "installed in this interpreter's environment, or the directory it was installed in is hidden "
                     "(a volume mounted over it, another working directory)."),
            evidence=[quoted(p)],
            remediation=[f"In the same container or environment, `{m['python']} -c 'import vllm'` and `pip show "
                         "vllm` say which: install vLLM there, or mount your volume at a path the image does not "
                         "use (a volume over the image's working directory replaces what the image put there)."],
            priority=28, part="platform", owner="user-script", deps=["vllm"], advice=["fix-script"],
            inputs=["python"]))
        return
