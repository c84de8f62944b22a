"""Progress of a Rally task: a line per workload, iterations of the total, ETA, failures."""

import io
from pathlib import Path

from rally_keystone_bench import shipped
from rally_keystone_bench.driver import workload_progress as wp

SUITE = shipped.DATA / "tasks" / "token-suite.yaml"


class Clock:
    def __init__(self):
        self.t = 100.0

    def __call__(self):
        return self.t


class Tty(io.StringIO):
    def isatty(self):
        return True


def test_the_token_suite_plan_names_each_workload_by_its_distinguishing_args():
    planned = wp.plan(SUITE, {"times": 10})
    assert [p.label for p in planned] == [
        "KeystoneTokens.authenticate(password)",
        "KeystoneTokens.authenticate(token)",
        "KeystoneTokens.validate(GET)",
        "KeystoneTokens.validate(HEAD)",
        "KeystoneTokens.concurrent_create(project)",
        "KeystoneTokens.lifecycle",
    ]
    assert [p.times for p in planned] == [10, 10, 10, 10, 3, 5]


def test_an_unreadable_task_gives_no_plan(tmp_path: Path):
    bad = tmp_path / "t.yaml"
    bad.write_text("{% if %}")
    assert wp.plan(bad, {}) == []


def _feed(board, clock, lines):
    done = failed = started = 0
    for dt, line, d, f, *s in lines:
        clock.t += dt
        done, failed, started = done + d, failed + f, started + sum(s)
        board.feed(line, done, failed, started)


def test_plain_lines_in_a_log_say_workload_i_of_n_the_total_elapsed_and_eta():
    clock, said = Clock(), []
    planned = [wp.Planned("A.x(GET)", times=4), wp.Planned("A.y", duration=30.0)]
    board = wp.Board(planned, said.append, every=5.0, stream=io.StringIO(), clock=clock)
    _feed(
        board,
        clock,
        [
            (0, "INFO rally.task.engine [-] Running workload: ", 0, 0),
            (3, "Task u | ITER: 1 START", 0, 0, 1),  # contexts set up in 3 s
            (3, "Task u | ITER: 1 END: OK", 1, 0),  # 6 s: a line is due
            (1, "Task u | ITER: 2 END: Error", 1, 1),  # 1 s later: not yet
            (2, "Task u | ITER: 3 END: OK", 1, 0),
            (1, "Task u | ITER: 4 END: OK", 1, 0),
            (0, "Finished workload 1/2 of subtask 1", 0, 0),
            (0, "Running workload: ", 0, 0),
            (0, "Task u | ITER: 1 START", 0, 0, 1),
            (10, "Task u | ITER: 1 END: OK", 1, 0),
        ],
    )
    board.close()
    assert said == [
        "[1/2] A.x(GET): 4 iterations ...",
        "[1/2] A.x(GET): 1/4 iterations, 0 failed, 6.0 s elapsed, ETA 9.0 s",
        "[1/2] A.x(GET): finished, 4 iterations, 1 failed, in 10.0 s",
        "[2/2] A.y: 30 s ...",
        "[2/2] A.y: 1 iterations, 10/30 s, 0 failed, 10.0 s elapsed, ETA 20.0 s",
        "[2/2] A.y: finished, 1 iterations, 0 failed, in 10.0 s",
    ]


def test_a_terminal_gets_one_live_line_rewritten_in_place():
    clock, said, tty = Clock(), [], Tty()
    board = wp.Board([wp.Planned("A.x", times=2)], said.append, stream=tty, clock=clock)
    _feed(
        board,
        clock,
        [
            (0, "Running workload: ", 0, 0),
            (0, "ITER: 1 START", 0, 0, 1),
            (1, "ITER: 1 END: OK", 1, 0),
        ],
    )
    assert tty.getvalue() == "\r\x1b[K[1/1] A.x: 1/2 iterations, 0 failed, 1.0 s elapsed, ETA 1.0 s"
    board.close()
    assert tty.getvalue().endswith("\r\x1b[K")  # cleared before the plain line
    assert said == [
        "[1/1] A.x: 2 iterations ...",
        "[1/1] A.x: finished, 1 iterations, 0 failed, in 1.0 s",
    ]


def test_without_a_plan_workloads_are_still_counted():
    clock, said = Clock(), []
    board = wp.Board([], said.append, stream=io.StringIO(), clock=clock)
    _feed(board, clock, [(0, "Running workload: ", 0, 0), (1, "ITER: 1 END: OK", 1, 0)])
    board.close()
    assert said == [
        "[1] workload 1: size unknown ...",
        "[1] workload 1: finished, 1 iterations, 0 failed, in 1.0 s",
    ]


def test_no_password_names_a_workload():
    assert wp.label("S.run", {"password": "Secr3t", "scope": "project"}) == "S.run(project)"
