"""``keystone-bench mock``: a minimal, fast Keystone v3 token service on loopback.

The paper's baseline (a token service with none of Keystone's work behind
it), standard library only. It serves version discovery, token issue
(password and token methods; project, domain, system or no scope;
``nocatalog``), validate, check and revoke, and the admin calls that
``rally env check``, Rally's ``users`` context and our contexts make
(domains, projects, users, roles, role assignments, services, endpoints).

Processes. ``workers`` processes share one listening socket (forked after
bind), each a ``ThreadingHTTPServer`` speaking HTTP/1.1 with keep-alive.
State lives in RUN_DIR: a SQLite database (WAL) for the admin resources and
revoked tokens, and an HMAC key. A token is ``payload.signature``: the
payload (user, scope, methods, expiry, a random audit id) signed with that
key, so any worker validates any token; a revoke is a row in the database.

Load knobs, for token requests only (``/v3/auth/tokens``):

* ``service_time_ms``: each worker serves one token request at a time for
  that long (a lock held while sleeping), so the mock's capacity is
  ``workers * 1000 / service_time_ms`` requests per second; past it,
  requests queue and latency grows.
* ``slope_ms_per_s``: extra latency of K ms per second since start, outside
  the lock (it does not change the capacity).
* ``error_rate``: that fraction of token requests is answered with HTTP 500.
* ``stall_s`` every ``stall_every_s``: every worker stops answering token
  requests for ``stall_s`` seconds, starting ``stall_every_s`` seconds after
  start and again every ``stall_every_s`` seconds (the clock is shared by
  the forked workers). A request that arrives during a stall is answered
  when it ends, then waits its turn for the service time: the server-side
  hiccup that coordinated omission hides from a closed-loop generator.
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import secrets
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

from rally_keystone_bench import writer
from rally_keystone_bench.clients import credentials
from rally_keystone_bench.deploy.mock_http import MockServer
from rally_keystone_bench.deploy.mock_store import (
    ADMIN_PROJECT,
    ADMIN_USER,
    REGION,
    Store,
    Tokens,
    bootstrap,
)
from rally_keystone_bench.errors import BenchError, Interrupted


# -- process -------------------------------------------------------------------
def _bind(
    port: int | None, store: Store, tokens: Tokens, options: dict, host: str = "127.0.0.1"
) -> MockServer:
    try:
        return MockServer((host, port or 0), store, tokens, options)
    except OSError as exc:
        where = f"{host}:{port}" if port else f"{host} (any free port)"
        raise BenchError(f"cannot listen on {where}: {exc.strerror}") from None


def serve(
    run_dir: Path,
    port: int | None = None,
    workers: int = 1,
    service_time_ms: float = 0.0,
    slope_ms_per_s: float = 0.0,
    error_rate: float = 0.0,
    announce=print,
    stall_s: float = 0.0,
    stall_every_s: float = 0.0,
    host: str = "127.0.0.1",
) -> int:
    """Run the mock in the foreground until SIGTERM or Ctrl-C."""
    if workers < 1 or service_time_ms < 0 or slope_ms_per_s < 0 or not 0 <= error_rate <= 1:
        raise BenchError(
            "need --workers >= 1, --service-time >= 0, --slope >= 0, 0 <= --error-rate <= 1"
        )
    check_stall(stall_s, stall_every_s)
    options = {
        "service_time_ms": service_time_ms,
        "slope_ms_per_s": slope_ms_per_s,
        "error_rate": error_rate,
        "stall_s": stall_s,
        "stall_every_s": stall_every_s,
    }
    server, base = _listen(run_dir, port, options, host)
    children: list[int] = []
    stopped_by = [signal.SIGINT]  # Ctrl-C arrives as KeyboardInterrupt (see boundary.run)

    def _stop(signum, frame):
        stopped_by[0] = signum
        raise KeyboardInterrupt

    signal.signal(signal.SIGTERM, _stop)
    try:  # from the first fork on: a signal at any point stops every worker
        _fork_workers(server, workers - 1, children)
        announce(
            f"mock Keystone: {workers} worker(s), service time {service_time_ms:g} ms, "
            f"slope {slope_ms_per_s:g} ms/s, error rate {error_rate:g}"
            + (f", stalls {stall_s:g} s every {stall_every_s:g} s" if stall_s else "")
        )
        announce(f"auth URL: {base}/v3")
        announce(f"openrc: {run_dir / 'openrc'}")
        server.serve_forever()
    except KeyboardInterrupt:
        # Stopped by a signal, as a foreground service is: 130 or 143, said so.
        raise Interrupted(int(stopped_by[0])) from None
    finally:
        for pid in children:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGTERM)
        for pid in children:
            with contextlib.suppress(ChildProcessError):
                os.waitpid(pid, 0)
        server.server_close()
        for name in ("mock.pid", "mock.json"):
            (run_dir / name).unlink(missing_ok=True)
    return 0


def _listen(run_dir: Path, port: int | None, options: dict, host: str) -> tuple[MockServer, str]:
    """Fresh state in RUN_DIR, the bound server, the admin's files; the server and its base URL."""
    run_dir.mkdir(parents=True, exist_ok=True)
    key_path, db_path = run_dir / "mock.key", run_dir / "mock.sqlite"
    for stale in (db_path, Path(f"{db_path}-wal"), Path(f"{db_path}-shm")):
        stale.unlink(missing_ok=True)
    writer.write_private(key_path, secrets.token_hex(32))
    store = Store(db_path)
    tokens = Tokens(key_path.read_text().encode(), store)
    server = _bind(port, store, tokens, options, host)
    real_port = server.server_address[1]
    base = f"http://{host}:{real_port}"
    password = secrets.token_urlsafe(16)
    bootstrap(store, password, base)
    os.chmod(db_path, 0o600)
    store.db.close()
    store._local = threading.local()
    writer.write_private(run_dir / "admin-password", password + "\n")
    admin = {"auth_url": f"{base}/v3", "username": ADMIN_USER, "password": password}
    admin |= {"project_name": ADMIN_PROJECT, "region_name": REGION}
    writer.write_private(run_dir / "openrc", credentials.openrc_text(admin))
    state = json.dumps({"port": real_port, "pid": os.getpid()}) + "\n"
    writer.write_private(run_dir / "mock.json", state)  # its state: its owner's only
    writer.write_private(run_dir / "mock.pid", f"{os.getpid()}\n")
    return server, base


def _fork_workers(server: MockServer, count: int, children: list[int]) -> None:
    """Fork COUNT workers serving SERVER's socket; each pid goes into CHILDREN as it starts."""
    for _ in range(count):
        # SIGTERM waits (blocked) until the worker has its own disposition: a
        # SIGTERM to a worker that still had our Python handler would be lost.
        sigs = {signal.SIGTERM, signal.SIGINT}
        signal.pthread_sigmask(signal.SIG_BLOCK, sigs)
        pid = os.fork()
        if pid == 0:  # a worker: serve on the inherited socket until killed
            try:
                signal.signal(signal.SIGTERM, signal.SIG_DFL)
                signal.signal(signal.SIGINT, signal.SIG_IGN)
                signal.pthread_sigmask(signal.SIG_UNBLOCK, sigs)
                server.serve_forever()
            finally:
                os._exit(0)
        children.append(pid)
        signal.pthread_sigmask(signal.SIG_UNBLOCK, sigs)


def check_stall(stall_s: float, stall_every_s: float) -> None:
    """BenchError unless the stall is off or 0 < stall < stall-every."""
    if not (math.isfinite(stall_s) and math.isfinite(stall_every_s)):
        raise BenchError("--stall and --stall-every must be finite numbers of seconds")
    if stall_s < 0 or stall_every_s < 0:
        raise BenchError("--stall and --stall-every must not be negative")
    if stall_s and not stall_every_s:
        raise BenchError("--stall needs --stall-every above 0 (seconds from one stall to the next)")
    if stall_s and stall_s >= stall_every_s:
        raise BenchError(
            f"--stall {stall_s:g} s must be shorter than --stall-every {stall_every_s:g} s"
        )


# -- Python API ----------------------------------------------------------------
class MockKeystone:
    """The mock as a subprocess, for tests and the capacity search.

    ``with MockKeystone(workers=2, service_time_ms=5) as ks: ks.auth_url``; its
    known capacity is ``workers * 1000 / service_time_ms`` requests per second.
    """

    def __init__(
        self,
        workers: int = 1,
        service_time_ms: float = 0.0,
        slope_ms_per_s: float = 0.0,
        error_rate: float = 0.0,
        port: int | None = None,
        run_dir: Path | str | None = None,
        stall_s: float = 0.0,
        stall_every_s: float = 0.0,
        host: str = "127.0.0.1",
        netns: str | None = None,
    ) -> None:
        self.workers = workers
        self.stall_s = stall_s
        self.stall_every_s = stall_every_s
        self.host = host
        self.netns = netns  # run inside this network namespace (ip netns exec)
        self.service_time_ms = service_time_ms
        self.slope_ms_per_s = slope_ms_per_s
        self.error_rate = error_rate
        self.port = port
        self._tmp = None if run_dir else writer.temporary_directory("ks-mock-")
        self.run_dir = Path(run_dir or self._tmp.name).resolve()
        self.proc: subprocess.Popen | None = None

    @property
    def capacity_rps(self) -> float:
        """Token requests per second the mock can serve; inf without a service time."""
        if not self.service_time_ms:
            return float("inf")
        return self.workers * 1000.0 / self.service_time_ms

    @property
    def openrc_path(self) -> Path:
        return self.run_dir / "openrc"

    @property
    def auth_url(self) -> str:
        if self.port is None:
            raise BenchError("the mock has no port yet: start it first")
        return f"http://{self.host}:{self.port}/v3"

    @property
    def admin_credentials(self) -> dict[str, str]:
        password = (self.run_dir / "admin-password").read_text().strip()
        return credentials.project_admin(self.auth_url, ADMIN_USER, password, ADMIN_PROJECT)

    def __enter__(self) -> MockKeystone:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def start(self, timeout: float = 30.0) -> None:
        self.run_dir.mkdir(parents=True, exist_ok=True)
        state = self.run_dir / "mock.json"
        state.unlink(missing_ok=True)
        settings = {
            "run_dir": str(self.run_dir),
            "port": self.port,
            "workers": self.workers,
            "service_time_ms": self.service_time_ms,
            "slope_ms_per_s": self.slope_ms_per_s,
            "error_rate": self.error_rate,
            "stall_s": self.stall_s,
            "stall_every_s": self.stall_every_s,
            "host": self.host,
        }
        # The mock's own entry point (see the end of this module), not the CLI.
        cmd = [sys.executable, "-m", "rally_keystone_bench.deploy.mock", json.dumps(settings)]
        if self.netns:
            cmd = ["ip", "netns", "exec", self.netns, *cmd]
        log = writer.open_stream(self.run_dir / "mock.log", "wb")
        self.proc = subprocess.Popen(
            cmd, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL
        )
        log.close()
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                tail = (self.run_dir / "mock.log").read_text().strip().splitlines()[-1:]
                raise BenchError(f"the mock exited at start: {' '.join(tail)}")
            if state.exists():
                with contextlib.suppress(ValueError):
                    self.port = json.loads(state.read_text())["port"]
                    if self._answers():
                        return
            time.sleep(0.05)
        self.stop()
        raise BenchError(f"the mock did not answer within {timeout:g} s")

    def _answers(self) -> bool:
        try:
            if self.netns:  # not reachable from here: the mock wrote its state file
                return True
            with socket.create_connection((self.host, self.port), timeout=1):
                return True
        except OSError:
            return False

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.proc = None
        if self._tmp is not None:
            self._tmp.cleanup()
            self._tmp = None


def _serve_settings(text: str) -> int:
    """Serve with the keyword arguments of ``serve`` given as one JSON object."""
    settings = json.loads(text)
    settings["run_dir"] = Path(settings["run_dir"])
    try:
        return serve(**settings, announce=lambda line: print(line, flush=True))
    except Interrupted as exc:
        return exc.exit_code
    except BenchError as exc:
        print(f"mock: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(_serve_settings(sys.argv[1]))
