"""Where the time went: profile diffs of synthetic collapsed stacks, and the flame graph."""

from __future__ import annotations

import xml.etree.ElementTree as ET

import pytest

from rally_keystone_bench.report.flame import flame_svg
from rally_keystone_bench.verdicts import profiles

PROC = 'process 10:"uwsgi --ini uwsgi.ini";process 11:"uwsgi --ini uwsgi.ini"'
WSGI = "application (keystone_bench_wsgi.py:69);Flask.__call__ (flask/app.py:1536)"
POST = "AuthTokenResource.post (keystone/api/auth.py:450)"
ISSUE = "Manager.issue_token (keystone/token/provider.py:283)"
HASH = "check_password (keystone/common/password_hashing.py:90)"


def stacks(issue_samples: int, hash_samples: int) -> list[str]:
    return [
        f"{PROC};{WSGI};{POST};{ISSUE} {issue_samples}",
        f"{PROC};{WSGI};{POST};{HASH} {hash_samples}",
        f"{PROC} 5000",  # uWSGI waiting in C: no Python frame
    ]


def test_parse_drops_process_frames_and_empty_stacks():
    parsed = profiles.parse(stacks(10, 20))
    assert sum(parsed.values()) == 30
    assert all(not f.startswith("process ") for frames in parsed for f in frames)


ISSUES = {"keystone.issue_token": 10, "keystone.validate_token": 30, profiles.ANY: 40}


def test_an_added_sleep_is_self_time_of_its_caller_per_issue():
    # 100 samples/s; 10 issues a side (and 30 validations that do not sleep):
    # +150 ms per issue = +1500 ms = +150 samples.
    before = profiles.parse(stacks(10, 200))
    after = profiles.parse(stacks(160, 200))
    (top, *rest) = profiles.diff(before, after, (ISSUES, ISSUES), rate=100)
    assert top.function == "keystone/token/provider.py:Manager.issue_token"
    assert top.action == "keystone.issue_token"
    assert top.added_ms == pytest.approx(150.0)
    assert top.under == "keystone/api/auth.py:AuthTokenResource.post"
    assert top.line == "283"
    assert "+150.0 ms per request" in top.sentence()
    assert all(abs(c.added_ms) < 1e-9 for c in rest)


def test_more_requests_on_one_side_is_per_request():
    twice = {k: 2 * v for k, v in ISSUES.items()}
    before = profiles.parse(stacks(10, 200))
    after = profiles.parse(stacks(20, 400))  # the same cost, twice the requests
    changes = profiles.diff(before, after, (ISSUES, twice), rate=100)
    assert all(abs(c.added_ms) < 1e-9 for c in changes)


def test_flame_graph_is_one_self_contained_svg():
    svg = flame_svg(profiles.parse(stacks(10, 30)), "token-suite")
    root = ET.fromstring(svg)
    assert root.tag.endswith("svg")
    titles = [t.text for t in root.iter("{http://www.w3.org/2000/svg}title")]
    assert any(t.startswith(HASH) and "30 samples, 75.0 %" in t for t in titles)
    assert "<script" not in svg and "href" not in svg


def test_the_shift_chart_draws_both_sides_of_each_function_on_one_scale():
    from rally_keystone_bench.report import svg

    rows = [("keystone.issue_token: keystone/api/auth.py:post", 2.0, 152.0),
            ("keystone.issue_token: bcrypt:hashpw", 5.0, 10.0)]  # fmt: skip
    root = ET.fromstring(svg.self_time_shift("where", rows, "baseline"))
    ns = "{http://www.w3.org/2000/svg}"
    widths = {
        (r.get("class"), r.find(f"{ns}title").text.split(":")[1]): float(r.get("width"))
        for r in root.iter(f"{ns}rect")
        if r.get("class") in ("before", "after")
    }
    assert widths[("after", " keystone/api/auth.py")] > 10 * widths[("after", " bcrypt")]
    assert widths[("before", " keystone/api/auth.py")] < widths[("before", " bcrypt")]
    texts = [t.text for t in root.iter(f"{ns}text")]
    assert "+150.0 ms" in texts and "+5.0 ms" in texts
    assert int(root.get("height")) > 2 * 40  # a row per function


def test_gate_and_compare_pages_show_the_counters_and_where_the_time_went(tmp_path):
    from rally_keystone_bench.report import counters as report_counters
    from rally_keystone_bench.verdicts import counters

    shapes = {"SELECT a FROM assignment WHERE b = ?": 1.0}
    one = counters.ActionCounters("keystone.validate_token", (9,) * 5, (0.001,) * 5, {}, {})
    two = counters.ActionCounters(
        "keystone.validate_token", (10,) * 5, (0.001,) * 5, shapes,
        {s: counters.label(s) for s in shapes},
    )  # fmt: skip
    changes = counters.compare({one.action: one}, {two.action: two})
    before = profiles.parse(stacks(10, 200))
    after = profiles.parse(stacks(160, 200))
    went = profiles.diff(before, after, (ISSUES, ISSUES), rate=100)
    shown = report_counters.evidence_html(changes, {}, went, "baseline")
    assert "keystone.validate_token: 9 -> 10 SQL statements" in shown["counts"][0]
    assert "keystone/token/provider.py:Manager.issue_token" in shown["went"][0]
    assert report_counters.evidence_html([], {}, [], "base") is None

    from rally_keystone_bench.report.render import environment

    html = (
        environment()
        .from_string('{% with other = "baseline" %}{% include "_evidence.html.j2" %}{% endwith %}')
        .render(evidence=shown)
    )
    assert "9 -&gt; 10 SQL statements" in html
    assert "candidate - baseline" in html and html.count("<svg") == 1
    assert "keystone/token/provider.py:Manager.issue_token" in html


SLEEP_POST = "AuthTokenResource.post (keystone/api/auth.py:{line})"


def _keystone_tree(root) -> list:
    """A Keystone environment whose auth.py sleeps at line 325, as the +150 ms tree does."""
    from rally_keystone_bench.deploy import profiling

    site = root / "lib" / "python3.11" / "site-packages"
    auth = site / "keystone" / "api" / "auth.py"
    auth.parent.mkdir(parents=True)
    lines = [f"# line {n}" for n in range(1, 400)]
    lines[324] = "        time.sleep(0.15)"
    lines[333] = "        response.headers['X-Subject-Token'] = token.id"
    auth.write_text("\n".join(lines) + "\n")
    return profiling.source_roots(root)


def test_the_150_ms_sleep_is_named_at_its_line_with_the_call_made_there(tmp_path):
    """Self time summed per function must not borrow a line that took none of it: the
    candidate's 3,540 leaf samples at auth.py:325 and one at 334 name line 325."""
    from rally_keystone_bench.deploy import profiling

    issues = {"keystone.issue_token": 236, profiles.ANY: 236}
    before = {(WSGI, SLEEP_POST.format(line=334)): 1}
    after = {(WSGI, SLEEP_POST.format(line=325)): 3540, (WSGI, SLEEP_POST.format(line=334)): 1}
    reader = profiling.line_reader(_keystone_tree(tmp_path / "venv"))
    (top, *_) = profiles.diff(before, after, (issues, issues), rate=100, source=reader)
    assert top.function == "keystone/api/auth.py:AuthTokenResource.post"
    assert top.added_ms == pytest.approx(150.0)
    assert top.line == "325"
    assert [(s.line, round(s.share, 3), s.text) for s in top.lines] == [
        ("325", 1.0, "time.sleep(0.15)")
    ]
    assert top.sentence().startswith(
        "keystone.issue_token: keystone/api/auth.py:AuthTokenResource.post "
        "line 325 (100 %: time.sleep(0.15)) +150.0 ms per request"
    )


def test_a_change_over_two_lines_names_both_with_their_shares():
    issues = {"keystone.issue_token": 10, profiles.ANY: 10}
    before = {(WSGI, SLEEP_POST.format(line=330)): 50}  # unchanged work elsewhere in post
    after = {
        (WSGI, SLEEP_POST.format(line=330)): 50,
        (WSGI, SLEEP_POST.format(line=325)): 120,
        (WSGI, SLEEP_POST.format(line=334)): 40,
        (WSGI, SLEEP_POST.format(line=336)): 1,  # under 5 % of the change: not named
    }
    (top, *_) = profiles.diff(before, after, (issues, issues), rate=100)
    assert [(s.line, s.share) for s in top.lines] == [("325", 120 / 161), ("334", 40 / 161)]
    assert "line 325 (75 %), line 334 (25 %) +161.0 ms" in top.sentence()


def test_line_reader_reads_the_sides_tree_and_nothing_outside_it(tmp_path):
    from rally_keystone_bench.deploy import profiling

    reader = profiling.line_reader(_keystone_tree(tmp_path / "venv"))
    assert reader("keystone/api/auth.py", "325") == "time.sleep(0.15)"
    assert reader("keystone/api/auth.py", "400") is None  # past its end
    assert reader("keystone/api/missing.py", "1") is None
    assert reader("../../../../../etc/passwd", "1") is None
    assert reader("keystone/api/auth.py", "?") is None
    absolute = tmp_path / "hook.py"
    absolute.write_text("x = 1\n" + "y = " + "2" * 200 + "\n")
    assert reader(str(absolute), "1") == "x = 1"
    assert reader(str(absolute), "2").endswith("...") and len(reader(str(absolute), "2")) == 80


def test_a_local_checkout_installed_editable_is_read_from_its_tree(tmp_path):
    """A candidate checkout is installed with ``pip install -e``: its files are in the
    tree setuptools' finder maps, not in site-packages; the stock file beside it in the
    baseline's environment says something else at that line and must not be read."""
    from rally_keystone_bench.deploy import profiling
    from rally_keystone_bench.driver.evidence import Evidence

    tree = tmp_path / "checkout"
    _keystone_tree(tmp_path / "built")  # the file, then moved into a checkout's layout
    (tmp_path / "built" / "lib" / "python3.11" / "site-packages").rename(tree)
    site = tmp_path / "venv" / "lib" / "python3.11" / "site-packages"
    site.mkdir(parents=True)
    (site / "__editable___keystone_30_0_0_finder.py").write_text(
        f"import sys\nMAPPING: dict[str, str] = {{'keystone': '{tree / 'keystone'}'}}\n"
    )
    roots = profiling.source_roots(tmp_path / "venv")
    assert roots[0] == tree
    assert profiling.line_reader(roots)("keystone/api/auth.py", "325") == "time.sleep(0.15)"

    stock = tmp_path / "stock" / "lib" / "python3.11" / "site-packages" / "keystone" / "api"
    stock.mkdir(parents=True)
    (stock / "auth.py").write_text("# stock\n" * 400)
    evidence = Evidence()
    evidence.sources = {"baseline": profiling.source_roots(tmp_path / "stock"), "candidate": []}
    issues = {"keystone.issue_token": 236, profiles.ANY: 236}
    sides = (("baseline", SLEEP_POST.format(line=334), 10), ("candidate", None, 3540))
    for side, frames, n in sides:
        evidence.stacks[side][(WSGI, frames or SLEEP_POST.format(line=325))] = n
        evidence.requests[side].update(issues)
    (top, *_) = evidence.where_time_went()
    assert top.lines[0].line == "325" and top.lines[0].text is None  # not the stock "# stock"
