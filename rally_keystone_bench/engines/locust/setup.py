"""The Keystone users the load runs as: made before it, deleted after it.

One project and N users holding the member role on it, named
``kbl-<run id>-...``, created through the admin client the Rally contexts
use (retries counted, creates adopted on a retried 409), and deleted with
it afterwards, whatever the load did. Deleting a user ends its tokens, so
the pre-issued tokens of the validate scenario go with their users.

The run id is keystone-bench's (``KEYSTONE_BENCH_LOAD_ID`` in the master's
environment), so that a master killed before it deleted them (SIGKILL, the
machine's OOM killer) leaves names keystone-bench can find and print
``keystone-bench cleanup --load ID`` for (``find_run``, ``delete_run``).
"""

from __future__ import annotations

import os
import re
import secrets
from dataclasses import dataclass, field
from typing import Any

from rally_keystone_bench.clients.admin import AdminClient, run_parallel
from rally_keystone_bench.clients.retry import RetryStats

PREFIX = "kbl-"
ROLE = "member"
RUN_ID_ENV = "KEYSTONE_BENCH_LOAD_ID"  # the run id keystone-bench chose, in the master's env
_RUN_ID_RE = re.compile(r"^[0-9a-f]{8}$")


def new_run_id() -> str:
    """8 hex digits: the names a load's users and project carry (``kbl-<id>``)."""
    return secrets.token_hex(4)


def check_run_id(text: str) -> str:
    """A load's run id as given (8 hex digits, as keystone-bench printed it), checked."""
    value = (text or "").strip().lower()
    if not _RUN_ID_RE.match(value):
        from rally_keystone_bench.errors import BenchError

        raise BenchError(
            f"--load {text!r} must be a load's id: 8 hex digits (as keystone-bench printed it)"
        )
    return value


def run_prefix(run_id: str) -> str:
    """What the names of RUN_ID's project and users start with."""
    return f"{PREFIX}{run_id}"


@dataclass
class Prepared:
    """What was made: ids to delete, and each user's credentials for the workers."""

    run_id: str
    domain_id: str
    domain_name: str = "Default"
    project: dict[str, str] | None = None
    users: list[dict[str, str]] = field(default_factory=list)  # id, name, password
    stats: RetryStats = field(default_factory=RetryStats)

    def credentials(self) -> list[dict[str, str]]:
        """What a worker needs to authenticate as each user (no admin secret).

        Workers authenticate by name, as Rally's users (and an openrc) do:
        Keystone then resolves the domain, user and project names, and both
        engines time the same request.
        """
        assert self.project is not None
        return [
            {
                "user_id": u["id"],
                "username": u["name"],
                "password": u["password"],
                "project_id": self.project["id"],
                "project_name": self.project["name"],
                "domain_name": self.domain_name,
            }
            for u in self.users
        ]


def prepare(admin: AdminClient, users: int, workers: int = 8) -> Prepared:
    """One project and USERS users with the member role on it."""
    given = os.environ.get(RUN_ID_ENV, "")
    run_id = given if _RUN_ID_RE.match(given) else new_run_id()
    done = Prepared(run_id, admin.admin_project_domain_id(), stats=admin.stats)
    done.domain_name = admin.domain_name(done.domain_id)
    role = admin.role_ids([ROLE])[ROLE]
    name = f"{PREFIX}{run_id}"
    done.project = {
        "id": admin.create(
            "projects", name, {"description": "keystone-bench load"}, done.domain_id
        )["id"],
        "name": name,
    }

    def create(i: int) -> dict[str, str]:
        uname = f"{name}-u{i}"
        password = secrets.token_urlsafe(18)  # as keystone_users' (24 characters)
        fields = {"password": password, "default_project_id": done.project["id"]}
        record = admin.create(
            "users", uname, {**fields, "description": "keystone-bench load"}, done.domain_id
        )
        user = {"id": record["id"], "name": uname, "password": password}
        done.users.append(user)  # before the grant: deleted even if the grant fails
        admin.grant(done.project["id"], record["id"], role, f"grant {ROLE} to {uname}")
        return user

    _, errors, _ = run_parallel(create, list(range(users)), workers, fail_fast=True)
    if errors:
        raise errors[0]
    return done


def teardown(admin: AdminClient, done: Prepared, workers: int = 8) -> list[str]:
    """Delete the users and the project; the names of what could not be deleted."""
    left: list[str] = []

    def delete_user(user: dict[str, str]) -> None:
        admin.delete("users", user["id"])

    _, errors, _ = run_parallel(delete_user, list(done.users), workers, fail_fast=False)
    for user in done.users if errors else ():
        try:
            still = admin.get("users", user["id"]) is not None
        except Exception:  # cannot tell: reported as left behind
            still = True
        if still:
            left.append(f"user {user['name']}")
    if done.project is not None:
        try:
            admin.delete("projects", done.project["id"])
        except Exception:  # reported as left behind
            left.append(f"project {done.project['name']}")
    return left


def worker_options(opts: Any) -> dict[str, Any]:
    """The master's --ks-* options, as every worker must see them from its plan on."""
    return {k: v for k, v in vars(opts).items() if k.startswith("ks_") and k != "ks_out"}


def user_auth(cred: dict) -> Any:
    from rally_keystone_bench.clients.auth import UserAuth

    # By name, as Rally's keystone_users credentials: the same request on both engines.
    return UserAuth(
        username=cred["username"],
        password=cred["password"],
        user_domain_name=cred["domain_name"],
        project_name=cred["project_name"],
        project_domain_name=cred["domain_name"],
    )


def find_run(admin: AdminClient, run_id: str) -> dict[str, list[dict]]:
    """The users and the project of load RUN_ID still in Keystone (in every domain)."""
    prefix = run_prefix(run_id)
    return {kind: admin.list_prefixed(kind, prefix) for kind in ("users", "projects")}


def delete_run(admin: AdminClient, run_id: str, workers: int = 8) -> dict[str, int]:
    """Delete what load RUN_ID left (users, then the project); per kind, how many.

    Raises the first error once every deletion was tried.
    """
    deleted: dict[str, int] = {}
    failures: list[BaseException] = []
    for kind, records in find_run(admin, run_id).items():

        def delete(record: dict, kind: str = kind) -> bool:
            return admin.delete(kind, record["id"])

        done, errors, _ = run_parallel(delete, records, workers, fail_fast=False)
        deleted[kind] = len(done)
        failures += errors
    if failures:
        raise failures[0]
    return deleted


def describe_left(credential: dict, run_id: str) -> str:
    """What load RUN_ID left in the cloud of CREDENTIAL ("" nothing), looked up, not guessed.

    When the cloud does not answer, the names they would carry.
    """
    try:
        found = find_run(AdminClient(credential, pool_size=2), run_id)
    except Exception:  # cannot tell: say what may be there
        return f"maybe users and a project named {run_prefix(run_id)}*"
    return ", ".join(f"{kind[:-1]} {r['name']}" for kind, rs in found.items() for r in rs)
