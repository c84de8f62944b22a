"""The profile run keeps: what the flame graph and the gate read, without the bulk."""

from rally_keystone_bench.deploy import profiling
from rally_keystone_bench.verdicts import profiles

VENV = "/root/.cache/rally-keystone-bench/venvs/keystone-30.0.0/lib/python3.11/site-packages"
STDLIB = "/root/.pyenv/versions/3.11.7/lib/python3.11"
PROC = 'process 10:"uwsgi --ini ' + "/long/run/dir" * 40 + '/uwsgi.ini"'
POST = f"AuthTokenResource.post ({VENV}/keystone/api/auth.py:450)"
LOCK = f"wait ({STDLIB}/threading.py:320)"


def test_process_frames_and_install_prefixes_go_and_equal_stacks_are_summed():
    raw = [
        f"{PROC};{POST};{LOCK} 3",
        f'process 11:"uwsgi";{POST};{LOCK} 4',
        f"{PROC} 5000",  # uWSGI waiting in C: nothing any reader keeps
    ]
    kept = profiling.compact(raw)
    assert kept == {"AuthTokenResource.post (keystone/api/auth.py:450);wait (threading.py:320)": 7}
    written = [f"{s} {n}" for s, n in kept.items()]
    assert sum(len(x) for x in written) * 10 < sum(len(x) for x in raw)
    # the readers find the same handler, action and samples as in the raw stacks
    [frames] = profiles.parse(written)
    assert profiles.handler_of(frames) == "keystone/api/auth.py:AuthTokenResource.post"
    # the same self time per request as the raw stacks give, function by function
    raw_self = profiles.self_ms(profiles.parse(raw), 100, {"keystone.issue_token": 7})
    kept_self = profiles.self_ms(profiles.parse(written), 100, {"keystone.issue_token": 7})
    assert sorted(raw_self.values()) == sorted(kept_self.values())


def test_stacks_are_stored_compressed_and_read_back_the_same(tmp_path):
    deep = ";".join(f"f{i} (keystone/m{i}.py:{i})" for i in range(80))
    raw = [f"{PROC};{deep};leaf{n % 50} (keystone/x.py:{n}) {n % 7 + 1}" for n in range(2000)]
    kept = profiling.compact(raw)
    path = profiling.write_stacks(tmp_path / "t-profile.txt", kept)
    assert path.name == "t-profile.txt.xz"
    assert path.stat().st_size * 100 < sum(len(x) for x in raw)
    assert profiles.parse(profiling.read_lines(path)) == profiles.parse(raw)
