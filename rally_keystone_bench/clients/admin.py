"""Keystone admin calls for the contexts: projects, users, roles, over raw REST.

One keystoneauth1 Session with kept-alive connections (a pool as large as
the number of workers), every request retried through ``_retry`` when it
fails transiently, and creates made safe against the one retry hazard: a
create whose first attempt may have reached the database (a reset
connection, a 500) and whose retry then answers 409 is adopted by name
instead of leaking.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterable, Mapping
from concurrent import futures
from typing import Any

from rally_keystone_bench.clients import session as client_session
from rally_keystone_bench.clients.auth import UserAuth
from rally_keystone_bench.clients.retry import (
    KeystoneAdminError,
    RetryPolicy,
    RetryStats,
    TransientError,
    call,
    is_transient_status,
)
from rally_keystone_bench.clients.session import identity_v3_url
from rally_keystone_bench.clients.tokens import TokenClient, TokenRequestError, scrub

DEFAULT_WORKERS = 20  # rally-openstack's users_context_resource_management_workers
# Seconds before an admin request is given up and retried. Every admin call
# is safe to repeat (creates are adopted by name on 409, deletes accept 404,
# grants are PUTs), so a short timeout only costs a retry, while a long one
# stalls setup whenever an answer is lost (seen: uWSGI's router never passing
# on Keystone's 500s, leaving the client to wait for its timeout). Too short
# a timeout, though, retries requests that merely wait in the server's queue
# (20 bcrypt creates in flight on 2 busy cores waited over 15 s): 30 s.
DEFAULT_TIMEOUT = 30.0


class AdminClient:
    """Admin REST calls to Keystone's /v3, with retries counted in ``stats``."""

    def __init__(
        self,
        credential: Mapping[str, Any],
        pool_size: int = DEFAULT_WORKERS,
        policy: RetryPolicy | None = None,
        stats: RetryStats | None = None,
        timeout: float = DEFAULT_TIMEOUT,
        session: Any = None,
    ) -> None:
        self.base_url = identity_v3_url(credential["auth_url"])
        self.policy = policy or RetryPolicy()
        self.stats = stats if stats is not None else RetryStats()
        self.timeout = timeout
        self._secrets = [credential.get("password") or ""]
        self.session = session or client_session.admin_session(credential, pool_size)
        self._tokens: TokenClient | None = None

    def tokens(self) -> TokenClient:
        """A TokenClient on this session: the admin's calls to /v3/auth/tokens go through it."""
        if self._tokens is None:
            self._tokens = TokenClient(self.base_url, session=self.session, timeout=self.timeout)
        return self._tokens

    def token_call(self, what: str, job: Callable[[TokenClient], Any]) -> Any:
        """JOB(the token client), retried like every admin request.

        A refused connection or a transient status is retried; any other
        refusal is a KeystoneAdminError naming WHAT.
        """

        def attempt() -> Any:
            try:
                return job(self.tokens())
            except TokenRequestError as exc:
                if exc.status == 0:
                    raise TransientError("connection", 0, exc.message) from None
                if is_transient_status(exc.status):
                    raise TransientError(f"HTTP {exc.status}", exc.status, exc.message) from None
                raise KeystoneAdminError(what, exc.status, exc.message) from None

        return call(attempt, what, self.stats, self.policy)

    # -- one request, retried --------------------------------------------------
    def request(
        self,
        method: str,
        path: str,
        what: str,
        json: Any = None,
        params: Mapping[str, str] | None = None,
        ok: Iterable[int] = (200, 201, 204),
        authenticated: bool = True,
    ) -> tuple[int, dict]:
        """Send one request until it gets a non-transient answer.

        Returns (status, body) for a status in OK or 404; raises
        KeystoneAdminError for any other.
        """
        ok = tuple(ok)

        def attempt() -> tuple[int, dict]:
            status, body = self._send(method, path, json, params, authenticated)
            if status in ok or status == 404:
                return status, body
            if is_transient_status(status):
                raise TransientError(f"HTTP {status}", status, _message(body))
            raise KeystoneAdminError(what, status, _message(body))

        return call(attempt, what, self.stats, self.policy)

    def _send(
        self,
        method: str,
        path: str,
        json: Any,
        params: Mapping[str, str] | None,
        authenticated: bool,
    ) -> tuple[int, dict]:
        from keystoneauth1 import exceptions as ks_exc

        kwargs: dict[str, Any] = {
            "raise_exc": False,
            "connect_retries": 0,
            "log": False,
            "timeout": self.timeout,
            "authenticated": authenticated,
        }
        if json is not None:
            kwargs["json"] = json
        if params:
            kwargs["params"] = dict(params)
        try:
            resp = self.session.request(self.base_url + path, method, **kwargs)
        except ks_exc.SSLError as exc:
            raise KeystoneAdminError(f"{method} {path}", 0, self._scrub(exc)) from None
        except _auth_failures(ks_exc) as exc:
            # an HttpError here comes from the auth plugin fetching the admin token
            raise self._failure(exc) from None
        body: dict = {}
        if resp.content:
            try:
                data = resp.json()
                body = data if isinstance(data, dict) else {}
            except ValueError:
                body = {"error": {"message": resp.text[:200]}}
        return resp.status_code, body

    def _scrub(self, exc: BaseException) -> str:
        return scrub(str(exc), self._secrets)

    def _failure(self, exc: Exception) -> Exception:
        """The error for a keystoneauth connection failure or an admin authentication error."""
        from keystoneauth1 import exceptions as ks_exc

        if not isinstance(exc, ks_exc.HttpError):
            # Refused, reset, timed out: the server may be restarting.
            return TransientError("connection", 0, self._scrub(exc))
        status = int(exc.http_status or 0)
        if is_transient_status(status):
            return TransientError(f"HTTP {status}", status, self._scrub(exc))
        return KeystoneAdminError("admin authentication", status, self._scrub(exc))

    # -- lookups ----------------------------------------------------------------
    def admin_project_domain_id(self) -> str:
        """The domain of the admin's own project: the default domain for new projects."""

        def attempt() -> str:
            from keystoneauth1 import exceptions as ks_exc

            try:
                access = self.session.auth.get_access(self.session)
            except _auth_failures(ks_exc) as exc:
                raise self._failure(exc) from None
            return access.project_domain_id or access.user_domain_id or "default"

        return call(attempt, "admin authentication", self.stats, self.policy)

    def resolve_domain(self, name_or_id: str) -> str:
        """A domain's id from its id or its name; KeystoneAdminError when neither."""
        status, body = self.request("GET", f"/domains/{name_or_id}", f"look up domain {name_or_id}")
        if status == 200:
            return body["domain"]["id"]
        _, body = self.request(
            "GET", "/domains", f"look up domain {name_or_id}", params={"name": name_or_id}
        )
        found = body.get("domains") or []
        if not found:
            raise KeystoneAdminError(f"domain {name_or_id!r}", 404, "no domain has that id or name")
        return found[0]["id"]

    def role_ids(self, names: Iterable[str]) -> dict[str, str]:
        """Role name -> id; a ValueError naming the missing roles and the existing ones."""
        _, body = self.request("GET", "/roles", "list roles")
        roles = body.get("roles") or []
        by_name = {r["name"]: r["id"] for r in roles}
        by_lower = {r["name"].lower(): r["id"] for r in roles}
        ids, missing = {}, []
        for name in names:
            rid = by_name.get(name) or by_lower.get(name.lower())
            if rid is None:
                missing.append(name)
            else:
                ids[name] = rid
        if missing:
            raise ValueError(
                f"role {', '.join(repr(m) for m in missing)} does not exist in Keystone "
                f"(roles there: {', '.join(sorted(by_name)) or 'none'})"
            )
        return ids

    def find(self, kind: str, name: str, domain_id: str | None = None) -> list[dict]:
        """Projects or users (KIND) with exactly this name, in a domain or in all."""
        params = {"name": name}
        if domain_id:
            params["domain_id"] = domain_id
        _, body = self.request("GET", f"/{kind}", f"look up {kind[:-1]} {name}", params=params)
        return list(body.get(kind) or [])

    def list_prefixed(self, kind: str, prefix: str, domain_id: str | None = None) -> list[dict]:
        """Projects or users whose name starts with PREFIX (one request)."""
        params = {"name__startswith": prefix}
        if domain_id:
            params["domain_id"] = domain_id
        _, body = self.request("GET", f"/{kind}", f"list {kind} {prefix}*", params=params)
        # Older Keystones ignore unknown filters: filter again here.
        return [r for r in body.get(kind) or [] if r.get("name", "").startswith(prefix)]

    def get(self, kind: str, resource_id: str) -> dict | None:
        status, body = self.request(
            "GET", f"/{kind}/{resource_id}", f"get {kind[:-1]} {resource_id}"
        )
        return body.get(kind[:-1]) if status == 200 else None

    # -- writes -----------------------------------------------------------------
    def create(self, kind: str, name: str, fields: Mapping[str, Any], domain_id: str) -> dict:
        """Create a project or user (KIND) named NAME; returns Keystone's record.

        A 409 is resolved by name: when an earlier attempt of this very call
        may have created it, the record is adopted; when it existed before,
        the call fails (it is not ours, and will not be deleted); when
        nothing has that name, the 409 was a concurrent write and is retried.
        """
        single = kind[:-1]
        what = f"create {single} {name}"
        sent_before = {"maybe": False}  # may an earlier attempt have created it?

        def attempt() -> dict:
            status, body = self._send_or_transient(
                "POST", f"/{kind}", {single: {"name": name, "domain_id": domain_id, **fields}}
            )
            if status == 201:
                return body[single]
            if status == 409:
                existing = self.find(kind, name, domain_id)
                if existing and sent_before["maybe"]:
                    return existing[0]
                if existing:
                    raise KeystoneAdminError(what, 409, "a resource with that name existed before")
                raise TransientError("HTTP 409", 409, _message(body))
            if is_transient_status(status):
                sent_before["maybe"] = True
                raise TransientError(f"HTTP {status}", status, _message(body))
            raise KeystoneAdminError(what, status, _message(body))

        def guarded() -> dict:
            try:
                return attempt()
            except TransientError as exc:
                if exc.cause == "connection":
                    sent_before["maybe"] = True
                raise

        return call(guarded, what, self.stats, self.policy)

    def _send_or_transient(self, method: str, path: str, json: Any) -> tuple[int, dict]:
        return self._send(method, path, json, None, True)

    def grant(self, project_id: str, user_id: str, role_id: str, what: str) -> None:
        status, body = self.request(
            "PUT", f"/projects/{project_id}/users/{user_id}/roles/{role_id}", what
        )
        if status == 404:
            raise KeystoneAdminError(what, 404, _message(body))

    def revoke(self, project_id: str, user_id: str, role_id: str) -> bool:
        """Revoke a role of a user on a project; False when it was already gone."""
        status, _ = self.request(
            "DELETE",
            f"/projects/{project_id}/users/{user_id}/roles/{role_id}",
            f"revoke role {role_id} of user {user_id} on project {project_id}",
        )
        return status != 404

    def delete(self, kind: str, resource_id: str) -> bool:
        """Delete a project or user; False when it was already gone."""
        status, _ = self.request(
            "DELETE", f"/{kind}/{resource_id}", f"delete {kind[:-1]} {resource_id}"
        )
        return status != 404

    def set_password(self, user_id: str, password: str) -> None:
        what = f"reset the password of user {user_id}"
        status, body = self.request(
            "PATCH", f"/users/{user_id}", what, json={"user": {"password": password}}
        )
        if status == 404:
            raise KeystoneAdminError(what, 404, _message(body))

    def role_assignments(self, project_id: str) -> set[tuple[str, str]]:
        """(user id, role id) pairs granted directly on a project."""
        _, body = self.request(
            "GET",
            "/role_assignments",
            f"list role assignments of project {project_id}",
            params={"scope.project.id": project_id},
        )
        return {
            (a["user"]["id"], a["role"]["id"])
            for a in body.get("role_assignments") or []
            if "user" in a and "role" in a
        }

    def domain_name(self, domain_id: str) -> str:
        status, body = self.request("GET", f"/domains/{domain_id}", f"get domain {domain_id}")
        if status == 404:
            raise KeystoneAdminError(f"domain {domain_id}", 404, "not found")
        return body["domain"]["name"]

    def authenticates(self, user_id: str, password: str, project_id: str) -> bool:
        """True when the user gets a project-scoped token with this password."""
        auth = UserAuth(user_id=user_id, password=password, project_id=project_id)

        def issue(tokens: TokenClient) -> bool:
            try:
                tokens.issue(auth, include_catalog=False)
            except TokenRequestError as exc:
                if exc.status in (401, 403, 404):
                    return False
                raise
            return True

        return self.token_call(f"authenticate user {user_id}", issue)


def _auth_failures(ks_exc: Any) -> tuple[type[Exception], ...]:
    """keystoneauth's errors that _failure translates (keystoneauth1 is imported late)."""
    return (ks_exc.ConnectionError, ks_exc.RetriableConnectionFailure, ks_exc.HttpError)


def _message(body: Mapping[str, Any]) -> str:
    error = body.get("error") if isinstance(body, Mapping) else None
    if isinstance(error, Mapping) and error.get("message"):
        return str(error["message"])[:300]
    return "no message"


class Stop(Exception):
    """A parallel job was skipped because an earlier one failed or the task aborted."""


def run_parallel(
    job: Callable[[Any], Any],
    items: Iterable[Any],
    workers: int,
    should_stop: Callable[[], bool] = lambda: False,
    fail_fast: bool = True,
) -> tuple[list[Any], list[BaseException], bool]:
    """Run JOB over ITEMS on a bounded pool; with FAIL_FAST, start no job after an error.

    Returns (results, errors, stopped): results of the jobs that succeeded,
    the exceptions of those that failed, and whether jobs were skipped
    because SHOULD_STOP said so.
    """
    failed = threading.Event()
    stopped = threading.Event()
    results: list[Any] = []
    errors: list[BaseException] = []
    lock = threading.Lock()

    def run_one(item: Any) -> None:
        if fail_fast and failed.is_set():
            return
        if should_stop():
            stopped.set()
            return
        try:
            value = job(item)
        except Exception as exc:  # collected, reported by the caller
            failed.set()
            with lock:
                errors.append(exc)
            return
        with lock:
            results.append(value)

    items = list(items)
    if not items:
        return [], [], False
    with futures.ThreadPoolExecutor(max_workers=max(1, min(workers, len(items)))) as pool:
        for f in [pool.submit(run_one, item) for item in items]:
            f.result()
    return results, errors, stopped.is_set()


class AbortWatch:
    """Says, at most once a second, whether `rally task abort` was asked for this task."""

    def __init__(self, task_uuid: str | None, interval: float = 1.0) -> None:
        self.task_uuid = task_uuid
        self.interval = interval
        self._last = 0.0
        self._aborting = False
        self._lock = threading.Lock()

    def __call__(self) -> bool:
        if self._aborting or not self.task_uuid:
            return self._aborting
        with self._lock:
            now = time.monotonic()
            if now - self._last >= self.interval:
                self._last = now
                self._aborting = _task_aborting(self.task_uuid)
        return self._aborting


def _task_aborting(task_uuid: str) -> bool:
    try:
        from rally import consts
        from rally.common import objects

        status = objects.Task.get_status(task_uuid)
    except Exception:  # no DB (unit tests, validation): not aborting
        return False
    # A soft abort lets the current workload finish: only a hard one stops setup.
    # Rally may mark the task ``aborted`` at once, while our setup still runs
    # (seen with rally 4: ``running`` then ``aborted``, never ``aborting``).
    return status in (consts.TaskStatus.ABORTING, consts.TaskStatus.ABORTED)
