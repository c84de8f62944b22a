"""Errors that the keystone-bench command turns into exit codes."""

EXIT_OK = 0
EXIT_VERDICT = 1
EXIT_BAD_INPUT = 2


class BenchError(Exception):
    """Bad input or environment: one line on stderr and exit code 2.

    The message must never hold a token value or a password.
    """

    exit_code = EXIT_BAD_INPUT


class VerdictFailed(Exception):
    """A verdict failed (SLA, regression, degradation): exit code 1."""

    exit_code = EXIT_VERDICT
