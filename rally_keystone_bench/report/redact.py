"""What a written record may say about a secret: never its value.

Every JSON the tool writes of its own settings (``load.json``, ...) goes
through :func:`redact`: the password of any ``scheme://user:password@host``
URL becomes ``***`` and a value under a key naming a password or a secret is
replaced whole.
"""

from __future__ import annotations

from typing import Any

from rally_keystone_bench.errors import mask_urls

MASK = "***"
_SECRET_KEYS = ("password", "secret", "token")


def redact(value: Any) -> Any:
    """VALUE with every URL password masked and every password-like field replaced."""
    if isinstance(value, str):
        return mask_urls(value)
    if isinstance(value, dict):
        return {
            k: (MASK if _is_secret(k) and v is not None else redact(v)) for k, v in value.items()
        }
    if isinstance(value, (list, tuple)):
        return [redact(v) for v in value]
    return value


def _is_secret(key: object) -> bool:
    name = str(key).lower()
    return any(word in name for word in _SECRET_KEYS) and "rounds" not in name
