"""argparse's refusals of the command line (`vllm: error: unrecognized arguments: --lora-path …`,
`argument --x: invalid choice: …`), read against the flags each release's parsers add."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from bot.core.parsed_log import ProblemLine
from bot.core.triage.atlas_readers.quoting import clip, quoted
from bot.core.triage.atlas_readers.releases import newer, one_release
from bot.core.triage.findings import Confidence, Finding
from bot.core.triage.remedy import Remedy

if TYPE_CHECKING:
    from bot.core.atlas import Atlas

# argparse's refusal of one flag's value: a choice it does not list, a count of values, or what the flag's type
# raised (`invalid int value`, a config class's validation error)
# (a paste may lose the spaces after the colons: `vllm:error:unrecognized arguments:--x`)
# (the refusal quoted without the program's `error:` — an issue's title — is argparse's when it names flags)
_ARGPARSE_RE = re.compile(r"(?:error: ?|^\s*(?=unrecognized arguments?: ?--))"
                          r"(?:unrecognized arguments?: ?(?P<unknown>.+)|argument (?P<arg>--[\w-]+)[^:]*: "
                          r"(?P<why>\S.{0,400})|ambiguous option: ?(?P<ambiguous>--[\w-]+)(?:=\S*)? could match "
                          r"(?P<matches>--.{1,400}))$")
# a request's sampling parameters (vllm/sampling_params.py `SamplingParams`; the OpenAI request's names), which
# `vllm serve` does not take as flags
SAMPLING_FIELDS = frozenset({"temperature", "top_p", "top_k", "min_p", "max_tokens", "presence_penalty",
                             "frequency_penalty", "repetition_penalty", "stop", "seed", "min_tokens", "logprobs"})
_COMMON_WORDS = frozenset({"enable", "disable", "max", "min", "use", "num", "size", "no", "set", "per", "type"})


@dataclass
class _Refusal(Remedy):
    title: str = field(default="", kw_only=True)
    confidence: Confidence = field(default="high", kw_only=True)


def argparse_refusal(atlas: Atlas, p: ProblemLine, version: str | None) -> Finding | None:
    """argparse refused the command line before vLLM started. The atlas knows every flag each release's parsers
    add."""
    hit = _ARGPARSE_RE.search(p.message.strip())
    if hit is None:
        return _registry_refusal(atlas, p, version)
    known = atlas.cli_flags(version)
    if hit["arg"]:
        refusal: _Refusal | None = _bad_value(hit["arg"], hit["why"], known)
    elif hit["ambiguous"]:
        refusal = _ambiguous(hit["ambiguous"], re.findall(r"--[\w-]+", hit["matches"]))
    else:
        prog = _PROG.match(p.message.strip())
        refusal = unknown_flags(atlas, hit["unknown"], known, version, prog["prog"] if prog else "")
    if refusal is None:
        return None
    owner = "user-script" if "fix-script" in refusal.advice else None
    return Finding(
        id="cli-refused", title=refusal.title, severity="critical", confidence=refusal.confidence, owner=owner,
        summary="argparse stopped the command before vLLM started: the flags are checked against the parsers of "
                "the release that runs, which the atlas read.",
        evidence=[quoted(p)], remediation=refusal.remediation,
        priority=20, part="config", knobs=refusal.knobs, advice=refusal.advice, inputs=refusal.inputs)


# vLLM's own registries refusing a name with the names they hold (a tool-call or reasoning parser, a loader):
# `KeyError: 'invalid tool call parser: kimi_k2 (chose from { deepseek_v3,granite,… })'`
_REGISTRY = re.compile(r"invalid (?P<what>[a-z][a-z ]{2,40}?): '?(?P<value>[\w./-]{1,80})'? "
                       r"\(cho{1,2}se from \{?(?P<choices>[^(){}]{1,2000})\}?\s*\)", re.IGNORECASE)


# the other wording of a registry's refusal: `Unknown quantization method: gptq. Must be one of ['awq', 'squeezellm'].`
_MUST_BE_ONE_OF = re.compile(r"(?:Unknown|Unsupported|Invalid) (?P<what>[a-z][a-z ]{2,40}?): "
                             r"'?(?P<value>[\w./-]{1,80})'?\. Must be one of \[?(?P<choices>[^\[\]]{1,2000})\]?",
                             re.IGNORECASE)


def _registry_refusal(atlas: Atlas, p: ProblemLine, version: str | None) -> Finding | None:
    """A name refused by one of vLLM's registries, read like argparse's invalid choice: the flag whose words the
    message says, the value, and whether a later release may have it."""
    hit = _REGISTRY.search(p.message) or _MUST_BE_ONE_OF.search(p.message)
    if hit is None:
        return None
    words = hit["what"].lower().split()
    # the flag the words say: `tool call parser` is --tool-call-parser; `quantization method` is --quantization (only
    # "method" is dropped: `model type` is no --model)
    known = atlas.cli_flags(version)
    said = [words, words[:-1]] if len(words) > 1 and words[-1] == "method" else [words]
    flags = [flag for what in said if (flag := "--" + "-".join(what)) in known]
    if not flags:
        return None
    flag, value = flags[0], hit["value"]
    choices = [c for c in re.split(r"[\s,']+", hit["choices"]) if c]
    refusal = _Refusal(title=f"The server refused {flag} {value}: this release does not have it",
                       remediation=[f"`{flag}` does not take `{value}` on this release."], knobs=[flag])
    refusal.inputs = [flag]
    _not_a_choice(flag, value, choices, refusal)
    return Finding(
        id="cli-refused", title=refusal.title, severity="critical", confidence="high",
        summary="vLLM checked the value against the names its release registered, before serving.",
        evidence=[quoted(p)], remediation=refusal.remediation,
        priority=20, part="entrypoint" if _ENTRYPOINT_FLAG.search(flag) else "config", knobs=refusal.knobs,
        advice=refusal.advice, inputs=refusal.inputs)


# the API server's own flags: what it parses requests and replies with
_ENTRYPOINT_FLAG = re.compile(r"parser|chat-template|tool|response-role|api-key")


_CHOICE = re.compile(r"invalid choice: '(?P<value>[^']{1,80})' \(choose from (?P<choices>.{1,2000})\)")


# vLLM's own wrapper of a flag's type function (`Value image=4 cannot be converted to <function loads …>`)
_CONVERTER = re.compile(r"^Value .{1,400}? cannot be converted to <function(?: (?P<fn>\w{1,80})|\s*$)")


def _bad_value(flag: str, why: str, known: dict[str, str]) -> _Refusal:
    help_text = known.get(flag, "")
    remediation = (f"`{flag}` does not take that value ({clip(why, 200)})"
                   + (f"; its help: {clip(help_text, 220)}" if help_text else "") + ".")
    refusal = _Refusal(title=f"The command line was refused: {flag} {clip(why, 70)}", remediation=[remediation],
                       knobs=[flag])
    refusal.inputs = [flag]
    converter = _CONVERTER.search(why)
    if converter is not None and (converter["fn"] == "loads" or converter["fn"] is None):
        # the atlas keeps one help text per flag: its example may be another release's form of the value
        # (the function's name cut off the line: only a flag that takes a mapping is read with json.loads)
        lead = ("This release reads `{flag}`'s value as JSON (`json.loads`)" if converter["fn"] else
                "This release reads `{flag}`'s value with a parse function (its name is cut here); if the flag "
                "takes a mapping, that function is JSON's")
        refusal.remediation.insert(0, lead.format(flag=flag) + ": give one JSON object as one shell word "
                                   "(`'{\"key\": value}'`) where older releases took `key=value,…`.")
    hit = _CHOICE.search(why)
    if hit is not None:
        _not_a_choice(flag, hit["value"], re.findall(r"'([^']*)'", hit["choices"]), refusal)
    return refusal


def _not_a_choice(flag: str, value: str, choices: list[str], refusal: _Refusal) -> None:
    """A value the release's parser does not list: a slip of one it lists, or one another release has — the
    values of a choice grow with releases (a loader, a parser, a backend added), and docs run ahead of installs."""
    import difflib

    close = difflib.get_close_matches(value, choices, n=1, cutoff=0.75) or \
        [c for c in choices if c.replace("-", "_").lower() == value.replace("-", "_").lower()]
    if close:
        refusal.remediation.insert(0, f"`{value}` is close to `{close[0]}`, one of the values this release lists: "
                                      f"`{flag} {close[0]}`.")
        return
    # (the atlas keeps one help text per flag, not one per release: it cannot say which release added the value)
    refusal.remediation.insert(0, f"`{value}` is not one of this release's values for `{flag}` "
                                  f"({', '.join(choices[:8])}{'…' if len(choices) > 8 else ''}), nor a slip of one: "
                                  "a later release's parser may have it (docs often run ahead of the installed "
                                  "release) — upgrade and check `vllm serve --help` there; or pick one of the values "
                                  "listed.")
    refusal.advice.append("upgrade")


def _ambiguous(flag: str, matches: list[str]) -> _Refusal:
    """argparse took `flag` for an abbreviation of several longer options: this command has no option of that exact
    name (`vllm serve` takes the model as its positional argument, not as `--model`), wherever it came from — the
    command line, or a key of a `--config` file, which becomes a flag of the same name."""
    refusal = _Refusal(title=f"The command line was refused: `{flag}` is no option of this command (argparse read it "
                             f"as the start of {', '.join(matches[:3])})")
    refusal.inputs = [flag]
    refusal.knobs = [flag, "--config"]
    refusal.remediation.append(
        f"This command has no `{flag}` of its own, so argparse read it as an abbreviation and found several "
        f"({', '.join(f'`{m}`' for m in matches[:4])}). Give the full name of the option you mean, or drop `{flag}`"
        + (": `vllm serve` takes the model as its first argument (`vllm serve MODEL`)" if flag == "--model" else "")
        + f". A `{flag.lstrip('-')}:` key in a `--config` YAML file becomes `{flag}` too: remove it there.")
    return refusal


# vLLM's subcommands (`vllm serve`, `vllm chat`, …): given again after a launcher or an image's entrypoint that
# already runs one, argparse sees them as extra positional arguments
_SUBCOMMANDS = frozenset({"serve", "chat", "complete", "bench", "run-batch", "collect-env", "vllm"})
# a shell or an interpreter given as the first argument: a container's command meant to replace the image's
# entrypoint, appended to it instead (`docker run IMAGE /bin/bash -c "…"` on an image whose entrypoint is the server)
_SHELL = re.compile(r"^(?:ba|da|z)?sh$|^python(?:3(?:\.\d+)?)?$")
_DOCKER_DOC = "https://docs.vllm.ai/en/latest/deployment/docker.html"


def _repeated_command(text: str) -> _Refusal | None:
    words = text.split()
    first = words[0].rsplit("/", 1)[-1] if words else ""
    if not words or words[0].startswith("-") or not (first in _SUBCOMMANDS or _SHELL.match(first)):
        return None
    refusal = _Refusal(title=f"The command line was refused: `{' '.join(words[:2])}` given where only options belong")
    if first in _SUBCOMMANDS:
        refusal.remediation.append(
            f"`{words[0]}` arrived as an argument of a command that already runs it: an image's entrypoint or a "
            "launcher adds it (vLLM's own images take the server's options right after the image name: `docker run "
            f"… vllm/vllm-openai:latest --model …`, {_DOCKER_DOC}). Drop it from the container's arguments — give "
            "the model and the flags only — or override the entrypoint.")
    else:
        refusal.remediation.append(
            f"`{words[0]}` — a command meant to run in place of the server — arrived as the server's arguments: the "
            f"image's entrypoint already starts vLLM's server, and what follows the image name is appended to it "
            f"({_DOCKER_DOC}). Give only the server's options after the image name (settings as `-e NAME=value`), or "
            f"replace the entrypoint to run a shell: `docker run --entrypoint {words[0]} IMAGE -c \"…\"`.")
    refusal.advice.append("fix-script")
    return refusal


_REPO_ID = re.compile(r"^[\w.-]{1,96}/[\w.-]{1,96}$")


def _stray_words(text: str, known: dict[str, str]) -> _Refusal | None:
    """Words, not flags, that no argument takes: a flag written as a keyword (`trust_remote_code=True`), or a path
    with a space in it, unquoted, split in two (a path under `AI Models/`)."""
    words = text.split()
    if not words or any(w.startswith("-") for w in words) or len(words) > 6:
        return None
    keywords = [(w, f"--{w.split('=', 1)[0].replace('_', '-')}") for w in words if "=" in w]
    keywords = [(w, flag) for w, flag in keywords if flag in known]
    if keywords:
        refusal = _Refusal(title=f"The command line was refused: `{keywords[0][0]}` is the flag "
                                 f"`{keywords[0][1]}` written as a keyword")
        refusal.remediation.append("Write " + ", ".join(f"`{w}` as `{flag}`" for w, flag in keywords) + " — on the "
                                   "command line a setting is a flag (a switch alone, or the flag and its value); "
                                   "the `name=value` form is the Python API's keyword.")
        refusal.inputs = [flag for _w, flag in keywords]
        refusal.knobs = list(refusal.inputs)
        refusal.advice.append("fix-script")
        return refusal
    pathlike = any("/" in w or "\\" in w for w in words)
    if not pathlike:
        return None  # a bare word (a model name given twice, a value without its flag) says too little alone
    # `org/name` is also a model's id given to a command that takes the model only as `--model`
    repo_id = all(_REPO_ID.match(w) for w in words)
    refusal = _Refusal(title=f"The command line was refused: `{clip(' '.join(words), 80)}` is no argument's value",
                       confidence="low" if repo_id else "medium")
    refusal.remediation.append(
        f"argparse was left with {'a word' if len(words) == 1 else 'words'} no argument takes: the command that "
        "starts vLLM (a script, a service file, a container's arguments) "
        + ("either gave a model's id where the command takes it only as `--model` (the OpenAI server's module, "
           "`python -m vllm.entrypoints.openai.api_server`, has no positional model: write `--model ID`), or split a "
           "path at a space — quote the whole path." if repo_id else
           "split a value at a space — the word is the rest of a path: quote the whole path (the model's, or another "
           "flag's that takes one), or use a path without spaces."))
    refusal.inputs = [words[0]]
    refusal.advice.append("fix-script")
    return refusal


def _one_dash(text: str, known: dict[str, str]) -> _Refusal | None:
    """`-port 8000`: a long option written with one dash, which argparse reads as short options it does not have."""
    flags = [f"--{w}" for w in re.findall(r"(?<![\w-])-([a-z][a-z0-9-]{2,60})\b", text) if f"--{w}" in known][:3]
    if not flags:
        return None
    refusal = _Refusal(title=f"The command line was refused: {', '.join(f[1:] for f in flags)} has one dash, not two")
    refusal.remediation.append("Write " + ", ".join(f"`{f}`" for f in flags) + " with two dashes: argparse reads a "
                               "word after one dash as short options, which vLLM's parser does not have.")
    refusal.inputs, refusal.knobs = list(flags), list(flags)
    return refusal


def _another_parser(flags: list[str], text: str, prog: str = "") -> _Refusal | None:
    """Flags vLLM's server takes, refused all the same: the command ran another parser than `vllm serve`'s (the demo
    `vllm.entrypoints.api_server`, a framework's own launcher) — or, when the line does not name the program, a build
    of vLLM made without them (a development or vendor image)."""
    if not flags or not text.lstrip().startswith("--"):
        return None
    refusal = _Refusal(title=f"The command line was refused: {', '.join(flags)} is a flag of vLLM's OpenAI-compatible "
                             "server, not of the command that ran")
    refusal.remediation.append(
        f"{', '.join(f'`{f}`' for f in flags)} belongs to `vllm serve` (`python -m vllm.entrypoints.openai.api_server`"
        "); the parser that refused it is another entrypoint's — the demo `python -m vllm.entrypoints.api_server`, or "
        "a framework's launcher. Start the OpenAI-compatible server to use it, or leave it out.")
    refusal.inputs, refusal.knobs = list(flags), list(flags)
    refusal.advice.append("fix-script")
    if not prog:
        refusal.confidence = "medium"
        refusal.remediation.append(
            "The line does not name the program: if it was `vllm serve`, the vLLM installed is a build without the "
            f"flag (a development or vendor image) — `vllm serve --help | grep -- {flags[0]}` tells; leave it out "
            "until the image has it.")
    return refusal


# the program argparse names before its refusal (`vllm serve: error: …`, `api_server.py: error: …`)
_PROG = re.compile(r"^(?:usage: \S+ .*?)?(?P<prog>[\w./-]{1,80}(?: [a-z-]{2,20})?): ?error:")


def unknown_flags(atlas: Atlas, text: str, known: dict[str, str], version: str | None,
                  prog: str = "") -> _Refusal | None:
    """The flags of `text` a release's parsers do not have, and what each release says of them."""
    given = re.findall(r"(?<![\w-])(--[a-zA-Z][\w-]*)", text)
    unknown = [f for f in given if f not in known][:3]
    if not unknown:
        refused = [f for f in given if f in known][:3]
        oldest = atlas.releases[0] if atlas.releases else None
        # vLLM's own parser (`vllm`, `vllm serve`), or a release the log does not name whose flags may predate these:
        # the release is the reading, not another program's parser
        newer_flags = version is None and any((span := atlas.flag_span(f)) and span[0] != oldest for f in refused)
        if refused and ((bool(prog) and prog.split()[0] == "vllm") or newer_flags):
            unknown = refused
        else:
            return (_repeated_command(text) or _one_dash(text, known) or _another_parser(refused, text, prog)
                    or _stray_words(text, known))
    where = f"vLLM {version}" if version else f"vLLM {atlas.releases[-1] if atlas.releases else ''}".strip()
    spans = [atlas.flag_span(f) for f in unknown]
    if version is None and any(spans):
        # the release is not known: a flag some releases have is missing from this one, whichever side it lies on
        span = next(s for s in spans if s)
        title = (f"The command line was refused: {', '.join(unknown)} is not a flag of this vLLM "
                 f"(vLLM {span[0]}–{span[1]} have it)")
    else:
        title = f"The command line was refused: {where} has no {', '.join(unknown)}"
    refusal = _Refusal(title=title)
    refusal.inputs = list(unknown)  # the flags the parser refused are the input at fault, whoever typed them
    sampling = [f for f in unknown if f[2:].replace("-", "_") in SAMPLING_FIELDS]
    if sampling:
        # a request's sampling parameter given to the server: the launcher (or the user's command) builds it wrong
        refusal.remediation.append(
            ", ".join(f"`{f}`" for f in sampling) + " is a request's sampling parameter (`SamplingParams`), not a "
            "server flag: send it with each request, or make it the server's default with `--generation-config` / "
            "`--override-generation-config '{\"temperature\": …}'` where the release has them; a launcher that adds "
            "it to `vllm serve` must stop doing so.")
        refusal.advice.append("fix-script")
        refusal.knobs += ["--override-generation-config"]
    for flag in unknown:
        _explain_unknown(atlas, flag, known, version, where, refusal)
    return refusal


def _explain_unknown(atlas: Atlas, flag: str, known: dict[str, str], version: str | None, where: str,
                     refusal: _Refusal) -> None:
    span = atlas.flag_span(flag)
    version = one_release(version)  # `0.22.x` names no side of the flag's first release
    if span is not None:
        first, last = span
        if version and newer(first, version):
            refusal.remediation.append(f"`{flag}` first appears in vLLM {first}: upgrade, or leave it out.")
            refusal.advice.append("upgrade")
        elif version is None:
            gone = (f"; a vLLM newer than {last} no longer has it: leave it out, or use what replaced it (that "
                    "release's notes and `vllm serve --help`)") if last != atlas.releases[-1] else ""
            refusal.remediation.append(f"`{flag}` is a flag of vLLM {first}–{last}. `vllm --version` says which "
                                       f"side you are on: a vLLM older than {first} does not have it yet — upgrade "
                                       f"to {first} or later, or leave it out{gone}.")
            refusal.advice.append("upgrade")
        else:
            refusal.remediation.append(f"`{flag}` was a flag of vLLM {first}–{last}; {where} no longer has it.")
    close = similar_flags(flag, known)
    if close:
        refusal.remediation.append(f"{where} has no `{flag}`; its flags with the same words: " + "; ".join(
            f"`{f}`" + (f" ({clip(known[f], 110)})" if known[f] else "") for f in close) + ".")
        refusal.knobs += [f for f in close if f not in refusal.knobs]
    elif span is None:
        refusal.remediation.append(f"{where} has no `{flag}` (`vllm serve --help` lists the flags).")


def similar_flags(flag: str, known: dict[str, str]) -> list[str]:
    import difflib

    parts = [w for w in flag.lstrip("-").split("-") if w and w not in _COMMON_WORDS]
    words = set(parts)
    sharing = [f for f in known if words & set(f.lstrip("-").split("-"))]

    def rank(f: str) -> tuple[bool, int, float]:
        theirs = [w for w in f.lstrip("-").split("-") if w not in _COMMON_WORDS]
        # the flag's first own word ("lora" of --lora-path) names its subject: flags about it come first
        return (bool(parts) and bool(theirs) and theirs[0] == parts[0], len(words & set(theirs)),
                difflib.SequenceMatcher(None, flag, f).ratio())

    sharing.sort(key=rank, reverse=True)
    return sharing[:5]
