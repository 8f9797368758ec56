"""Re-fetch gitleaks' default rule set and its licence into bot/secret_rules/ (see the README there).

    python3 tools/refresh_gitleaks_rules.py [--ref master]
"""

from __future__ import annotations

import argparse
import tomllib
import urllib.request
from pathlib import Path

DEST = Path(__file__).resolve().parent.parent / "bot" / "secret_rules"
RAW = "https://raw.githubusercontent.com/gitleaks/gitleaks/{ref}/{path}"


def fetch(ref: str, path: str) -> bytes:
    with urllib.request.urlopen(RAW.format(ref=ref, path=path), timeout=30) as resp:
        data: bytes = resp.read()
    return data


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--ref", default="master", help="a branch, tag or commit of gitleaks/gitleaks")
    args = ap.parse_args()
    rules = fetch(args.ref, "config/gitleaks.toml")
    n = len(tomllib.loads(rules.decode("utf-8")).get("rules", []))  # refuse a file that is not the rule set
    if n < 100:
        raise SystemExit(f"only {n} rules in the fetched file: not replacing the shipped one")
    (DEST / "gitleaks.toml").write_bytes(rules)
    (DEST / "LICENSE-gitleaks").write_bytes(fetch(args.ref, "LICENSE"))
    print(f"{n} rules from gitleaks@{args.ref}; note the commit in {DEST / 'README.md'}")


if __name__ == "__main__":
    main()
