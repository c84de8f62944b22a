"""The reference pages, generated from the code at every build so they cannot drift.

- ``reference/cli.rst``: every verb of ``keystone-bench``, walked from
  ``rally_keystone_bench.cli.build_parser()`` (usage, description, options).
- ``reference/plugins.rst``: every Rally plugin of the ``rally_plugins`` entry
  point, from Rally's own ``get_info()`` (docstring and CONFIG_SCHEMA).
- ``reference/deployments.rst``: the fields of ``Deployment`` and the shipped
  ``deployments/*.yaml`` files.

Run as a script it writes them into doc/source/reference/ without Sphinx:
``python doc/source/_ext/keystone_bench_reference.py``.
"""

from __future__ import annotations

import argparse
import dataclasses
import importlib
import json
import pkgutil
import textwrap
from pathlib import Path

SOURCE = Path(__file__).resolve().parents[1]
ROOT = SOURCE.parents[1]
OUT = SOURCE / "reference"

# What each kind of Rally plugin is called on the page, in page order.
KINDS = [
    ("Scenario", "Scenarios"),
    ("Context", "Contexts"),
    ("SLA", "SLA"),
    ("ScenarioRunner", "Runners"),
    ("TaskExporter", "Exporters"),
    ("Validator", "Validators"),
]


def _title(text: str, char: str, over: bool = False) -> str:
    line = char * max(len(text), 3)
    return f"{line}\n{text}\n{line}\n" if over else f"{text}\n{line}\n"


def _literal(text: str) -> str:
    return "::\n\n" + textwrap.indent(text.rstrip() + "\n", "    ") + "\n"


def _escape(text: str) -> str:
    """Plain text (an argparse help string) made safe for reST."""
    return text.replace("\\", "\\\\").replace("*", "\\*").replace("`", "\\`").replace("|", "\\|")


def _subcommands(parser: argparse.ArgumentParser) -> list[tuple[str, argparse.ArgumentParser]]:
    for action in parser._actions:  # argparse keeps no public list
        if isinstance(action, argparse._SubParsersAction):
            return list(action.choices.items())
    return []


def verbs(parser: argparse.ArgumentParser | None = None, prefix: str = "") -> list[tuple]:
    """Every leaf command: (``"keystone up"``, its parser, its one-line help)."""
    if parser is None:
        from rally_keystone_bench import cli

        parser = cli.build_parser()
    helps: dict[str, str] = {}
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            helps = {a.dest: a.help or "" for a in action._choices_actions}
    found = []
    for name, sub in _subcommands(parser):
        full = f"{prefix} {name}".strip()
        children = verbs(sub, full)
        if children:
            found += [(full, sub, helps.get(name, ""), True)] + children
        else:
            found.append((full, sub, helps.get(name, ""), False))
    return found


def cli_rst() -> str:
    """reference/cli.rst: each verb's usage and options, as argparse prints them."""
    from rally_keystone_bench import cli

    parser = cli.build_parser()
    parser.formatter_class = lambda prog: argparse.HelpFormatter(prog, width=88)
    out = [
        ".. This file is generated from rally_keystone_bench.cli.build_parser() at build time.\n",
        _title("Command line: keystone-bench", "=", over=True),
        _escape(parser.description or "") + "\n",
        "Exit codes of every verb: 0 pass, 1 a verdict failed, 2 bad input or "
        "environment (a one-line reason on stderr), 3 inconclusive (gate), 130/143 "
        "interrupted.\n",
        "Shell completion of verbs, sub-verbs and options: "
        '``eval "$(keystone-bench completion bash)"`` in ``~/.bashrc`` (``zsh`` in '
        "``~/.zshrc``); the script is generated from this parser (:ref:`cli-completion`).\n",
        _literal(parser.format_help()),
    ]
    for full, sub, help_, _has_children in verbs(parser):
        sub.formatter_class = lambda prog: argparse.HelpFormatter(prog, width=88)
        out.append(f".. _cli-{full.replace(' ', '-')}:\n")
        out.append(_title(f"keystone-bench {full}", "-"))
        if help_:
            out.append(_escape(help_[0].upper() + help_[1:]) + ".\n")
        out.append(_literal(sub.format_help()))
    return "\n".join(out)


def plugins() -> list:
    """Our Rally plugins (every class the rally_plugins entry point registers)."""
    from rally.common.plugin import plugin

    import rally_keystone_bench.plugins as package

    for mod in pkgutil.walk_packages(package.__path__, package.__name__ + "."):
        importlib.import_module(mod.name)
    ours = [p for p in plugin.Plugin.get_all() if p.__module__.startswith("rally_keystone_bench.")]
    return sorted(ours, key=lambda p: p.get_name())


def _kind(cls) -> str:
    names = [c.__name__ for c in cls.__mro__]
    for kind, _ in KINDS:
        if kind in names:
            return kind
    return "Other"


def _schema_rows(schema: dict | None) -> list[str]:
    props = (schema or {}).get("properties") or {}
    required = set((schema or {}).get("required") or [])
    rows = []
    for name, spec in props.items():
        bits = []
        if "enum" in spec:
            bits.append(" | ".join(json.dumps(v) for v in spec["enum"]))
        elif "type" in spec:
            bits.append(spec["type"] if isinstance(spec["type"], str) else "/".join(spec["type"]))
        elif "anyOf" in spec:
            kinds = [s.get("type", "?") for s in spec["anyOf"]]
            bits.append(" or ".join(k if isinstance(k, str) else "/".join(k) for k in kinds))
        for key, label in (("minimum", ">="), ("maximum", "<="), ("exclusiveMinimum", ">")):
            if key in spec and not isinstance(spec[key], bool):
                bits.append(f"{label} {spec[key]}")
        if "default" in spec:
            bits.append(f"default {json.dumps(spec['default'])}")
        if name in required:
            bits.append("required")
        desc = " ".join((spec.get("description") or "").split())
        line = f"``{name}`` ({_escape(', '.join(bits))})" if bits else f"``{name}``"
        rows.append(line + "\n" + textwrap.indent(desc or "(no description)", "    ") + "\n")
    return rows


def plugins_rst() -> str:
    """reference/plugins.rst: every plugin's docstring and configuration schema."""
    out = [
        ".. This file is generated from the plugins' docstrings and CONFIG_SCHEMA at build time.\n",
        _title("Rally plugins", "=", over=True),
        "Everything below is found by Rally through the ``rally_plugins`` entry point "
        "(``rally_keystone_bench.plugins``) once the package is installed; "
        "``rally plugin show NAME`` prints the same.\n",
    ]
    by_kind: dict[str, list] = {}
    for p in plugins():
        by_kind.setdefault(_kind(p), []).append(p)
    for kind, heading in [*KINDS, ("Other", "Other plugins")]:
        if kind not in by_kind:
            continue
        out.append(_title(heading, "-"))
        for p in by_kind[kind]:
            info = p.get_info()
            out.append(f".. _plugin-{info['name'].replace('.', '-').replace('_', '-')}:\n")
            out.append(_title(f"{info['name']}", "~"))
            out.append(f"Platform ``{info['platform']}``; module ``{info['module']}``.\n")
            if info.get("title"):
                out.append(info["title"] + "\n")
            if info.get("description"):
                out.append(info["description"] + "\n")
            rows = _schema_rows(info.get("schema"))
            if rows:
                label = "Arguments" if kind == "Scenario" else "Configuration"
                out.append(f"{label}:\n")
                out.extend(rows)
    return "\n".join(out)


def deployments_rst() -> str:
    """reference/deployments.rst: Deployment's fields and the shipped deployment files."""
    import yaml

    from rally_keystone_bench.deploy.deployment import Deployment

    out = [
        ".. This file is generated from deploy.deployment.Deployment and deployments/*.yaml.\n",
        _title("Deployment settings and files", "=", over=True),
        "A deployment file (``keystone-bench matrix --deployments FILE``) maps a name "
        "to these fields of ``rally_keystone_bench.deploy.deployment.Deployment``; "
        "any other key exits 2 naming it.\n",
    ]
    defaults = Deployment()
    for field in dataclasses.fields(Deployment):
        value = getattr(defaults, field.name, None)
        out.append(f"``{field.name}``\n    default ``{value!r}``\n")
    for path in sorted((ROOT / "deployments").glob("*.yaml")):
        out.append(_title(f"deployments/{path.name}", "-"))
        data = yaml.safe_load(path.read_text()) or {}
        for name, settings in data.items():
            pairs = ", ".join(f"{k}={v}" for k, v in (settings or {}).items()) or "defaults"
            out.append(f"``{name}``\n    {_escape(pairs)}\n")
    return "\n".join(out)


PAGES = {"cli.rst": cli_rst, "plugins.rst": plugins_rst, "deployments.rst": deployments_rst}


def write(out: Path = OUT) -> list[Path]:
    """Write the generated pages into OUT; return their paths."""
    out.mkdir(parents=True, exist_ok=True)
    written = []
    for name, make in PAGES.items():
        path = out / name
        text = make()
        if not path.exists() or path.read_text() != text:
            path.write_text(text)
        written.append(path)
    return written


def setup(app):
    app.connect("builder-inited", lambda app: write())
    return {"parallel_read_safe": True, "parallel_write_safe": True}


if __name__ == "__main__":
    for path in write():
        print(path)
