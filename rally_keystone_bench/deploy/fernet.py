"""Active Fernet keys at a real size: a repository as full as ``max_active_keys`` allows.

``keystone-manage fernet_setup`` leaves two keys (the staged key 0 and the
primary key 1); a cloud that rotates keys on a schedule holds
``[fernet_tokens] max_active_keys`` of them. Keystone reads every key of the
repository and builds one Fernet instance per key for every token it issues
or validates, and a token signed with an older key is decrypted after the
newer keys have failed: the number of keys is a cost. A deployment that sets
``--set fernet_tokens.max_active_keys=N`` gets N keys before Keystone
starts, by Keystone's own rotation (templates/keystone_bench_fernet_keys.py).
"""

from __future__ import annotations

import subprocess
from collections.abc import Mapping
from pathlib import Path

from rally_keystone_bench import writer
from rally_keystone_bench.deploy import files
from rally_keystone_bench.errors import BenchError

MAX_ACTIVE_KEYS = "fernet_tokens.max_active_keys"
KEY_REPOSITORY = "fernet_tokens.key_repository"
SETUP_KEYS = 2  # what fernet_setup leaves: the staged key and the primary


def wanted(conf: Mapping[str, str]) -> int | None:
    """The number of keys CONF asks for (its max_active_keys), or None to leave fernet_setup's."""
    value = conf.get(MAX_ACTIVE_KEYS)
    if value is None:
        return None
    try:
        return int(value)
    except ValueError:
        raise BenchError(f"--set {MAX_ACTIVE_KEYS}={value}: must be an integer") from None


def key_files(repository: Path) -> list[Path]:
    """The key files of REPOSITORY (named by their index: 0 is the staged key)."""
    return sorted((p for p in repository.iterdir() if p.name.isdigit()), key=lambda p: int(p.name))


def repository(conf: Mapping[str, str], run_dir: Path) -> Path:
    """The Fernet key repository of a deployment: the run directory's, or CONF's own."""
    return Path(conf.get(KEY_REPOSITORY) or run_dir / "fernet-keys")


def fill(
    python: str, config: Path, conf: Mapping[str, str], run_dir: Path, env: dict[str, str]
) -> int | None:
    """Rotate the key repository until it holds the keys CONF asks for; the count held.

    None when CONF does not set max_active_keys. PYTHON is Keystone's, CONFIG
    its keystone.conf. Kept on restart: a repository that holds them already
    is not rotated again.
    """
    want = wanted(conf)
    if want is None:
        return None
    where = repository(conf, run_dir)
    if want <= SETUP_KEYS or len(key_files(where)) >= want:
        return len(key_files(where))
    log = run_dir / "keystone-manage-fernet_rotate.log"
    with writer.open_stream(log, "a") as out:
        proc = subprocess.run(
            [python, "-c", files.render("keystone_bench_fernet_keys.py"), str(config)],
            stdout=subprocess.DEVNULL,
            stderr=out,
            env=env,
        )
    held = len(key_files(where))
    if proc.returncode != 0 or held != want:
        raise BenchError(
            f"rotating the Fernet keys to {want} failed (exit {proc.returncode}, "
            f"{held} keys held); see {log}"
        )
    return held
