"""The keystone-bench command: argument parsing and dispatch to the verbs.

Every verb exits 0 on pass, 1 when a verdict failed (SLA, regression,
degradation) and 2 on bad input or environment, with a one-line reason on
stderr. Each verb is a module under verbs/ that declares its options
(``add_arguments``) and runs (``main``); this module only assembles them.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Mapping, Sequence

import rally_keystone_bench.verbs.applicability
import rally_keystone_bench.verbs.capacity
import rally_keystone_bench.verbs.cleanup
import rally_keystone_bench.verbs.compare
import rally_keystone_bench.verbs.gate
import rally_keystone_bench.verbs.history
import rally_keystone_bench.verbs.keystone
import rally_keystone_bench.verbs.load
import rally_keystone_bench.verbs.matrix
import rally_keystone_bench.verbs.mock
import rally_keystone_bench.verbs.report
import rally_keystone_bench.verbs.run
import rally_keystone_bench.verbs.scale
import rally_keystone_bench.verbs.tasks  # noqa: F401  (each verb module, as verbs.NAME)
from rally_keystone_bench import boundary, errors, verbs
from rally_keystone_bench.report import completion
from rally_keystone_bench.version import version

# Each verb: its module under verbs/ (add_arguments, main) and its line in --help.
VERBS = (
    ("keystone", "start, stop or inspect a local Keystone"),
    ("mock", "a minimal, fast token service on loopback"),
    ("run", "run Rally tasks against a local Keystone or a cloud"),
    ("scale", "sweep one data size and fit how token latency grows"),
    ("report", "summary.html and summary.json from a Rally result"),
    ("compare", "A/B comparison of two Rally results"),
    ("capacity", "search N, the highest rps without degradation"),
    ("load", "one open-model probe on the Locust or the Rally engine"),
    ("matrix", "run one task on several deployments and tabulate"),
    ("gate", "baseline against candidate Keystone, paired requests"),
    ("history", "the runs a results store holds, their change points"),
    ("tasks", "list (or copy) the task and deployment files shipped"),
    ("cleanup", "delete what a reuse TAG kept or a cut-short workload left"),
)


def build_parser() -> argparse.ArgumentParser:
    parser = boundary.OneLineParser(
        prog="keystone-bench",
        description="Benchmark OpenStack Keystone tokens with Rally.",
    )
    parser.add_argument(
        "--debug", action="store_true", help="print the traceback of an unexpected error"
    )
    parser.add_argument(
        "--version",
        action="version",
        version=f"%(prog)s {version()}",
        help="print the tool's version (from git tags, setuptools-scm) and exit",
    )
    sub = parser.add_subparsers(dest="verb", metavar="VERB")
    sub.required = True

    for name, help_text in VERBS:
        module = getattr(verbs, name)
        verb = sub.add_parser(name, help=help_text)
        module.add_arguments(verb)
        if name != "keystone":  # keystone's own sub-verbs (up, down, status) set theirs
            verb.set_defaults(func=module.main)
    _add_completion(sub)
    return parser


COMPLETION_HELP = """\
Print a shell completion script for keystone-bench, generated from this parser:
verbs, sub-verbs and each verb's options complete with TAB, files after any
other word. Load it in your shell's start-up file:

  bash (~/.bashrc):  eval "$(keystone-bench completion bash)"
  zsh (~/.zshrc):    eval "$(keystone-bench completion zsh)"
"""


def _add_completion(sub: argparse._SubParsersAction) -> None:
    verb = sub.add_parser(
        "completion",
        help="print a bash or zsh completion script",
        description=COMPLETION_HELP,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    verb.add_argument("shell", choices=completion.SHELLS, help="the shell to complete in")
    verb.set_defaults(func=_print_completion)


def completion_words(parser: argparse.ArgumentParser, path: str = "") -> dict[str, list[str]]:
    """Verb path ("" at the top) -> the sub-verbs and options a shell offers there."""
    offered: list[str] = []
    found: dict[str, list[str]] = {path: offered}
    for action in parser._actions:  # noqa: SLF001 - argparse keeps its actions only here
        if isinstance(action, argparse._SubParsersAction):  # noqa: SLF001
            for name, child in action.choices.items():
                offered.append(name)
                found.update(completion_words(child, f"{path} {name}".strip()))
        elif action.option_strings:
            offered.extend(action.option_strings)
        elif action.choices:  # a positional of a few values: ``completion bash``
            offered.extend(str(c) for c in action.choices)
    return found


def _print_completion(args: argparse.Namespace) -> int:
    print(completion.script(args.shell, completion_words(build_parser())), end="")
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    """Parse ARGV and run its verb; every error becomes an exit code (see boundary)."""
    argv = list(sys.argv[1:] if argv is None else argv)
    debug = "--debug" in argv  # anywhere on the line, not only before the verb
    argv = [a for a in argv if a != "--debug"]
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as exc:  # --help (0) or a usage error, already said in one line (2)
        return exc.code if isinstance(exc.code, int) else errors.EXIT_BAD_INPUT
    return boundary.run(lambda: _checked(parser, args)(args), debug=debug)


def rules_of(verb: str) -> Mapping[str, verbs.applicability.Rule]:
    """The applicability rules VERB's module declares (its ``RULES``); none: {}."""
    return getattr(getattr(verbs, verb, None), "RULES", {})  # completion has no module


def _checked(parser: argparse.ArgumentParser, args: argparse.Namespace):
    """ARGS's verb, once no option was given where it does not apply."""
    defaults = verbs.applicability.defaults_of(parser, args.verb)
    verbs.applicability.check(args.verb, rules_of(args.verb), args, defaults)
    return args.func


if __name__ == "__main__":
    sys.exit(main())
