"""The import rules between layers (doc/source/architecture.rst), enforced.

Rally imports every module under plugins/ when it loads plugins: they may
use clients/, stats, results, errors and (the exporter only) report/; never
the verbs, the CLI, capacity, compare, deploy/, driver/ or engines/. Nothing
imports a verb but the CLI.
"""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[2] / "rally_keystone_bench"
NAME = "rally_keystone_bench"
PLUGINS_MAY_USE = ("clients", "stats", "results", "errors", "plugins")
EXPORTER_MAY_ALSO_USE = ("report",)


def module_name(path: Path) -> str:
    rel = path.relative_to(PACKAGE.parent).with_suffix("")
    parts = list(rel.parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def imports_of(path: Path) -> set[str]:
    """Every rally_keystone_bench module PATH imports, at the top or inside a function."""
    tree = ast.parse(path.read_text(), str(path))
    package = module_name(path).split(".")
    if path.name != "__init__.py":
        package = package[:-1]
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                base = ".".join(package[: len(package) - node.level + 1] + ([base] if base else []))
            found.add(base)
            found.update(f"{base}.{a.name}" for a in node.names)
    return {m for m in found if m == NAME or m.startswith(NAME + ".")}


def layer(module: str) -> str:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else ""


def modules_under(folder: str) -> list[Path]:
    return sorted((PACKAGE / folder).rglob("*.py"))


@pytest.mark.parametrize("path", modules_under("plugins"), ids=lambda p: p.name)
def test_plugins_import_only_what_rally_may_load(path):
    allowed = PLUGINS_MAY_USE + (EXPORTER_MAY_ALSO_USE if path.name == "exporter.py" else ())
    # "rally_keystone_bench.clients" itself and its submodules; a bare package import is fine.
    wrong = sorted(m for m in imports_of(path) if layer(m) and layer(m) not in allowed)
    assert wrong == [], f"{path.relative_to(PACKAGE)} imports {wrong}"


# What the verbs share, not verbs themselves: their options, names a user
# gives (matrix rows) and which option applies to which target and engine.
SHARED_VERB_MODULES = ("options", "names", "applicability")


def test_no_module_imports_a_verb_but_the_cli():
    offenders = []
    for path in sorted(PACKAGE.rglob("*.py")):
        if path.name == "cli.py" and path.parent == PACKAGE:
            continue
        this = module_name(path)
        for m in imports_of(path):
            parts = m.split(".")
            if len(parts) >= 3 and parts[1] == "verbs" and parts[2] not in SHARED_VERB_MODULES:
                if not this.startswith(f"{NAME}.verbs.") or m.split(".")[:3] != this.split(".")[:3]:
                    offenders.append(f"{this} -> {m}")
    assert offenders == []


def test_importing_a_scenario_pulls_in_no_tool_module():
    """What Rally pays when it loads our plugins: no CLI, verb, capacity, deploy, report."""
    proc = subprocess.run(
        [sys.executable, "-X", "importtime", "-c", f"import {NAME}.plugins.scenarios.tokens"],
        capture_output=True,
        text=True,
        check=True,
    )
    loaded = {
        line.rsplit("|", 1)[1].strip()
        for line in proc.stderr.splitlines()
        if line.startswith("import time:") and "|" in line
    }
    ours = sorted(m for m in loaded if m.startswith(NAME))
    forbidden = ("cli", "verbs", "capacity", "compare", "deploy", "driver", "engines", "report")
    wrong = [m for m in ours if layer(m) in forbidden]
    assert f"{NAME}.plugins.scenarios.tokens" in ours
    assert wrong == []


def test_every_module_imports_first_without_a_cycle():
    """Each module imported first, in a clean module table: an import cycle fails here.

    (deploy/servers and deploy/nginx imported each other at the top; whichever
    a program imported first decided whether it started.)
    """
    names = sorted(module_name(p) for p in PACKAGE.rglob("*.py") if p.name != "__main__.py")
    code = (
        "import importlib, sys, traceback\n"
        f"names = {names!r}\n"
        "base = set(sys.modules)\n"
        "for name in names:\n"
        "    for loaded in [m for m in sys.modules if m not in base]:\n"
        # Rally refuses a plugin class defined twice: plugins/ is imported once.
        f"        if loaded.startswith({NAME!r}) and '.plugins' not in loaded:\n"
        "            del sys.modules[loaded]\n"
        "    try:\n"
        "        importlib.import_module(name)\n"
        "    except Exception as exc:\n"
        "        print(f'{name}: {type(exc).__name__}: {exc}')\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert proc.stdout == ""
