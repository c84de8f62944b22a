"""Any keystone.conf setting: ``--set SECTION.OPTION=VALUE`` and a deployment's ``conf:``.

Settings are kept as one flat mapping, ``{"section.option": "value"}``. They
are checked against the option registry of the Keystone that will run them
(read once per environment by a small script run with that environment's
Python), then written into keystone.conf over what the deployment renders.

    settings = normalise(["token.provider=jws"], "--set")
    check(settings, registry_of(venv, spec))     # BenchError naming the first bad one
    text = apply(rendered_conf, settings)
"""

from __future__ import annotations

import difflib
import json
import os
import subprocess
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from rally_keystone_bench import writer
from rally_keystone_bench.deploy import files
from rally_keystone_bench.errors import BenchError

# The option lists oslo-config-generator reads for Keystone's sample keystone.conf.
NAMESPACES = (
    "keystone",
    "oslo.cache",
    "oslo.log",
    "oslo.messaging",
    "oslo.policy",
    "oslo.db",
    "oslo.middleware",
    "osprofiler",
)
# Options that name a driver: their choices are the entry points installed.
DRIVERS = {
    "token.provider": "keystone.token.provider",
    "identity.driver": "keystone.identity",
    "assignment.driver": "keystone.assignment",
    "resource.driver": "keystone.resource",
    "catalog.driver": "keystone.catalog",
    "revoke.driver": "keystone.revoke",
    "credential.provider": "keystone.credential.provider",
}
# Settings the deployment itself owns: where to set them instead.
OWNED = {
    "database.connection": "--db and --db-url",
    "DEFAULT.log_file": "the run directory (keystone.log)",
}
# A value of an option whose name ends so is shown as *** in a deployment's description.
SECRET_ENDINGS = ("password", "secret", "connection", "transport_url", "_key", "backend_argument")
REGISTRY_FILE = "keystone-bench-conf-registry.json"
TRUE = ("true", "1", "on", "yes")
FALSE = ("false", "0", "off", "no")


def parse(text: str, where: str = "--set") -> tuple[str, str]:
    """``SECTION.OPTION=VALUE`` as ("section.option", "value")."""
    key, sep, value = str(text).partition("=")
    key = key.strip()
    section, dot, option = key.partition(".")
    if not sep or not dot or not section or not option:
        raise BenchError(f"{where}: {text!r} is not SECTION.OPTION=VALUE")
    return f"{section}.{option}", _scalar(value.strip(), f"{where}: {key}")


def normalise(value: Any, where: str) -> dict[str, str]:
    """Settings from a list of SECTION.OPTION=VALUE, or a mapping.

    A mapping is either ``{section: {option: value}}`` (a deployment file's
    ``conf:``) or ``{"section.option": value}``.
    """
    if value is None:
        return {}
    if isinstance(value, str):
        value = [value]
    if isinstance(value, list | tuple):
        return dict(parse(item, where) for item in value)
    if not isinstance(value, Mapping):
        raise BenchError(f"{where} must be a mapping of SECTION: {{OPTION: VALUE}}, not {value!r}")
    settings: dict[str, str] = {}
    for key, item in value.items():
        if isinstance(item, Mapping):
            for option, inner in item.items():
                settings[f"{key}.{option}"] = _scalar(inner, f"{where}: {key}.{option}")
        else:
            name, _ = parse(f"{key}=", where)
            settings[name] = _scalar(item, f"{where}: {key}")
    return settings


def _scalar(value: Any, what: str) -> str:
    """VALUE as keystone.conf text: a word, a number, a boolean, or a list (comma-joined)."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, list | tuple):
        return ",".join(_scalar(v, what) for v in value)
    if isinstance(value, Mapping) or value is None:
        raise BenchError(f"{what}: {value!r} is not a value")
    text = str(value)
    if "\n" in text or "\r" in text:
        raise BenchError(f"{what}: a value must be one line")
    return text


def split(values: Mapping[str, Any], shared: Iterable[str] = ()) -> dict[str, Any]:
    """KEY=VALUE pairs of one side: keys with a dot become its ``conf``.

    SHARED settings (``--set`` given to both sides) come first; the side's own win.
    """
    out = {k: v for k, v in values.items() if "." not in k}
    conf = normalise(list(shared), "--set")
    conf.update({k: _scalar(v, k) for k, v in values.items() if "." in k})
    if conf:
        out["conf"] = conf
    return out


def check(settings: Mapping[str, str], registry: Mapping[str, Mapping[str, dict]]) -> None:
    """Raise BenchError naming the first setting REGISTRY does not know or accept."""
    for key, value in settings.items():
        section, _, option = key.partition(".")
        if key in OWNED:
            raise BenchError(f"--set {key}: the deployment sets it; use {OWNED[key]}")
        if section not in registry:
            raise BenchError(f"--set {key}: unknown section [{section}]{_close(section, registry)}")
        options = registry[section]
        if option not in options:
            raise BenchError(
                f"--set {key}: [{section}] has no option {option!r}{_close(option, options)}"
            )
        reason = value_problem(options[option], value)
        if reason:
            raise BenchError(f"--set {key}={value}: {reason}")


def _close(word: str, known: Iterable[str]) -> str:
    near = difflib.get_close_matches(word, list(known), n=1)
    return f" (did you mean {near[0]}?)" if near else ""


def value_problem(kind: Mapping[str, Any], value: str) -> str | None:
    """Why VALUE is not a value of an option of KIND (a registry entry); None if it is."""
    name = kind.get("type", "String")
    if name == "Boolean":
        return None if value.lower() in TRUE + FALSE else "must be true or false"
    if name in ("Integer", "Port", "Float"):
        reason = _number_problem(kind, value, float if name == "Float" else int)
        if reason:
            return reason
    elif name == "List" and kind.get("item") == "Integer":
        for item in filter(None, (v.strip() for v in value.split(","))):
            if _number_problem({}, item, int):
                return f"{item!r} is not an integer"
    elif name == "Dict":
        bad = [i for i in value.split(",") if i.strip() and ":" not in i]
        if bad:
            return f"{bad[0].strip()!r} is not KEY:VALUE"
    choices = kind.get("choices")
    if choices and name not in ("List", "Boolean") and value not in [str(c) for c in choices]:
        return "must be one of " + ", ".join(str(c) for c in choices if c is not None)
    return None


def _number_problem(kind: Mapping[str, Any], value: str, number: type) -> str | None:
    try:
        found = number(value)
    except ValueError:
        return "must be an integer" if number is int else "must be a number"
    low, high = kind.get("min"), kind.get("max")
    if low is not None and found < low:
        return f"must be at least {low}"
    if high is not None and found > high:
        return f"must be at most {high}"
    return None


def registry_of(venv: Path, fresh: bool = False) -> dict[str, dict[str, dict]]:
    """Keystone's option registry, read with VENV's Python (kept in VENV once read).

    FRESH reads it again (a local checkout's options change as it is edited).
    """
    cached = venv / REGISTRY_FILE
    if cached.exists() and not fresh:
        return json.loads(cached.read_text())
    script = files.render(
        "keystone_bench_conf_registry.py", namespaces=list(NAMESPACES), drivers=DRIVERS
    )
    proc = subprocess.run(
        [str(venv / "bin" / "python"), "-c", script],
        capture_output=True,
        text=True,
        env={k: v for k, v in os.environ.items() if k != "PYTHONPATH"},
    )
    if proc.returncode != 0:
        last = (proc.stderr.strip().splitlines() or ["no output"])[-1]
        raise BenchError(f"could not read Keystone's options in {venv}: {last}")
    registry = json.loads(proc.stdout)
    if not fresh:
        writer.write_text(cached, json.dumps(registry, sort_keys=True))
    return registry


def apply(text: str, settings: Mapping[str, str]) -> str:
    """keystone.conf TEXT with SETTINGS written over it: replaced in place, else added."""
    lines = text.splitlines()
    for key, value in settings.items():
        section, _, option = key.partition(".")
        start = _section_start(lines, section)
        if start is None:
            lines += ["", f"[{section}]", f"{option} = {value}"]
            continue
        end = next(
            (i for i in range(start + 1, len(lines)) if lines[i].startswith("[")), len(lines)
        )
        for i in range(start + 1, end):
            if lines[i].split("=", 1)[0].strip() == option and "=" in lines[i]:
                lines[i] = f"{option} = {value}"
                break
        else:
            lines.insert(start + 1, f"{option} = {value}")
    return "\n".join(lines) + "\n"


def _section_start(lines: list[str], section: str) -> int | None:
    header = f"[{section}]"
    return next((i for i, line in enumerate(lines) if line.strip() == header), None)


def masked(settings: Mapping[str, str]) -> dict[str, str]:
    """SETTINGS with every secret's value (a password, a connection URL, a key) as ***."""
    return {
        key: "***" if key.partition(".")[2].lower().endswith(SECRET_ENDINGS) else value
        for key, value in settings.items()
    }


def describe(settings: Mapping[str, str]) -> str:
    """The settings for a deployment's description; secrets shown as ***."""
    return " ".join(f"{key}={value}" for key, value in sorted(masked(settings).items()))
