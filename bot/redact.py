"""The redactor, applied at every sink: Slack messages and files, logs, the audit record, the CLI.

Detection is gitleaks' maintained rule set, shipped as data (bot/secret_rules/gitleaks.toml, MIT, see the
README there), plus specops' own rules where gitleaks is weak or context-bound (URL and DSN passwords with any
character, netrc, `Authorization:` headers, PEM and PGP blocks, Azure keys and SAS signatures, key=value names,
`--api-key` flags, AWS pairs, Slack tokens and webhooks), plus the configured secrets' exact values. There is no
process-wide instance: the object graph (app/services.py) builds one with `redactor_for(config)` and hands it to
every sink it builds; only the compiled rule set is shared, because it is immutable and costly to build.
"""

from __future__ import annotations

import logging
import math
import os
import re
import tomllib
from collections import Counter
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any

import ahocorasick_rs

from bot.redact_encodings import DEPTH, ENCODED, HINT, HINT_LOW, STRONG, TRIGGER, Decoded, decoded_token

MASK = "(redacted)"  # no brackets: rich would take "[redacted]" for a style tag and print nothing
KEY_MASK = "(redacted private key)"
RULES_FILE = Path(__file__).with_name("secret_rules") / "gitleaks.toml"


@dataclass(frozen=True)
class Rule:
    id: str
    pattern: re.Pattern[str]
    keywords: tuple[str, ...] = ()  # lowercase; none: the rule runs on every text
    group: int | None = None  # the secret's group; None: gitleaks' choice (the first non-empty group, else all)
    entropy: float = 0.0  # a secret at or under this Shannon entropy is not one (gitleaks' semantics)
    allow: tuple[re.Pattern[str], ...] = ()  # matched against the secret: allowed, not masked
    allow_match: tuple[re.Pattern[str], ...] = ()  # ... against the whole match
    allow_line: tuple[re.Pattern[str], ...] = ()  # ... against the line
    stopwords: tuple[str, ...] = ()
    mask: str = MASK
    # a cheap pattern, run on the lowercased text, that every line the rule matches on also matches: the rule
    # then runs on those lines only (the rule's own leading `[\w.-]{0,50}?`, case-insensitive, tried at every
    # character is what costs; a case-insensitive `re` scan is ~10x a case-sensitive one on lowered text)
    prefilter: re.Pattern[str] | None = None
    # with a prefilter: how far before the prefilter's match the rule's match can start (None: the line's start).
    # Set, the rule is searched once per prefilter match from there, not at every character of the line
    lead: int | None = None


@dataclass(frozen=True)
class RuleSet:
    rules: tuple[Rule, ...]
    always: tuple[int, ...]  # indexes of rules without keywords
    by_keyword: tuple[tuple[int, ...], ...]  # keyword index -> rule indexes
    automaton: ahocorasick_rs.AhoCorasick
    loaded: int  # gitleaks rules in the file with a regex
    compiled: int
    skipped: tuple[str, ...]  # gitleaks rules Python's `re` cannot run, even translated


# --- Go RE2 -> Python `re` ---------------------------------------------------------------------------------

_POSIX = {"alnum": "a-zA-Z0-9", "alpha": "a-zA-Z", "digit": "0-9", "lower": "a-z", "upper": "A-Z",
          "space": r" \t\r\n\v\f", "xdigit": "0-9a-fA-F", "word": r"\w", "punct": r"!-/:-@\[-`{-~",
          "blank": r" \t", "cntrl": r"\x00-\x1f\x7f", "print": r" -~", "graph": r"!-~"}
_FLAGS = re.compile(r"\(\?([imsU]*(?:-[imsU]+)?)\)")


def translate_go_regex(src: str) -> str:
    """A Go RE2 pattern as Python `re` reads it. RE2's inline flags apply to the rest of the enclosing group
    wherever they stand, Python's only at the very start: a mid-pattern `(?i)` becomes a scoped `(?i:` closed
    where its group closes. `\\z` is Python's `\\Z`; POSIX classes are spelled out; a `[` inside a class is
    literal in RE2 and escaped here (Python would read a future nested set)."""
    out: list[str] = []
    opened: list[int] = [0]  # per open group: scoped flag groups to close with it
    i, n = 0, len(src)
    while i < n:
        c = src[i]
        if c == "\\" and i + 1 < n:
            nxt = src[i + 1]
            out.append(r"\Z" if nxt == "z" else src[i:i + 2])
            i += 2
            continue
        if c == "[":
            j, cls = i + 1, ["["]
            if j < n and src[j] == "^":
                cls.append("^")
                j += 1
            if j < n and src[j] == "]":
                cls.append(r"\]")
                j += 1
            while j < n and src[j] != "]":
                if src[j] == "\\" and j + 1 < n:
                    cls.append(src[j:j + 2])
                    j += 2
                elif src.startswith("[:", j) and (end := src.find(":]", j + 2)) > 0 and src[j + 2:end] in _POSIX:
                    cls.append(_POSIX[src[j + 2:end]])
                    j = end + 2
                elif src[j] == "[":
                    cls.append(r"\[")
                    j += 1
                else:
                    cls.append(src[j])
                    j += 1
            cls.append("]")
            out.append("".join(cls))
            i = j + 1
            continue
        if c == "(":
            m = _FLAGS.match(src, i)
            if m and m.group(1):
                if "U" in m.group(1):
                    raise re.error("RE2's ungreedy flag has no Python equivalent")
                if i == 0 or not out:
                    out.append(m.group(0))
                else:
                    out.append(f"(?{m.group(1)}:")
                    opened[-1] += 1
                i = m.end()
                continue
            opened.append(0)
            out.append(c)
            i += 1
            continue
        if c == ")":
            out.append(")" * opened.pop() + ")")
            if not opened:
                raise re.error("unbalanced parenthesis")
            i += 1
            continue
        out.append(c)
        i += 1
    out.append(")" * opened.pop())
    return "".join(out)


def shannon_entropy(value: str) -> float:
    if not value:
        return 0.0
    counts, total = Counter(value), len(value)
    return -sum(c / total * math.log2(c / total) for c in counts.values())


# --- gitleaks' rules, loaded as data ------------------------------------------------------------------------

def _compile(src: str) -> re.Pattern[str]:
    return re.compile(translate_go_regex(src))


def _gitleaks_rules(path: Path) -> tuple[list[Rule], int, list[str]]:
    data = tomllib.loads(path.read_text(encoding="utf-8"))
    glob = data.get("allowlist", {})
    glob_allow = tuple(_compile(r) for r in glob.get("regexes", ()))
    glob_stop = tuple(s.lower() for s in glob.get("stopwords", ()))
    rules: list[Rule] = []
    skipped: list[str] = []
    loaded = 0
    for raw in data.get("rules", ()):
        if "regex" not in raw:
            continue  # a path-only rule: there is no path here
        loaded += 1
        if raw["id"] in _DROPPED:
            skipped.append(raw["id"])
            continue
        try:
            pattern = _compile(raw["regex"])
            allow, stop = list(glob_allow), list(glob_stop)
            match: list[re.Pattern[str]] = []
            line: list[re.Pattern[str]] = []
            for al in raw.get("allowlists", ()):
                if al.get("paths") or al.get("commits"):
                    continue  # conditioned on a file path or commit we never have: never applies
                target = {"match": match, "line": line}.get(al.get("regexTarget", "secret"), allow)
                target.extend(_compile(r) for r in al.get("regexes", ()))
                stop.extend(s.lower() for s in al.get("stopwords", ()))
        except (re.error, RecursionError, OverflowError):
            skipped.append(raw["id"])
            continue
        lead, prefilter = _PREFILTERS.get(raw["id"]) or _derived_prefilter(raw["regex"])
        rules.append(Rule(raw["id"], pattern, tuple(k.lower() for k in raw.get("keywords", ())),
                          raw.get("secretGroup"), float(raw.get("entropy", 0.0)), tuple(allow), tuple(match),
                          tuple(line), tuple(stop), prefilter=prefilter, lead=lead))
    return rules, loaded, skipped


# Prefilters (see Rule.prefilter) by gitleaks rule id: the rule's text from its keyword on, without the leading
# name characters — a superset (tests/test_redact_prefilters.py checks it over the corpus and every case log)
# (with how far before it the rule's own match may start: generic-api-key's leading `[\w.-]{0,50}?`)
_PREFILTERS: dict[str, tuple[int | None, re.Pattern[str]]] = {
    "huggingface-access-token": (None, re.compile(r"hf_")),
    "vault-service-token": (None, re.compile(r"hvs\.|s\.[a-z0-9]{24}")),
    "generic-api-key": (50, re.compile(r"(?:access|auth|api|credential|creds|key|passw(?:or)?d|secret|token)"
                                  r"[ \t\w.-]{0,20}[\s'\"]{0,3}(?:=|>|:{1,3}=|\|\||:|=>|\?=|,)[\x60'\"\s=]{0,5}"
                                  r"(?:[\w.=-]{10}|[a-z0-9][a-z0-9+/]{11})")),
}

# gitleaks' generic shape, `(?i)[\w.-]{0,N}?(?:name|other name)…`: the names, found in the lowered text, are
# where a match can be; it starts at most N characters before one
_GENERIC_LEAD = re.compile(r"^\(\?i\)\[\\w\.-\]\{0,(\d+)\}\?\(\?:")


def _derived_prefilter(regex: str) -> tuple[int | None, re.Pattern[str] | None]:
    m = _GENERIC_LEAD.match(regex)
    if m is None:
        return None, None
    depth, j = 1, m.end()
    while depth and j < len(regex):
        if regex[j] == "\\":
            j += 2
            continue
        depth += {"(": 1, ")": -1}.get(regex[j], 0)
        j += 1
    names = regex[m.end():j - 1]
    try:  # plain names: lowered, matched as they are; others (`(?-i:JIRA|[Jj]ira)`) case-insensitively
        return int(m.group(1)), (re.compile(names.lower()) if re.fullmatch(r"[a-z0-9_| -]+", names.lower())
                                 and names == names.lower() else re.compile(names, re.IGNORECASE))
    except re.error:
        return None, None


# Gitleaks rules not run (by id), should one mask ordinary log or report text. None today: generic-api-key's
# entropy floor and allowlists keep it off vLLM logs and reports (tests/test_redact_corpus.py pins that).
_DROPPED: frozenset[str] = frozenset()

# --- specops' own rules -------------------------------------------------------------------------------------

# the names' distinctive words (what _SECRET_NAMES ends in), for the named-secret rule's prefilter
_SECRET_KEYWORDS = (r"pass(?:word|wd)?|secret|token|api[_-]?key|access[_-]?key|account[_-]?key|"
                    r"shared[_-]?access[_-]?key|private[_-]?key(?:[_-]?id)?|credentials?|auth|sig|signature|"
                    r"sharedaccesssignature|x-amz-signature|x-goog-signature")
# the schemes an Authorization header names before its credential
_AUTH_SCHEMES = r"(?:bearer|basic|token|digest|negotiate|ntlm|apikey|sso-key)"
_SECRET_NAMES = (r"[a-z0-9_.-]*(?:pass(?:word|wd)?|secret|token|api[_-]?key|access[_-]?key|account[_-]?key|"
                 r"shared[_-]?access[_-]?key|private[_-]?key(?:[_-]?id)?|credentials?|auth)|sig|signature|"
                 r"sharedaccesssignature|x-amz-signature|x-goog-signature")


def _own(id: str, pattern: str, keywords: Iterable[str] = (), group: int | None = 0, flags: int = 0,
         mask: str = MASK, prefilter: re.Pattern[str] | None = None) -> Rule:
    return Rule(id, re.compile(pattern, flags), tuple(keywords), group, mask=mask, prefilter=prefilter)


_WS = r"[ \t\r\n]+"
# (the break as written or escaped inside a JSON string; heads shorter than each rule's full token: a whole
# token at a line's end is its own rule's, and the first word of the next line is no part of it)
_WRAPPED = (r"\b((?:hf_[A-Za-z0-9]{0,33}|github_pat_[A-Za-z0-9_]{0,81}|gh[pousr]_[A-Za-z0-9]{0,35}))"
            r"(?:\r?\n|(?:\\r)?\\n)"
            r"([A-Za-z0-9_]{1,90})")
_B64_LINE = r"[A-Za-z0-9+/=]{4,}[ \t]*(?=\r?\n|\Z)"

OWN_RULES: tuple[Rule, ...] = (
    # (a header wrapped over two lines — `-----BEGIN RSA PRIVATE` / `KEY-----` — is still a header)
    _own("private-key-block", rf"-----BEGIN{_WS}(?:[A-Z0-9]+{_WS})*PRIVATE{_WS}KEY(?:{_WS}BLOCK)?-----.*?"
         rf"(?:-----END{_WS}(?:[A-Z0-9]+{_WS})*PRIVATE{_WS}KEY(?:{_WS}BLOCK)?-----|\Z)",
         ["-----begin"], flags=re.S, mask=KEY_MASK),
    # PuTTY's key file: the private lines after `Private-Lines: N`
    _own("putty-key", r"PuTTY-User-Key-File-\d+:[^\0]{0,4000}?Private-Lines:[ \t]*\d+[ \t]*\r?\n"
         rf"({_B64_LINE}(?:\r?\n{_B64_LINE})*)", ["putty-user-key-file-"], group=1, mask=KEY_MASK),
    _own("slack-token", r"\bxox[a-z]-[A-Za-z0-9-]{6,}", ["xox"]),
    _own("slack-app-token", r"\bxapp-[A-Za-z0-9-]{6,}", ["xapp-"]),
    _own("slack-webhook", r"(?i)\bhooks\.slack\.com/(?:services|workflows|triggers)/[A-Za-z0-9+/_-]+",
         ["hooks.slack.com"]),
    _own("huggingface", r"\bhf_[A-Za-z0-9]{16,}", ["hf_"], prefilter=re.compile(r"hf_")),
    _own("github-token", r"\bgh[a-z]_[A-Za-z0-9]{20,}", ["gh"], prefilter=re.compile(r"gh[a-z]_")),
    _own("github-fine-grained", r"\bgithub_pat_[A-Za-z0-9_]{20,}", ["github_pat_"]),
    # a token wrapped by a terminal or a log's line width: a head too short for its rule at a line's end, and
    # the line below it starting with the token's characters (each half masked, the line break kept)
    # (the prefilter takes in the line break, so the line read is the head's and the one below it; it leads
    # with a literal — an alternation of the prefixes, tried at every character, would cost 2 s on 100 MB)
    *(_own(f"wrapped-token-{half}", _WRAPPED, ["hf_", "github_pat_", "ghp_", "gho_", "ghu_", "ghs_", "ghr_"],
           group=half, prefilter=re.compile(r"_[a-z0-9_]{0,81}(?:\r?\n|(?:\\r)?\\n)")) for half in (1, 2)),
    _own("gitlab-token", r"\bgl[a-z]{2,5}-[A-Za-z0-9_-]{20,}", ["gl"]),
    _own("jwt", r"\beyJ[A-Za-z0-9_-]{8,}\.eyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]*", ["eyj"]),
    # Authorization: Bearer X / Basic X / Token X / X, as a header, in JSON or in a Python repr
    # (no value is no secret: `Bearer None`, a client that formatted a missing key)
    _own("authorization", r"(?i)\b(?:proxy-)?authorization[\"']?\s*[:=]\s*[\"']?"
         rf"(?!(?:{_AUTH_SCHEMES}\s+)?(?-i:None|null|nil)(?:[\s\"',;}}]|$))"
         rf"(?:{_AUTH_SCHEMES}\s+)?([^\s\"',]+)", ["authorization"], group=1),
    # NAME=value, NAME: value, "name": "value" — also inside longer names (HF_TOKEN, WANDB_API_KEY, AccountKey)
    # (a JSON document inside a JSON string escapes its quotes: `\\"auth\\": \\"…\\"`)
    # (the value as runs of plain characters, not one group per character: Python's `re` keeps a backtracking
    # entry per repetition of a group — 150 bytes a character on a megabyte value)
    # (no value is no secret: `hf_token=None` in vLLM's own argument dump)
    # (nor is a Python expression, a code line under a traceback's frame: `step_token = top_logprobs[token_id]`,
    # `token = self.tokenizer.decode(ids)` — assigned with blanks around `=`, a dotted name called or a name
    # subscripted by a name, in lower snake case, closed, and nothing after it on the line)
    _own("named-secret", rf"(?i)(?<![a-z0-9_.-])(?:{_SECRET_NAMES})(?:\\*[\"'])?\s*[:=]\s*(?:\\*[\"'])?"
         rf"(?!\(redacted|(?-i:None|null|nil)(?:[\s\"',;}}&\\]|$))"
         r"(?!(?<= = )(?:[a-z_][a-z0-9_]{0,40}(?:\.[a-z_][a-z0-9_]{0,40}){1,8}\((?-i:[a-z0-9_.,: ]){0,80}\)|"
         r"[a-z_][a-z0-9_]{0,40}(?:\.[a-z_][a-z0-9_]{0,40}){0,8}\[(?-i:[a-z_][a-z0-9_]{0,40})\])"
         r"[ \t]*(?:\r?\n|\Z))"
         rf"(?=(?:[^\s\"',;}}&\\]|\\(?![\\\"'])){{3}})((?:[^\s\"',;}}&\\]+|\\(?![\\\"']))+)",
         ["pass", "secret", "token", "key", "credential", "auth", "sig"], group=1,
         prefilter=re.compile(rf"(?:{_SECRET_KEYWORDS})(?:\\*[\"'])?\s*[:=]")),
    # "name": "value" in JSON, the value read as a JSON string (an escaped quote inside it does not end it)
    _own("json-secret", rf'(?i)"(?:{_SECRET_NAMES})"\s*:\s*"(?!\(redacted)((?:[^"\\\n]|\\.){{3,4096}})"',
         ["pass", "secret", "token", "key", "credential", "auth", "sig"], group=1),
    # a YAML block scalar under a secret's name: `password: |` and the lines indented below it
    _own("yaml-block-secret", r"(?im)^([ \t]*)[a-z0-9_.-]*(?:pass(?:word|wd)?|secret|token|api[_-]?key|"
         r"private[_-]?key|credentials?)[ \t]*:[ \t]*[|>][-+]?[ \t]*\r?\n(\1[ \t]+\S[^\n]*(?:\n\1[ \t]+\S[^\n]*)*)",
         ["pass", "secret", "token", "key", "credential"], group=2),
    # command-line passwords of tools that take them after -p: `sshpass -p PW`, `mysql -uroot -pPW`
    _own("sshpass", r"\bsshpass\b[^\n]{0,200}?[ \t]-p[ \t]*(['\"]?)([^\s'\"]{1,256})\1", ["sshpass"], group=2),
    _own("mysql-password", r"\b(?:mysql\w*|mariadb[\w-]*)\b[^\n]{0,300}?[ \t]-p(['\"]?)([^\s'\"]{1,256})\1",
         ["mysql", "mariadb"], group=2),
    # --api-key VALUE, --token VALUE, --password=VALUE on a command line
    _own("flag-secret", r"(?i)--[a-z0-9-]*(?:api-key|token|password|passwd|secret|credentials?)[ =]['\"]?(\S+)",
         ["--"], group=1),
    # user:password@ in any URL (https, postgres, redis, mongodb+srv, amqp, …): the password runs to the last
    # `@` before the host, whatever it holds (`/`, `@`, `%`)
    # (`***` is a password already masked — SQLAlchemy's own rendering of a URL — and stays as it is)
    _own("url-password", r"(?i)\b[a-z][a-z0-9+.-]*://[^\s:/@\"'<>]*:(?!\*+@)([^\s\"'<>`]+)@", ["://"], group=1,
         prefilter=re.compile(r"://")),
    # netrc: `machine X login Y password Z`, and `password Z` opening a line of one
    # (an operator between them — `password = Z`, `password := Z`, `password => Z` — is not the secret: the token
    # after it is; masking the operator left the value beside it in plain sight)
    _own("netrc", r"(?im)(?:^[ \t]*|\blogin[ \t]+\S+[ \t]+)(?:password|passwd)[ \t]+(?:[^\w\s]{1,4}[ \t]+){0,2}"
         r"(\S+)", ["pass"], group=1),
    # AWS access key ids, and the 40-character secret that travels with one
    _own("aws-key-id", r"\b(?:AKIA|ASIA|AGPA|AIDA|AROA|ANPA|ANVA|AIPA|ABIA|ACCA)[A-Z0-9]{16}\b",
         ["akia", "asia", "agpa", "aida", "aroa", "anpa", "anva", "aipa", "abia", "acca"]),
    _own("aws-secret", r"(?<![A-Za-z0-9/+=])(?=[A-Za-z0-9/+]{0,39}[A-Z])(?=[A-Za-z0-9/+]{0,39}[a-z])"
         r"(?=[A-Za-z0-9/+]{0,39}[0-9])[A-Za-z0-9/+]{40}(?![A-Za-z0-9/+=])"),
)


@lru_cache(maxsize=1)
def rule_set() -> RuleSet:
    """Every rule compiled once per process, on the first text redacted (compiling ~220 patterns costs ~0.2 s,
    which a CLI run that redacts nothing should not pay)."""
    gitleaks, loaded, skipped = _gitleaks_rules(RULES_FILE)
    rules = (*OWN_RULES, *gitleaks)
    keywords = sorted({k for r in rules for k in r.keywords})
    index = {k: i for i, k in enumerate(keywords)}
    by_keyword: list[list[int]] = [[] for _ in keywords]
    for n, rule in enumerate(rules):
        for k in rule.keywords:
            by_keyword[index[k]].append(n)
    return RuleSet(rules, tuple(n for n, r in enumerate(rules) if not r.keywords),
                   tuple(tuple(b) for b in by_keyword), ahocorasick_rs.AhoCorasick(keywords),
                   loaded, len(gitleaks), tuple(skipped))


def _line_of(text: str, start: int, end: int) -> str:
    return text[text.rfind("\n", 0, start) + 1:(e if (e := text.find("\n", end)) >= 0 else len(text))]


def _candidate_lines(rule: Rule, text: str, low: str | None = None) -> Iterable[tuple[int, int, bool]]:
    """Where to run the rule: (start, end, first match only). The whole text; or — for a rule with a prefilter —
    each line the prefilter matches on (in `low`, the text lowercased, when lowercasing kept every position;
    else case-insensitively in the text); or, for a rule with a `lead`, from `lead` characters before each
    prefilter match to _REACH characters after it (or the line's end), once."""
    if rule.prefilter is None:
        yield 0, len(text), False
        return
    if low is None or len(low) != len(text):
        low, finder = text, re.compile(rule.prefilter.pattern, re.IGNORECASE)
    else:
        finder = rule.prefilter
    line_start, line_end, searched = -1, -1, -1
    for m in finder.finditer(low):
        if m.start() >= line_end:
            line_start = text.rfind("\n", 0, m.start()) + 1
            line_end = text.find("\n", m.end())
            line_end = len(text) if line_end < 0 else line_end
            if rule.lead is None:
                yield line_start, line_end, False
                continue
        elif rule.lead is None:
            continue  # this line is read already
        start = max(line_start, m.start() - rule.lead, searched)
        searched = m.end()
        # a match holding this name ends within _REACH of it; a longer value, cut there, is masked to its line's end
        yield start, min(line_end, m.end() + _REACH), True


_REACH = 4096


def _spans(rule: Rule, text: str, low: str | None = None) -> Iterable[tuple[int, int]]:
    for pos, endpos, once in _candidate_lines(rule, text, low):
        for s, e in _spans_in(rule, text, pos, endpos, once):
            if once and e == endpos < len(text) and text[endpos] != "\n":
                nl = text.find("\n", endpos)
                e = len(text) if nl < 0 else nl
            yield s, e


def _spans_in(rule: Rule, text: str, pos: int, endpos: int, once: bool = False) -> Iterable[tuple[int, int]]:
    found = rule.pattern.finditer(text, pos, endpos)
    for m in (next(found, None),) if once else found:
        if m is None:
            return
        if rule.group is not None:
            g = rule.group
        else:  # gitleaks: the first non-empty group is the secret, else the whole match
            g = next((i for i in range(1, (m.lastindex or 0) + 1) if m.group(i)), 0)
        start, end = m.span(g)
        if start < 0 or start == end:
            continue
        secret = m.group(g)
        if rule.entropy and shannon_entropy(secret) <= rule.entropy:
            continue
        if rule.allow and any(a.search(secret) for a in rule.allow):
            continue
        if rule.stopwords and any(s in secret.lower() for s in rule.stopwords):
            continue
        if rule.allow_match and any(a.search(m.group(0)) for a in rule.allow_match):
            continue
        if rule.allow_line and any(a.search(_line_of(text, *m.span())) for a in rule.allow_line):
            continue
        yield start, end


class Redactor:
    def __init__(self, secrets: Iterable[str | None] = ()) -> None:
        self._secrets = sorted({s for s in secrets if s and len(s) >= 6}, key=len, reverse=True)

    def add_secret(self, value: str | None) -> None:
        if value and len(value) >= 6 and value not in self._secrets:
            self._secrets = sorted([*self._secrets, value], key=len, reverse=True)

    def learn_url(self, url: str | None) -> None:
        """The password of a URL's `user:password@` (any characters, `/` and `@` included), as an exact secret:
        as written and percent-decoded (what a driver or SQLAlchemy's URL.password shows in an error)."""
        password = url_password(url)
        self.add_secret(password)
        if password and "%" in password:
            from urllib.parse import unquote

            self.add_secret(unquote(password))

    def text(self, value: str) -> str:
        if type(value) is Vouched:  # exactly: a subclass could override what `parts` says
            return self._vouched(value)
        spans = self._large(value) if len(value) > WINDOW else self._all_found(value)
        if not spans:
            return value
        return _apply(value, spans)

    def _all_found(self, value: str) -> list[tuple[int, int, str]]:
        low = value.lower()
        spans = self._found(value, low)
        # a line decoded only for an escaped newline or quote is skipped unless it holds a strong escape or a hint:
        # a text (a window of a JSON log) with neither anywhere is not walked line by line at all
        if TRIGGER.search(value) is not None and (STRONG.search(value) is not None
                                                   or (len(low) == len(value) and HINT_LOW.search(low) is not None)
                                                   or (len(low) != len(value) and HINT.search(value) is not None)):
            spans += self._found_encoded(value)
        return spans

    def _large(self, value: str) -> list[tuple[int, int, str]]:
        """A text over one window, read window by window, each with OVERLAP characters of context on both sides
        (a key block, a YAML block, a secret across a cut): memory and each regex call stay bounded whatever the
        size, and a thread redacting a big paste holds the GIL one window at a time. A span that runs into a
        window's cut runs on to the end of its line: a value longer than any secret is masked whole, never shown
        in part."""
        spans: list[tuple[int, int, str]] = []
        for a, b in _windows(value):
            start, end = max(0, a - OVERLAP), min(len(value), b + OVERLAP)
            for s, e, mask in self._all_found(value[start:end]):
                if s == 0 < start:
                    continue  # a match cut by this window's left edge: the window before read it whole
                s, e = start + s, start + e
                if e == end < len(value):  # cut here: the rest of the line goes with it
                    nl = value.find("\n", e)
                    e = len(value) if nl < 0 else nl
                spans.append((s, e, mask))
        return spans

    def _found_encoded(self, value: str) -> list[tuple[int, int, str]]:
        """The secrets of each line that holds an encoded character, found in a decoded copy of the line and
        mapped back onto the line as written (`hf%5F…`, `"xoxb\\u002d…"`, a zero-width space inside a token).
        The decoded lines of one layer are read together, in one pass of the rules (a JSON log escapes on every
        line), and the way back is worked out only for a line where something was found."""
        import bisect

        lines: list[tuple[int, list[str]]] = []  # (where the line starts in `value`, the line and its decodings)
        done = -1
        for m in TRIGGER.finditer(value):
            if m.start() < done:
                continue  # this line was decoded already
            start = value.rfind("\n", 0, m.start()) + 1
            end = value.find("\n", m.end())
            done = end = len(value) if end < 0 else end
            if m.group()[-1] in 'n"' and HINT.search(value, start, end) is None \
                    and STRONG.search(value, start, end) is None:
                continue  # escaped newlines and quotes alone (a JSON log's every line) hide nothing from the rules
            texts = [value[start:end]]
            for _ in range(DEPTH):  # JSON inside JSON escapes its escapes: decode until nothing changes
                decoded = ENCODED.sub(decoded_token, texts[-1])
                if decoded == texts[-1]:
                    break
                texts.append(decoded)
            if len(texts) > 1:
                lines.append((start, texts))
        spans: list[tuple[int, int, str]] = []
        for depth in range(1, DEPTH + 1):
            these = [(start, texts) for start, texts in lines if len(texts) > depth]
            if not these:
                break
            offsets, pos = [], 0
            for _start, texts in these:
                offsets.append(pos)
                pos += len(texts[depth]) + 1
            joined = "\n".join(texts[depth] for _start, texts in these)
            for s, e, mask in self._found(joined):
                k = bisect.bisect_right(offsets, s) - 1
                start, texts = these[k]
                ls, le = s - offsets[k], min(e - offsets[k], len(texts[depth]))
                for layer in reversed([Decoded(t) for t in texts[:depth]]):
                    ls, le = layer.origin(ls), layer.end_origin(le)
                spans.append((start + ls, start + max(le, ls), mask))
        return spans

    def _found(self, value: str, low: str | None = None) -> list[tuple[int, int, str]]:
        """Every span of `value` (lowercased: `low`) an exact secret or a rule finds."""
        spans: list[tuple[int, int, str]] = []
        for secret in self._secrets:
            at = value.find(secret)
            while at >= 0:
                spans.append((at, at + len(secret), MASK))
                at = value.find(secret, at + len(secret))
        rs = rule_set()
        todo = set(rs.always)
        low = value.lower() if low is None else low
        for k, _start, _end in rs.automaton.find_matches_as_indexes(low, overlapping=True):
            todo.update(rs.by_keyword[k])
        for n in todo:
            rule = rs.rules[n]
            spans.extend((s, e, rule.mask) for s, e in _spans(rule, value, low))
        return spans

    def _vouched(self, value: Vouched) -> str:
        """Each outside part redacted on its own (a part repeated — a label every instance has — once), the
        vouched parts as they are."""
        done: dict[str, str] = {}
        out: list[str] = []
        changed = False
        for part, vouched in value.parts:
            if vouched:
                out.append(part)
                continue
            clean = done.get(part)
            if clean is None:
                clean = done[part] = self.text(part)
            changed = changed or clean != part
            out.append(clean)
        # nothing masked: the text itself, not a second copy of megabytes
        return "".join(out) if changed else value

    def obj(self, value: Any) -> Any:
        """Every string inside a JSON-like value (Block Kit payloads, audit details)."""
        if isinstance(value, str):
            return self.text(value)
        if isinstance(value, dict):
            return {k: self.obj(v) for k, v in value.items()}
        if isinstance(value, list | tuple):
            return [self.obj(v) for v in value]
        return value

    def bytes(self, value: bytes) -> bytes:
        try:
            return self.text(value.decode("utf-8")).encode("utf-8")
        except UnicodeDecodeError:
            return value  # binary (a PNG chart): nothing textual to leak


WINDOW = 1 << 20  # characters read at once from a text longer than this
OVERLAP = 16 << 10  # context on each side of a window: longer than a PEM or PuTTY key, a YAML block, a token


def _windows(value: str) -> Iterator[tuple[int, int]]:
    """(start, end) pieces of about WINDOW characters, cut after a newline where one is near."""
    start = 0
    while start < len(value):
        end = min(len(value), start + WINDOW)
        if end < len(value):
            nl = value.rfind("\n", start + WINDOW // 2, end)
            end = nl + 1 if nl >= 0 else end
        yield start, end
        start = end


class Vouched(str):
    """A text its renderer built of parts it vouches for — JSON punctuation, the keys of a contract, numbers, fixed
    words — and outside parts (a label, an instance, a URL, a headline), each a whole unit that carries its own
    context (`"key": "value"`, a label block). `Redactor.text` redacts each outside part alone and leaves the
    vouched ones: a fleet's JSON is megabytes of numbers and keys (10,000 instances: 9 MB, ~5 s through the
    whole-text rules, keyword-gated on `tokens_per_s` in every line) around a few bytes from outside each.

    Only the very object is trusted: anything derived from it (a slice, a concatenation, `.replace`) is a plain
    `str`, redacted whole as before."""

    parts: tuple[tuple[str, bool], ...]  # (text, vouched), in order; their concatenation is the string

    def __new__(cls, parts: Iterable[tuple[str, bool]]) -> Vouched:
        kept = tuple((str(text), bool(vouched)) for text, vouched in parts if text)
        self = super().__new__(cls, "".join(text for text, _ in kept))
        self.parts = kept
        return self


def _apply(value: str, spans: list[tuple[int, int, str]]) -> str:
    """Every span masked; overlapping spans (two rules, or a rule and an exact value, on one secret) as one."""
    spans.sort()
    kept: list[tuple[int, int, str]] = []  # (from, to) of the text kept, then the mask that follows it
    pos, start, end, mask = 0, *spans[0]
    for s, e, m in spans[1:]:
        if s < end:
            end, mask = max(end, e), KEY_MASK if KEY_MASK in (mask, m) else mask
            continue
        kept.append((pos, start, mask))
        pos, start, end, mask = end, s, e, m
    kept += [(pos, start, mask), (end, len(value), "")]
    if len(value) <= WINDOW:
        return "".join(value[a:b] + m for a, b, m in kept)
    # a large text without a third copy of it: `"".join` needs every piece (one copy) and the result (another) at
    # once; one string grown in place by window-sized slices holds the result and one slice (CPython grows a
    # string with one reference in place, and the allocator moves a block this large by remapping its pages)
    # (small pieces are gathered to a window's worth first: one growth per window, not one per masked secret)
    out, buf, held = "", [], 0
    for a, b, m in kept:
        for at in range(a, b, WINDOW):
            piece = value[at:min(b, at + WINDOW)]
            buf.append(piece)
            held += len(piece)
            if held >= WINDOW:
                out += "".join(buf)
                buf, held = [], 0
        buf.append(m)
    out += "".join(buf)  # in place: `return out + …` would copy the whole result once more
    return out


def url_password(url: str | None) -> str | None:
    """`password` of `scheme://user:password@host/…`; the host is after the last `@` of the authority."""
    if not url or "://" not in url:
        return None
    rest = url.split("://", 1)[1]
    at = rest.rfind("@", 0, _authority_end(rest))
    if at < 0:
        return None
    userinfo = rest[:at]
    return userinfo.split(":", 1)[1] if ":" in userinfo else None


def _authority_end(rest: str) -> int:
    """Where the authority ends: the first `/`, `?` or `#` after the last `@` before any of them would, so a
    password holding `/` does not end it early."""
    last_at = rest.rfind("@")
    tail = rest[last_at + 1:] if last_at >= 0 else rest
    cut = min((i for i in (tail.find(c) for c in "/?#") if i >= 0), default=len(tail))
    return (last_at + 1 if last_at >= 0 else 0) + cut


class RedactingFilter(logging.Filter):
    def __init__(self, redactor: Redactor) -> None:
        super().__init__()
        self.redactor = redactor

    def filter(self, record: logging.LogRecord) -> bool:
        try:
            message = record.getMessage()
        except (TypeError, ValueError):
            return True
        record.msg, record.args = self.redactor.text(message), None
        # a traceback is formatted after the filters ran: format it here, redacted
        if record.exc_info:
            record.exc_text = self.redactor.text(logging.Formatter().formatException(record.exc_info))
            record.exc_info = None
        elif record.exc_text:
            record.exc_text = self.redactor.text(record.exc_text)
        if record.stack_info:
            record.stack_info = self.redactor.text(record.stack_info)
        return True


SECRET_NAME = re.compile(r"(?i)(token|secret|key|pass|auth|credential)")


# Secrets that reach the process through its environment rather than the config file: the Slack app's
# tokens and signing secret (pydantic-settings reads them, bot/adapters/slack/settings.py).
ENV_SECRETS = ("SLACK_BOT_TOKEN", "SLACK_SIGNING_SECRET", "SLACK_APP_TOKEN")


def redactor_for(config: Any | None, extra: Iterable[str | None] = ()) -> Redactor:
    """A redactor that knows every secret this config names: its env values under secret-looking names, the
    Prometheus credentials, the Alertmanager webhook token, the Slack secrets of the environment, and `extra`."""
    redactor = Redactor(extra)
    for name in ENV_SECRETS:
        redactor.add_secret(os.environ.get(name))
    if config is not None:
        register_config_secrets(config, redactor)
    return redactor


def register_config_secrets(config: Any, redactor: Redactor) -> None:
    """Environment values the config hands to vLLM under secret-looking names are never shown."""
    envs = [h.vllm_env for h in config.hosts.values()] + [p.env for p in config.profiles.values()]
    envs += [env for h in config.hosts.values() if isinstance(env := h.overrides.get("env"), dict)]
    for env in envs:
        for name, value in env.items():
            if SECRET_NAME.search(name):
                redactor.add_secret(value)
    prom = getattr(config, "prometheus", None)
    if prom is not None:
        redactor.learn_url(str(prom.url))  # http://user:password@prometheus:9090: said in every error about it
        for value in prom.headers.values():  # an Authorization or API-key header sent to Prometheus
            redactor.add_secret(value)
        for name in (prom.bearer_token_env, prom.basic_auth_env):
            secret = os.environ.get(name or "")
            if secret:
                redactor.add_secret(secret)
    settings = getattr(config, "settings", None)
    state = getattr(settings, "state", None)
    if isinstance(state, str):  # a database URL: postgresql+psycopg://specops:PASSWORD@db/specops
        redactor.learn_url(state)
    password_env = getattr(settings, "state_password_env", None)
    if password_env:
        redactor.add_secret(os.environ.get(password_env))
    watch = getattr(config, "watch", None)
    token_env = getattr(watch, "alertmanager_token_env", None)
    if token_env:
        redactor.add_secret(os.environ.get(token_env))


def install_log_redaction(redactor: Redactor, level: int = logging.INFO) -> None:
    """Every handler of the root logger redacts what it writes (configuring logging if nobody did)."""
    root = logging.getLogger()
    if not root.handlers:
        logging.basicConfig(level=level, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    for handler in root.handlers:
        if not any(isinstance(f, RedactingFilter) for f in handler.filters):
            handler.addFilter(RedactingFilter(redactor))
