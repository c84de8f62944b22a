"""``keystone-bench tasks``: the task and deployment files shipped with the package.

    keystone-bench tasks               # their paths, each with a one-line description
    keystone-bench tasks --copy DIR    # copies into DIR/tasks and DIR/deployments

Every verb finds its default task among them, from any directory.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from rally_keystone_bench import shipped, writer
from rally_keystone_bench.errors import BenchError


def main(args: argparse.Namespace) -> int:
    copy = args.copy  # the verb's one option
    if copy is None:
        for kind in shipped.KINDS:
            print(f"{kind} (in {shipped.DATA / kind}):")
            for path in shipped.files(kind):
                print(f"  {path.name:<30} {shipped.describe(path)}")
        return 0
    dest = Path(copy)
    if dest.exists() and not dest.is_dir():
        raise BenchError(f"--copy {dest} is a file, not a directory")
    for kind in shipped.KINDS:
        (dest / kind).mkdir(parents=True, exist_ok=True)
        for path in shipped.files(kind):
            target = dest / kind / path.name
            if target.exists():
                raise BenchError(f"{target} exists already: copy into an empty directory")
            writer.copy(path, target)
            print(target)
    return 0


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The options of ``keystone-bench tasks``."""
    parser.add_argument("--copy", default=None, metavar="DIR", help="copy them into DIR")
