"""What an iteration's error text may show, and the HTTP status it names.

Rally keeps each failed iteration's error type and message; a message can
carry a token or a request id. ``shorten_secrets`` cuts token-like runs to
their first 8 characters and masks request ids before a message is shown or
written; ``redact`` does the same over a whole structure and hides entries
whose key names a password, secret or token; ``http_status`` reads the
status a message or an exception type names, so errors group by it.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

_HTTP_RE = re.compile(r"\bHTTP[ /:]*(?:1\.[01] )?([1-5]\d\d)\b")
_STATUS_RE = re.compile(r"\b(?:status(?: code)?|code)[ :=]+([1-5]\d\d)\b", re.I)
_EXC_STATUS = {
    "BadRequest": 400,
    "Unauthorized": 401,
    "Forbidden": 403,
    "NotFound": 404,
    "Conflict": 409,
    "InternalServerError": 500,
    "HttpServerError": 500,
    "BadGateway": 502,
    "ServiceUnavailable": 503,
    "GatewayTimeout": 504,
}
# A token (Fernet tokens are ~180 characters of base64url) or any long secret-like
# run of characters; shortened to its first 8 characters wherever it is shown.
_TOKEN_RE = re.compile(r"[A-Za-z0-9_\-]{32,}={0,2}")
_REQ_ID_RE = re.compile(r"req-[0-9a-f\-]{36}")
_SECRET_KEY_RE = re.compile(r"pass(word)?|secret|token|credential|key$", re.I)


def shorten_secrets(text: str, limit: int = 300) -> str:
    """``text`` with token-like strings cut to 8 characters and request ids masked."""
    text = _REQ_ID_RE.sub("req-…", text)
    text = _TOKEN_RE.sub(lambda m: m.group(0)[:8] + "…", text)
    return text if len(text) <= limit else text[: limit - 1] + "…"


def redact(value: Any) -> Any:
    """A copy of ``value`` with password, secret and token entries hidden."""
    if isinstance(value, Mapping):
        return {
            k: ("***" if isinstance(k, str) and _SECRET_KEY_RE.search(k) else redact(v))
            for k, v in value.items()
        }
    if isinstance(value, list | tuple):
        return [redact(v) for v in value]
    if isinstance(value, str):
        return shorten_secrets(value, limit=10_000)
    return value


def http_status(error_type: str, message: str) -> int | None:
    """The HTTP status an iteration error names, if any."""
    m = _HTTP_RE.search(message) or _STATUS_RE.search(message)
    if m:
        return int(m.group(1))
    return _EXC_STATUS.get(error_type)
