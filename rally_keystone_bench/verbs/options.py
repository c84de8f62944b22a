"""What several verbs share beyond their option groups (verbs/groups): a cloud's spec,
the load generator's measured ceiling, the results store, --scenario and the deprecated
spelling of a renamed option.

Not a verb: the verbs share it, and nothing below the verbs sees a Namespace.
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, TypeVar

from rally_keystone_bench.deploy import conf_options, identity
from rally_keystone_bench.deploy.deployment import Deployment
from rally_keystone_bench.driver import rally as rallyenv
from rally_keystone_bench.errors import BenchError, mask_urls
from rally_keystone_bench.history import records as history_records
from rally_keystone_bench.history import store as history_store
from rally_keystone_bench.verbs import recording
from rally_keystone_bench.verdicts import capacity

S = TypeVar("S")


def read(settings: type[S], args: argparse.Namespace) -> S:
    """A verb's frozen SETTINGS from the options of the same dests: the one place its
    ``main`` reads the parsed arguments (the door)."""
    return settings(**{f.name: vars(args)[f.name] for f in dataclasses.fields(settings)})


def cloud_spec(spec: str | None) -> dict:
    """The Rally env spec of an existing cloud: --spec SPEC, else the OS_* variables."""
    if spec:
        return rallyenv.load_spec_file(spec)
    return rallyenv.spec_from_environ(os.environ)


# What Rally's runners sent from one host at most, on the 2-core test machine
# (benchmarks/generator_ceiling.py, 2026-11-24, doc/source/engines.rst):
# KeystoneTokens.validate against a mock with no service time.
RALLY_CEILING_RPS = {"pooled_rps": 1171, "rps": 553}


def check_rate(flag: str, rate: float, engine_name: str, runner: str, force: bool) -> str | None:
    """BenchError when RATE is above what ENGINE_NAME sends from this host (measured).

    With FORCE, the line that would have refused it instead (to be shown):
    the probe then says ``generator-limited`` if the rate is not sent.
    """
    from rally_keystone_bench.engines.locust.engine import HOST_CEILING_RPS

    if engine_name == "locust":
        ceiling, who = HOST_CEILING_RPS, "the Locust engine's workers send"
    else:
        ceiling, who = RALLY_CEILING_RPS.get(runner, 0), f"Rally's {runner} runner sends"
    if not ceiling or rate <= ceiling:
        return None
    line = (
        f"{flag} {rate:g} rps is above what {who} from this host ({ceiling} requests/s, measured)"
    )
    if force:
        return f"--force: {line}"
    raise BenchError(f"{line}: lower it, or add --force to try anyway")


def add_reports_dir_option(p: argparse.ArgumentParser) -> None:
    """``--reports-dir DIR``: where a verb that measures writes its reports."""
    p.add_argument(
        "--reports-dir",
        default="reports",
        help="where the reports go, in a directory per run (default reports)",
    )


# -- the results store (doc/source/history.rst) -------------------------------------
def add_history_option(p: argparse.ArgumentParser) -> None:
    """``--history STORE``: record what the verb measured (run, gate, capacity, matrix,
    load, scale); $KEYSTONE_BENCH_HISTORY when not given."""
    p.add_argument(
        "--history",
        metavar="STORE",
        default=None,
        help="record each run's percentiles, rates and context in STORE: a SQLite file "
        f"(created on first use) or a postgresql:// URL (default: ${history_store.ENV_VAR})",
    )


def history_url(given: str | None) -> str | None:
    """The store named by --history (GIVEN), else by the environment; None: do not record."""
    return given or os.environ.get(history_store.ENV_VAR) or None


def check_store(url: str | None) -> str | None:
    """Open (create, migrate) the store of URL now, so that a bad one fails before any
    load; URL back."""
    if url:
        history_store.Store.open(url).close()
    return url


def check_history(args: argparse.Namespace) -> str | None:
    """The store of the verb's --history (or the environment's), checked: check_store."""
    return check_store(history_url(args.history))


def deployment_line(deployment: Deployment) -> str:
    return identity.deployment_line(deployment.describe(), deployment.keystone)


def record_history(
    url: str | None,
    verb: str,
    out_dir: Path,
    deployment: Deployment | None,
    summaries: Sequence[tuple[str, Mapping[str, Any]]] = (),
    where: str = "existing cloud",
    line: str | None = None,
    rows: Sequence[history_records.ActionRow] = (),
) -> int | None:
    """Record SUMMARIES, the (task name, summary.json document) pairs a verb wrote under
    OUT_DIR as it kept them in memory (recording.summaries_of), and ROWS it made, as one
    run; its id (None: no store, or nothing measured). WHERE names a target without a
    local deployment; LINE replaces the deployment line (gate: both sides). URL: the
    store's, as check_history gave it at the door (None: no store)."""
    if not url:
        return None
    rows = [*rows, *history_records.rows_from_summaries(summaries)]
    if not rows:
        print(f"history: nothing to record from {out_dir} (no summary.json)")
        return None
    keystone = recording.keystone_of(deployment.keystone if deployment else where)
    record = history_records.build_record(
        verb,
        keystone,
        line or (deployment_line(deployment) if deployment else where),
        conf_options.masked(deployment.conf) if deployment else {},
        rows,
        str(out_dir),
    )
    try:
        with history_store.Store.open(url) as store:
            run_id = store.record(record)
            print(f"history: run {run_id} recorded in {store.where} ({len(rows)} rows)")
    except Exception as exc:  # the verb's verdict stands; the store's failure is said
        reason = mask_urls(str(exc).strip().splitlines()[0] if str(exc).strip() else repr(exc))
        print(f"history: NOT recorded: {reason}", file=sys.stderr)
        return None
    return run_id


def add_scenario_option(parser: argparse.ArgumentParser, help: str, required: bool) -> None:
    """``--scenario``: the token path a probe runs (capacity searches two of them)."""
    parser.add_argument(
        "--scenario", choices=list(capacity.PROBE_SCENARIOS), required=required, help=help
    )


def add_deprecated_alias(parser: argparse.ArgumentParser, old: str, new: str, dest: str) -> None:
    """OLD, the former spelling of NEW (same DEST, type and action: stored or appended):
    still works, with a one-line note on stderr, and hidden from --help. Kept for one
    release."""
    current = next(a for a in parser._actions if new in a.option_strings)
    parser.add_argument(
        old,
        dest=dest,
        type=current.type,
        default=current.default,
        metavar=current.metavar,
        choices=current.choices,
        action=DeprecatedAlias,
        new=new,
        append=isinstance(current, argparse._AppendAction),
        help=argparse.SUPPRESS,
    )


class DeprecatedAlias(argparse.Action):
    """An option's former spelling: stores (or appends) like the new one and says to use
    that."""

    def __init__(
        self, option_strings: list[str], dest: str, new: str, append: bool = False, **kwargs: Any
    ) -> None:
        self.new, self.append = new, append
        super().__init__(option_strings, dest, **kwargs)

    def __call__(
        self,
        parser: argparse.ArgumentParser,
        namespace: argparse.Namespace,
        values: Any,
        option_string: str | None = None,
    ) -> None:
        print(
            f"keystone-bench: {option_string} is deprecated here, use {self.new} "
            "(the old spelling goes in the next release)",
            file=sys.stderr,
        )
        if self.append:
            values = [*(getattr(namespace, self.dest, None) or []), values]
        setattr(namespace, self.dest, values)
