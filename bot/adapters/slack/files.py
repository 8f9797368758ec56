"""A file attached to a Slack message, read as a log: files.info, then its url_private_download with the bot
token as `Authorization: Bearer`, capped in size and refused unless it is text. Runs in a job, never before an ack.
"""

from __future__ import annotations

import logging
import re
from typing import Any
from urllib.parse import urlsplit

import httpx
from slack_sdk import WebClient
from slack_sdk.errors import SlackApiError

from bot.app.diagnosis.paste import PastedFile
from bot.redact import Redactor

log = logging.getLogger("specops.slack.files")

MAX_FILE_BYTES = 20 * 1024 * 1024
TEXT_MIMETYPES = frozenset({"application/json", "application/x-ndjson", "application/jsonl", "application/x-yaml",
                            "application/yaml", "application/xml", "application/x-sh", "application/x-log"})
# Slack's own `filetype` for files it took for text, when the mimetype says nothing (application/octet-stream)
TEXT_FILETYPES = frozenset({"text", "log", "json", "yaml", "shell", "python", "markdown", "csv", "tsv", "xml"})
_UNSAFE = re.compile(r"[<>&`*_~|\n\r\t]")
# a URL is printable ASCII without spaces (RFC 3986); httpx raises InvalidURL (not an HTTPError) on the rest, and
# urlsplit drops tabs and newlines silently, so a forged address is refused here, before either sees it
_URL = re.compile(r"[!-~]{1,4096}")


class FileRefused(Exception):
    """A file we do not read; the message is safe to post."""


def _name(file: dict[str, Any], redactor: Redactor | None = None) -> str:
    """The file's name as a message may show it: redacted first (a token in a name — `hf_….log` — no longer
    matches any rule once its `_` is escaped), then printable and free of Slack markup, then cut."""
    raw = (redactor or Redactor()).text(str(file.get("name") or file.get("title") or file.get("id") or "the file"))
    clean = _UNSAFE.sub("?", "".join(ch for ch in raw if ch.isprintable()))
    return clean[:80] + ("…" if len(clean) > 80 else "")


def _mb(n: int) -> str:
    return f"{n / 1024 / 1024:.1f} MB" if n >= 1024 * 1024 else f"{n} bytes"


def is_text(mimetype: str, filetype: str) -> bool:
    mimetype = mimetype.split(";")[0].strip().lower()
    if mimetype.startswith("text/") or mimetype in TEXT_MIMETYPES:
        return True
    return mimetype in ("", "application/octet-stream") and filetype.lower() in TEXT_FILETYPES


class SlackFiles:
    def __init__(self, client: WebClient, token: str | None, max_bytes: int = MAX_FILE_BYTES,
                 timeout: float = 30.0, redactor: Redactor | None = None) -> None:
        self.client = client
        self.redactor = redactor
        self.token = token
        self.max_bytes = max_bytes
        self.timeout = timeout

    def _allowed(self, url: str) -> bool:
        """The bot token goes to Slack's file hosts only (or to the Web API's own host: a proxy, an emulator)."""
        try:
            parts, api = urlsplit(url), urlsplit(self.client.base_url)
        except ValueError:  # an unbalanced `[` in the host
            return False
        if (parts.scheme, parts.netloc) == (api.scheme, api.netloc):
            return True
        host = (parts.hostname or "").lower()
        return parts.scheme == "https" and (host == "slack.com" or host.endswith(".slack.com"))

    def read(self, file: dict[str, Any]) -> PastedFile:
        """The file's text. Raises FileRefused with a message for the thread, whatever went wrong: the files
        come from a user and Slack's answers about them are not ours to trust."""
        try:
            return self._read(file)
        except FileRefused:
            raise
        except Exception as exc:
            log.exception("reading an attached file failed")
            name = _name(file, self.redactor)
            raise FileRefused(f"cannot read the attached file `{name}`: {type(exc).__name__}") from None

    def _read(self, file: dict[str, Any]) -> PastedFile:
        file_id = str(file.get("id") or "")
        name = _name(file, self.redactor)
        if not re.fullmatch(r"F[A-Z0-9]{2,30}", file_id):
            raise FileRefused(f"`{name}`: not a file specops can read (no file id)")
        try:
            info = self.client.files_info(file=file_id).get("file") or {}
        except SlackApiError as exc:
            error = exc.response.get("error")
            hint = " (the app needs the `files:read` scope)" if error in ("missing_scope", "not_allowed_token_type") \
                else ""
            raise FileRefused(f"`{name}`: Slack would not say what the file is ({error}){hint}") from None
        except Exception as exc:
            raise FileRefused(f"`{name}`: Slack could not be asked about the file ({type(exc).__name__})") from None
        name = _name(info, self.redactor) if info.get("name") else name
        mimetype, filetype = str(info.get("mimetype") or ""), str(info.get("filetype") or "")
        size = info.get("size") or 0
        if not isinstance(size, int) or isinstance(size, bool):
            raise FileRefused(f"cannot read the attached file `{name}`: Slack gave its size as "
                              f"{_UNSAFE.sub('?', str(size))[:20]!r}, not a number")
        if size > self.max_bytes:
            raise FileRefused(f"`{name}` is {_mb(size)}: specops reads attached logs up to {_mb(self.max_bytes)}. "
                              "Attach the last part of the log (e.g. `tail -n 20000`).")
        if not is_text(mimetype, filetype):
            kind = _UNSAFE.sub("?", mimetype or filetype or "unknown")[:60]
            raise FileRefused(f"`{name}` is not a text file ({kind}): attach the log as plain text (not compressed, "
                              "not a screenshot).")
        url = str(info.get("url_private_download") or info.get("url_private") or "")
        if url and not _URL.fullmatch(url):
            raise FileRefused(f"cannot read the attached file `{name}`: its download address holds a space or a "
                              "control character")
        if not url or not self._allowed(url):
            raise FileRefused(f"`{name}`: Slack gave no download address specops trusts")
        data = self._download(url, name)
        if b"\x00" in data[:65536]:
            raise FileRefused(f"`{name}` holds binary data, not a text log: attach the log as plain text.")
        return PastedFile(name, data.decode("utf-8", errors="replace"))

    def _download(self, url: str, name: str) -> bytes:
        headers = {"Authorization": f"Bearer {self.token}"} if self.token else {}
        chunks: list[bytes] = []
        got = 0
        try:
            with httpx.stream("GET", url, headers=headers, timeout=self.timeout, follow_redirects=True) as resp:
                if resp.status_code != 200:
                    raise FileRefused(f"`{name}`: the download failed (HTTP {resp.status_code})")
                if resp.headers.get("content-type", "").lower().startswith("text/html"):
                    # what Slack sends a token it does not let read the file: its login page
                    raise FileRefused(f"`{name}`: Slack answered with a web page, not the file (the app needs the "
                                      "`files:read` scope)")
                for chunk in resp.iter_bytes():
                    got += len(chunk)
                    if got > self.max_bytes:
                        raise FileRefused(f"`{name}` is over {_mb(self.max_bytes)}: specops reads attached logs up "
                                          f"to {_mb(self.max_bytes)}. Attach the last part of the log.")
                    chunks.append(chunk)
        except (httpx.HTTPError, httpx.InvalidURL) as exc:
            raise FileRefused(f"`{name}`: the download failed ({type(exc).__name__})") from None
        return b"".join(chunks)
