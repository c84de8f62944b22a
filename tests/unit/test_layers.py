"""The rooms of the package and their import rules (doc/source/architecture.rst), enforced.

Rally imports every module under plugins/ when it loads plugins: they may
use clients/, verdicts/, errors and (the exporter only) report/; never the
verbs, the CLI, deploy/, driver/ or engines/. Nothing imports a verb but
the CLI. verdicts/ imports only itself and errors, and no Rally, oslo or
HTTP library comes with it. The driver (Rally's prober) and the engines
(Locust's) import neither each other nor a verb. Only report/ renders an
output, and every file is written through writer.py (the bottom floor). No
import circles; no module over 600 lines, no function over 80.
"""

from __future__ import annotations

import ast
import collections
import json
import subprocess
import sys
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[2] / "rally_keystone_bench"
NAME = "rally_keystone_bench"
PLUGINS_MAY_USE = ("clients", "verdicts", "errors", "plugins", "writer")
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
# gives (matrix rows) and which option applies to which target and engine;
# gate_options: the gate's option declarations, apart from the gate's run;
# recording: what a verb hands the results store; groups: the option groups verbs compose.
SHARED_VERB_MODULES = ("options", "names", "applicability", "gate_options", "recording", "groups")


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
    forbidden = ("cli", "verbs", "deploy", "driver", "engines", "report")
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


# -- the verdict layer ------------------------------------------------------------
@pytest.mark.parametrize("path", modules_under("verdicts"), ids=lambda p: p.name)
def test_verdicts_import_only_themselves_and_errors(path):
    wrong = sorted(m for m in imports_of(path) if layer(m) not in ("verdicts", "errors"))
    assert wrong == [], f"{path.relative_to(PACKAGE)} imports {wrong}"


def test_importing_the_verdicts_pulls_in_no_rally_oslo_or_http():
    names = [module_name(p) for p in modules_under("verdicts")]
    code = (
        "import importlib, json, sys\n"
        f"for name in {names!r}:\n"
        "    importlib.import_module(name)\n"
        "print(json.dumps(sorted(sys.modules)))\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    loaded = json.loads(proc.stdout)
    assert f"{NAME}.verdicts.stats" in loaded  # the check saw the package
    heavy = ("rally", "oslo_log", "oslo_config", "requests", "keystoneauth1", "urllib3", "jinja2")
    wrong = [m for m in loaded if m.split(".")[0] in heavy]
    assert wrong == []


# "" and "__name__": the package's own name (report and engines print it).
ROOM_MAY_USE = {
    "clients": ("clients", "errors"),
    "deploy": ("deploy", "clients", "errors", "writer", ""),  # "": from the package, writer
    # the results store and its records, from values the verbs hand over (which
    # Keystone ran is deploy/'s answer, given by the verb); "version" (the tool's
    # own, a leaf on importlib.metadata) goes into every record
    "history": ("history", "errors", "version"),
    "report": ("report", "verdicts", "errors", "version", "writer", "", "__name__"),
    # Rally's side of the tool (its prober too; "" is `from rally_keystone_bench
    # import shipped`): plugins/ for the runners' progress protocol only. Never
    # an engine, a verb or the CLI.
    "driver": (
        "driver",
        "deploy",
        "clients",
        "verdicts",
        "report",
        "plugins",
        "errors",
        "shipped",
        "boundary",
        "procstat",
        "writer",
        "",
    ),
    # load engines beyond Rally: they drive load as driver/ does, and like it call
    # report/ for what they write (the Locust report, built from the master's raw
    # samples on the load host); never the driver, a verb or the CLI
    "engines": (
        "engines",
        "clients",
        "verdicts",
        "report",
        "errors",
        "writer",
        "",
        "__name__",
    ),  # and the package's name
}


@pytest.mark.parametrize(
    "path",
    [p for room in ROOM_MAY_USE for p in modules_under(room)],
    ids=lambda p: str(p.relative_to(PACKAGE)),
)
def test_lower_rooms_import_only_what_lies_below(path):
    allowed = ROOM_MAY_USE[str(path.relative_to(PACKAGE)).split("/")[0]]
    wrong = sorted(m for m in imports_of(path) if layer(m) not in allowed)
    assert wrong == [], f"{path.relative_to(PACKAGE)} imports {wrong}"


# -- one writer -------------------------------------------------------------------
# Every file the package writes goes through rally_keystone_bench/writer.py (atomic text,
# bytes and JSON, owner-only files, streams, temporary directories). It lies on the bottom
# floor, beside errors.py: deploy/ may not import report/, and both write through it
# (deploy/files.py renders a deployment's files into it).
WRITER = PACKAGE / "writer.py"
SHUTIL_WRITES = {"copy", "copy2", "copyfile", "copyfileobj", "copytree", "move"}
TEMPFILE_WRITES = {
    "mkstemp", "mkdtemp", "NamedTemporaryFile", "TemporaryFile", "SpooledTemporaryFile",
    "TemporaryDirectory",
}  # fmt: skip
OS_WRITES = {"open", "fdopen", "replace", "rename", "link", "symlink", "mkfifo", "truncate"}
WRITING_MODULES = {"shutil": SHUTIL_WRITES, "tempfile": TEMPFILE_WRITES, "os": OS_WRITES}
# A Path's methods that make or move a file (str has none of these names)
PATH_WRITES = ("write_text", "write_bytes", "dump", "touch", "rename", "symlink_to", "hardlink_to")


def _mode(node: ast.Call, position: int) -> str | None:
    """An open() call's mode: a constant, "?" when computed, None when not given (read)."""
    given = next((k.value for k in node.keywords if k.arg == "mode"), None)
    if given is None and len(node.args) > position:
        given = node.args[position]
    if given is None:
        return None
    return given.value if isinstance(given, ast.Constant) else "?"


def writes_of(path: Path) -> list[str]:
    """Each way PATH writes a file itself: .write_text()/.write_bytes() (but the writer's),
    json.dump(), open(.., "w"/"a"/"x"/"+"), os.open, os.fdopen, os.replace and the like, a
    Path's touch()/rename()/symlink_to(), shutil's copies, tempfile's files and directories,
    and importing one of those by name."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.ImportFrom) and node.module in WRITING_MODULES:
            names = sorted({a.name for a in node.names} & WRITING_MODULES[node.module])
            found += [f"from {node.module} import {n} line {node.lineno}" for n in names]
        if not isinstance(node, ast.Call):
            continue
        f = node.func
        name = f.attr if isinstance(f, ast.Attribute) else getattr(f, "id", "")
        owner = getattr(f.value, "id", None) if isinstance(f, ast.Attribute) else None
        if owner == "writer":
            continue  # the one writer
        if owner in WRITING_MODULES and name in WRITING_MODULES[owner]:
            found.append(f"{owner}.{name}() line {node.lineno}")
        elif name in PATH_WRITES:
            found.append(f"{name}() line {node.lineno}")
        elif name == "open":
            # open(path, mode), io.open(path, mode): a mode computed counts as writing; a
            # Path's .open(mode) (not Store.open(url)): a constant mode
            by_path = isinstance(f, ast.Attribute) and owner not in ("io", "codecs", "builtins")
            mode = _mode(node, 0 if by_path else 1)
            if mode == "?" and by_path:
                mode = None
            if mode is not None and (mode == "?" or any(c in mode for c in "wax+")):
                found.append(f"open(.., {mode!r}) line {node.lineno}")
    return sorted(found, key=lambda said: int(said.rsplit(" ", 1)[1]))


@pytest.mark.parametrize(
    "path",
    [p for p in sorted(PACKAGE.rglob("*.py")) if p != WRITER],
    ids=lambda p: str(p.relative_to(PACKAGE)),
)
def test_only_the_writer_writes_a_file(path):
    assert writes_of(path) == [], f"{path.relative_to(PACKAGE)}: write through writer.py"


def test_the_writer_imports_nothing_of_the_package():
    """The bottom floor: every room may use it, so it uses none."""
    assert imports_of(WRITER) == set()


def test_the_writer_check_sees_every_way_of_writing(tmp_path):
    sample = tmp_path / "sample.py"
    sample.write_text(
        "import json, os, shutil, tempfile\n"
        'Path("x").write_text(json.dumps(1))\n'
        'open("y", "w")\n'
        'open("y", mode="ab")\n'
        "json.dump(doc, out)\n"
        'shutil.copyfile("a", "b")\n'
        'fd = os.open("k", os.O_WRONLY)\n'
        'os.fdopen(fd, "w")\n'
        'tempfile.TemporaryDirectory(prefix="t")\n'
        'Path("z").open("a")\n'
        "from tempfile import mkstemp\n"
        'writer.write_text("ok", "")\n'
        'open("r")\n'
        "tempfile.gettempdir()\n"
        'Path("b").write_bytes(b"")\n'
        'Path("c").touch()\n'
        'wheel.rename(wheels / "w")\n'
        'os.replace("d", "e")\n'
        '"text".replace("a", "b")\n'
    )
    assert writes_of(sample) == [
        "write_text() line 2",
        "open(.., 'w') line 3",
        "open(.., 'ab') line 4",
        "dump() line 5",
        "shutil.copyfile() line 6",
        "os.open() line 7",
        "os.fdopen() line 8",
        "tempfile.TemporaryDirectory() line 9",
        "open(.., 'a') line 10",
        "from tempfile import mkstemp line 11",
        "write_bytes() line 15",
        "touch() line 16",
        "rename() line 17",
        "os.replace() line 18",
    ]


# -- only report/ renders an output -------------------------------------------------
NOT_RENDERERS = ("verdicts", "verbs", "cli", "history")


@pytest.mark.parametrize(
    "path",
    [p for room in NOT_RENDERERS for p in sorted(PACKAGE.glob(f"{room}/**/*.py"))]
    + [PACKAGE / "cli.py"],
    ids=lambda p: str(p.relative_to(PACKAGE)),
)
def test_only_report_renders_outputs(path):
    tree = ast.parse(path.read_text(), str(path))
    rendered = [
        n.lineno
        for n in ast.walk(tree)
        if isinstance(n, ast.Call) and getattr(n.func, "attr", "") == "get_template"
    ]
    assert rendered == [], f"{path.relative_to(PACKAGE)}: report/ renders outputs"


# -- one way to speak to Keystone's token API ---------------------------------------
IDENTITY_METHODS = {"password", "token", "application_credential", "totp"}


def token_api_uses(path: Path) -> list[str]:
    """A token request's identity built, or a URL joined to /auth/tokens, in PATH."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Dict):
            keys = {k.value for k in node.keys if isinstance(k, ast.Constant)}
            if "methods" in keys and keys & IDENTITY_METHODS:
                found.append(f"a token request's identity, line {node.lineno}")
        elif isinstance(node, (ast.BinOp, ast.JoinedStr)):
            parts = [node.right] if isinstance(node, ast.BinOp) else node.values
            if any(isinstance(p, ast.Constant) and "/auth/tokens" in str(p.value) for p in parts):
                found.append(f"a URL to /auth/tokens, line {node.lineno}")
    return found


@pytest.mark.parametrize(
    "path",
    [p for p in sorted(PACKAGE.rglob("*.py")) if p.relative_to(PACKAGE).parts[0] != "clients"],
    ids=lambda p: str(p.relative_to(PACKAGE)),
)
def test_only_the_client_layer_speaks_to_the_token_api(path):
    """Bodies come from clients/auth.py; requests go through TokenClient or clients/check.py."""
    assert token_api_uses(path) == [], f"{path.relative_to(PACKAGE)}: use clients/"


def test_the_token_api_check_sees_a_body_and_a_url(tmp_path):
    sample = tmp_path / "sample.py"
    sample.write_text(
        'body = {"methods": ["token"], "token": {"id": t}}\n'
        'post(url + "/auth/tokens", json=body)\n'
        'get(f"{url}/auth/tokens?nocatalog")\n'
        'reply = {"methods": ["password"], "user": {}, "expires_at": x}\n'
    )
    assert token_api_uses(sample) == [
        "a token request's identity, line 1",
        "a URL to /auth/tokens, line 2",
        "a URL to /auth/tokens, line 3",
    ]


# -- no circles -----------------------------------------------------------------
def module_of(name: str) -> str | None:
    """The package module NAME names (a function imported from it names its module)."""
    while name and name != NAME:
        rel = PACKAGE.parent / name.replace(".", "/")
        if rel.with_suffix(".py").is_file() or (rel / "__init__.py").is_file():
            return name
        name = name.rpartition(".")[0]
    return None


def import_graph() -> dict[str, set[str]]:
    graph = {}
    for path in PACKAGE.rglob("*.py"):
        me = module_name(path)
        graph[me] = {m for m in map(module_of, imports_of(path)) if m and m != me}
    return graph


def circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected groups of more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        for w in graph.get(v, ()):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            group = []
            while True:
                w = stack.pop()
                group.append(w)
                if w == v:
                    break
            if len(group) > 1:
                found.append(sorted(group))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return found


def test_no_import_circles():
    """Every import counts, at the top or inside a function (one hid a circle from Python)."""
    assert circles(import_graph()) == []


def test_the_circle_check_finds_a_circle():
    assert circles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]


# -- sizes ----------------------------------------------------------------------
MAX_MODULE_LINES = 600
MAX_FUNCTION_LINES = 80
# Known offenders (issue 23): none left. The lists may only shrink: a module or
# function over the limit is split by its job, never added here.
LONG_MODULES: set[str] = set()
LONG_FUNCTIONS: set[str] = set()


def sizes() -> tuple[set[str], set[str]]:
    long_modules, long_functions = set(), set()
    for path in PACKAGE.rglob("*.py"):
        rel = str(path.relative_to(PACKAGE))
        text = path.read_text()
        if len(text.splitlines()) > MAX_MODULE_LINES:
            long_modules.add(rel)
        for node in ast.walk(ast.parse(text, rel)):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                if node.end_lineno - node.lineno + 1 > MAX_FUNCTION_LINES:
                    long_functions.add(f"{rel}:{node.name}")
    return long_modules, long_functions


def test_no_module_over_600_lines_and_no_function_over_80():
    long_modules, long_functions = sizes()
    assert long_modules - LONG_MODULES == set(), "split by job, not by line count"
    assert long_functions - LONG_FUNCTIONS == set()
    # A known offender fixed comes off the list, so it cannot grow back unseen.
    assert LONG_MODULES - long_modules == set(), "remove it from LONG_MODULES"
    assert LONG_FUNCTIONS - long_functions == set(), "remove it from LONG_FUNCTIONS"


def test_no_two_test_modules_share_a_file_name():
    """tests/ has no __init__.py: pytest imports a test file by its base name, and a second
    file of the same name in another folder fails the whole collection ("import file
    mismatch"), as tests/unit and tests/functional's test_capacity_evidence.py once did."""
    tests = Path(__file__).resolve().parents[1]
    names = collections.Counter(p.name for p in tests.rglob("test_*.py"))
    assert [name for name, n in names.items() if n > 1] == []
