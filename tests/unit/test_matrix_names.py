"""Matrix deployment names: unique, and safe as a directory name (issue 27, item 8)."""

import pytest

from rally_keystone_bench import cli


@pytest.mark.parametrize(
    "text, said",
    [
        ("a:\n  workers: 1\na:\n  workers: 2\n", "'a' appears twice (lines 1 and 3)"),
        ('"../../../escaped-row":\n  workers: 1\n', "is not a safe directory name"),
        ("'.hidden': {}\n", "is not a safe directory name"),
        ("'a b': {}\n", "is not a safe directory name"),
        ("1: {}\n'1': {}\n", "'1' appears twice"),
    ],
)
def test_bad_names_are_refused_in_one_line(tmp_path, capsys, text, said):
    f = tmp_path / "deps.yaml"
    f.write_text(text)
    rc = cli.main(["matrix", "--deployments", str(f), "--task", "tasks/gate.yaml"])
    err = capsys.readouterr().err
    assert rc == 2
    assert said in err
    assert len(err.strip().splitlines()) == 1
    assert not (tmp_path.parent / "escaped-row").exists()
