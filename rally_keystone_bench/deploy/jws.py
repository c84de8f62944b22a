"""JWS tokens: the key pair a deployment with ``token.provider=jws`` signs with.

``keystone-manage create_jws_keypair`` writes ``private.pem`` and
``public.pem`` into its working directory; Keystone signs with the private
repository's ``private.pem`` and validates with every key of the public one.
"""

from __future__ import annotations

import os
import subprocess
from collections.abc import Mapping
from pathlib import Path

from rally_keystone_bench import writer
from rally_keystone_bench.errors import BenchError

PROVIDER = "token.provider"


def wanted(conf: Mapping[str, str]) -> bool:
    """True when CONF makes Keystone issue JWS tokens."""
    return conf.get(PROVIDER, "").strip().lower() == "jws"


def repositories(run_dir: Path) -> dict[str, str]:
    """The key repositories of RUN_DIR, as keystone.conf settings."""
    return {
        "jwt_tokens.jws_private_key_repository": str(run_dir / "jws-keys" / "private"),
        "jwt_tokens.jws_public_key_repository": str(run_dir / "jws-keys" / "public"),
    }


def create_keypair(keystone_manage: str, config: Path, settings: Mapping[str, str], env) -> None:
    """Create the key pair into the repositories SETTINGS name (once: kept on restart)."""
    private = Path(settings["jwt_tokens.jws_private_key_repository"])
    public = Path(settings["jwt_tokens.jws_public_key_repository"])
    for where in (private, public):
        where.mkdir(mode=0o700, parents=True, exist_ok=True)
    if (private / "private.pem").exists() and (public / "public.pem").exists():
        return
    log = private.parent / "keystone-manage-create_jws_keypair.log"
    owner = ["--keystone-user", str(os.getuid()), "--keystone-group", str(os.getgid())]
    argv = [keystone_manage, "--config-file", str(config), "create_jws_keypair", *owner]
    with writer.open_stream(log, "a") as out:
        proc = subprocess.run(
            [*argv, "--force"],
            cwd=private,
            stdout=out,
            stderr=subprocess.STDOUT,
            env=env,
        )
    if proc.returncode != 0 or not (private / "public.pem").exists():
        raise BenchError(f"keystone-manage create_jws_keypair failed; see {log}")
    writer.move(private / "public.pem", public / "public.pem")
    os.chmod(private / "private.pem", 0o600)
