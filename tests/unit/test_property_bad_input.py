"""Property: no command line and no input file makes a verb print a traceback.

Hypothesis feeds generated argument lists (every verb, its options with
generated values, stray words) and generated files (JSON, YAML, binary,
empty) to the parser, the verbs and their input readers. Each run must end
in exit 0, 1, 2 or 3 with no traceback and no "unexpected error" (an error no
verb expected). Nothing may start: every way out of this process (a
subprocess, a fork, a connection, the mock's socket) is replaced by a
sentinel, and reaching one counts as "the input passed validation".
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import urllib.request

import pytest
import yaml

hypothesis = pytest.importorskip("hypothesis")
from hypothesis import HealthCheck, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

from rally_keystone_bench import cli, errors  # noqa: E402
from rally_keystone_bench.deploy import mock  # noqa: E402
from rally_keystone_bench.driver import rally as rally_driver  # noqa: E402
from rally_keystone_bench.verbs import matrix  # noqa: E402
from rally_keystone_bench.verdicts import results  # noqa: E402

# A task Rally's format accepts (every verb checks it before anything starts).
TASK_TEXT = "version: 2\ntitle: t\nsubtasks: [{title: s, scenario: {Dummy.dummy: {}}}]\n"


class Reached(BaseException):  # noqa: N818 - a sentinel, not an error
    """Validation passed: the verb was about to start something."""


def _reached(*args, **kwargs):
    raise Reached


@pytest.fixture(scope="module")
def sandbox(tmp_path_factory):
    """A working directory with input files, where nothing can leave the process."""
    mp = pytest.MonkeyPatch()
    work = tmp_path_factory.mktemp("prop")
    mp.chdir(work)
    for name in list(os.environ):
        if name.startswith(("OS_", "KEYSTONE_BENCH_")):
            mp.delenv(name)
    mp.setenv("XDG_CACHE_HOME", str(work / "cache"))
    for target, attr in (
        (subprocess, "Popen"),
        (os, "fork"),
        (socket, "create_connection"),
        (socket.socket, "connect"),
        (urllib.request, "urlopen"),
        (mock, "_bind"),
    ):
        mp.setattr(target, attr, _reached)
    (work / "tasks").mkdir()
    (work / "tasks" / "t.yaml").write_text(TASK_TEXT)
    yield work
    mp.undo()


# -- generated files ---------------------------------------------------------------
json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=8),
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4)
    ),
    max_leaves=12,
)
rally_like = st.fixed_dictionaries(
    {
        "info": st.fixed_dictionaries({"format_version": st.sampled_from(["1.2", "2.0", 1])}),
        "tasks": st.lists(
            st.fixed_dictionaries(
                {
                    "subtasks": st.lists(
                        st.fixed_dictionaries({"workloads": st.lists(json_values, max_size=2)}),
                        max_size=2,
                    )
                }
            ),
            max_size=2,
        ),
    }
)
file_bytes = st.one_of(
    st.just(b""),
    st.binary(max_size=64),
    json_values.map(lambda v: json.dumps(v).encode()),
    rally_like.map(lambda v: json.dumps(v).encode()),
    json_values.map(lambda v: b"\xef\xbb\xbf" + json.dumps(v).encode()),
    json_values.map(lambda v: yaml.safe_dump(v).encode()),
    st.text(max_size=40).map(str.encode),
)

# -- generated command lines -------------------------------------------------------
numbers = st.sampled_from(
    ["0", "-1", "1", "2.9", "nan", "inf", "-inf", "70000", "1e309", "x", "", "3", "0.5"]
)
FILE = "INPUT"  # replaced by the generated file's path
words = st.one_of(
    numbers,
    st.sampled_from(
        [
            FILE,
            "nosuch.json",
            ".",
            "tasks/t.yaml",
            "12345678-1234-1234-1234-123456789012",
            "4a88fea2",
            "1e12",
            "--force",
        ]
    ),
    st.text(alphabet=st.characters(codec="utf-8", exclude_characters="\x00"), max_size=6),
)
VERBS = {
    "keystone up": ["--port", "--workers", "--threads", "--run-dir", "--password-hash-rounds",
                    "--db", "--db-url", "--server", "--cache"],
    "keystone down": ["--run-dir"],
    "keystone status": ["--run-dir"],
    "mock": ["--port", "--workers", "--service-time", "--slope", "--error-rate", "--stall",
             "--stall-every", "--run-dir"],
    "run": ["--task-args", "--spec", "--reports-dir", "--workers", "--port", "--existing-cloud"],
    "report": ["--out"],
    "compare": ["--threshold", "--alpha", "--max-failure-increase", "--json", "--html", "--junit"],
    "capacity": ["--scenario", "--low", "--high", "--window", "--warmup", "--precision",
                 "--max-slope", "--target", "--spec", "--mock-workers", "--engine", "--force"],
    "matrix": ["--deployments", "--task", "--task-args", "--repeat"],
    "gate": ["--baseline", "--candidate", "--task", "--rounds", "--threshold", "--alpha",
             "--candidate-option"],
    "cleanup": ["--reuse", "--workload-id", "--spec", "--run-dir"],
}  # fmt: skip


@st.composite
def command_lines(draw):
    verb = draw(st.sampled_from(sorted(VERBS)))
    argv = verb.split()
    for _ in range(draw(st.integers(0, 5))):
        if draw(st.booleans()):
            argv.append(draw(st.sampled_from(VERBS[verb])))
        argv.append(draw(words))
    return argv


def check_outcome(capsys, run) -> None:
    try:
        code = run()
    except Reached:
        capsys.readouterr()
        return
    out, err = capsys.readouterr()
    assert code in (0, 1, 2, 3), (code, err)
    assert "Traceback" not in err and "Traceback" not in out
    assert "unexpected error" not in err, err
    if code == 2:
        assert err.strip(), "exit 2 without a reason"


@settings(
    max_examples=int(os.environ.get("PROPERTY_EXAMPLES", "150")),
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(argv=command_lines(), content=file_bytes)
def test_no_command_line_gives_a_traceback(sandbox, capsys, argv, content):
    path = sandbox / "input.file"
    path.write_bytes(content)
    argv = [str(path) if a == FILE else a for a in argv]
    check_outcome(capsys, lambda: cli.main(argv))


READERS = {
    "report": results.load,
    "spec": rally_driver.load_spec_file,
    "deployments": matrix.load_deployments,
    "text": lambda p: errors.read_input(p, "input"),
}


@settings(
    max_examples=100, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(reader=st.sampled_from(sorted(READERS)), content=file_bytes)
def test_input_readers_raise_only_bench_errors(sandbox, reader, content):
    path = sandbox / f"reader-{reader}"
    path.write_bytes(content)
    try:
        READERS[reader](str(path))
    except errors.BenchError as exc:
        assert "\n" not in str(exc)
    except Reached:
        pass


def test_the_sandbox_lets_nothing_start(sandbox, capsys):
    """A valid deployment file gets past validation to the sentinel, not to pip."""
    deployments = sandbox / "d.yaml"
    deployments.write_text("a: {workers: 1}\n")
    with pytest.raises(Reached):
        cli.main(["matrix", "--deployments", str(deployments), "--task", "tasks/t.yaml"])


# -- every option of every verb, as the parser declares them (issue 27) -------------
def _verb_options() -> dict[str, list[tuple[str, tuple, int]]]:
    """verb -> [(option, its choices, how many values it takes)] from the parser itself."""
    import argparse

    found: dict[str, list[tuple[str, tuple, int]]] = {}

    def walk(parser: argparse.ArgumentParser, prefix: list[str]) -> None:
        for action in parser._actions:  # noqa: SLF001
            if isinstance(action, argparse._SubParsersAction):  # noqa: SLF001
                for name, sub in action.choices.items():
                    walk(sub, [*prefix, name])
            elif action.option_strings and prefix and action.dest != "help":
                takes = 0 if action.nargs == 0 else 1
                option = action.option_strings[-1]
                found.setdefault(" ".join(prefix), []).append(
                    (option, tuple(action.choices or ()), takes)
                )

    walk(cli.build_parser(), [])
    return found


ALL_OPTIONS = _verb_options()
# Item 7's combinations: options that apply only to another target or engine.
CONTRADICTIONS = [
    ["capacity", "--scenario", "validate", "--engine", "rally", "--locust-workers", "2"],
    ["capacity", "--scenario", "validate", "--engine", "locust", "--runner", "rps"],
    ["capacity", "--scenario", "validate", "--target", "mock", "--nodes", "3", "--db",
     "postgresql"],
    ["load", "--scenario", "authenticate", "--target", "mock", "--identity", "ldap"],
    ["run", "--existing-cloud", "--nodes", "2", "--db", "postgresql", "--server", "nginx"],
    ["mock", "--stall-every", "5"],
]  # fmt: skip


@st.composite
def any_option_lines(draw):
    """A verb and any of its options, each with a value of its kind or a stray word."""
    if draw(st.integers(0, 4)) == 0:
        argv = list(draw(st.sampled_from(CONTRADICTIONS)))
    else:
        argv = draw(st.sampled_from(sorted(ALL_OPTIONS))).split()
    verb = (
        " ".join(a for a in argv[:2] if not a.startswith("-")) if argv[0] == "keystone" else argv[0]
    )
    options = ALL_OPTIONS[verb]
    for _ in range(draw(st.integers(0, 6))):
        option, choices, takes = draw(st.sampled_from(options))
        argv.append(option)
        if takes:
            argv.append(draw(st.sampled_from(choices) | words if choices else words))
    return argv


@settings(
    max_examples=int(os.environ.get("PROPERTY_EXAMPLES", "300")),
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(argv=any_option_lines(), content=file_bytes)
def test_no_option_of_any_verb_gives_a_traceback(sandbox, capsys, argv, content):
    path = sandbox / "input.file"
    path.write_bytes(content)
    argv = [str(path) if a == FILE else a for a in argv]
    check_outcome(capsys, lambda: cli.main(argv))


@pytest.mark.parametrize("argv", CONTRADICTIONS, ids=lambda a: " ".join(a[:1] + a[-2:]))
def test_item_7_contradictions_exit_2_in_one_line(sandbox, capsys, argv):
    assert cli.main(list(argv)) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "applies only to" in err


def test_every_verb_is_fuzzed():
    verbs = {v.split()[0] for v in ALL_OPTIONS}
    assert {"load", "capacity", "matrix", "gate", "run", "mock", "keystone", "cleanup"} <= verbs
