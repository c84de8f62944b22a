"""``keystone-bench mock`` in the foreground: signals and refusals (issue 27, items 10, 11).

SIGINT ends it with 130 and SIGTERM with 143, as every verb; a refusal is one
line that says what is wrong.
"""

from __future__ import annotations

import signal
import subprocess
import sys

import pytest

pytestmark = pytest.mark.functional


def mock(*args: str, **kwargs) -> list[str]:
    return [sys.executable, "-m", "rally_keystone_bench.cli", "mock", *args]


def _ignore_sigint() -> None:
    signal.signal(signal.SIGINT, signal.SIG_IGN)


@pytest.mark.parametrize(
    "sig, code, sigint_ignored",
    [(signal.SIGINT, 130, False), (signal.SIGTERM, 143, False), (signal.SIGINT, 130, True)],
)
def test_mock_exits_128_plus_the_signal(tmp_path, sig, code, sigint_ignored):
    """SIGINT/SIGTERM once the mock printed its openrc (by construction, it serves):
    exit 130/143, one line, no pid file. Bound: 30 s to exit, for a SIGTERM to its 2
    worker processes and a wait; no exit time of the mock was measured.

    The third case starts the mock with SIGINT ignored, as bash leaves it for a
    script's background job (``cmd &``): it ran forever after a SIGINT until every
    verb's boundary restored Ctrl-C (found by the flake hunt's loops, run that way)."""
    proc = subprocess.Popen(
        mock("--run-dir", str(tmp_path), "--workers", "2"),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        preexec_fn=_ignore_sigint if sigint_ignored else None,
    )
    assert proc.stdout is not None
    try:
        for line in proc.stdout:
            if line.startswith("openrc:"):
                break
        proc.send_signal(sig)
        _, err = proc.communicate(timeout=30)
    finally:  # a mock that did not stop is not left serving
        if proc.poll() is None:
            proc.terminate()
            proc.communicate(timeout=30)
    assert proc.returncode == code
    assert err.strip() == f"keystone-bench: interrupted by {sig.name}"
    assert not (tmp_path / "mock.pid").exists()


@pytest.mark.parametrize(
    "args, said",
    [
        (["--host", "10.255.255.1"], "cannot listen on 10.255.255.1 (any free port):"),
        (["--stall", "1", "--stall-every", "0"], "--stall needs --stall-every above 0"),
    ],
)
def test_mock_refusals_are_one_true_line(tmp_path, args, said):
    proc = subprocess.run(
        mock("--run-dir", str(tmp_path), *args), capture_output=True, text=True, timeout=60
    )
    assert proc.returncode == 2
    assert len(proc.stderr.strip().splitlines()) == 1, proc.stderr
    assert said in proc.stderr
    assert "None" not in proc.stderr
