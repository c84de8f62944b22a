"""keystone-bench cleanup --workload-id: which names it takes, in which order (issue 27, item 5)."""

import pytest

from rally_keystone_bench import cli
from rally_keystone_bench.plugins.contexts import leftovers


def test_a_workload_id_is_a_uuid_or_its_first_8_hex_digits():
    assert leftovers.check_workload("4A88FEA2-1234-4000-8000-000000000000") == "4a88fea2"
    assert leftovers.check_workload("4a88fea2") == "4a88fea2"
    assert leftovers.prefixes("4a88fea2") == ("rkb-4a88fea2-", "c_rally_4a88fea2_")


@pytest.mark.parametrize("bad", ["", "4a88fea", "reuse-abc", "rkb-*", "4a88fea2/../x", "*"])
def test_anything_else_is_refused_in_one_line(bad, capsys, monkeypatch):
    for k in ("OS_AUTH_URL", "OS_USERNAME", "OS_PASSWORD"):
        monkeypatch.setenv(k, "x")
    assert cli.main(["cleanup", "--workload-id", bad]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "--workload-id" in err[0]


def test_cleanup_needs_one_of_reuse_or_workload(capsys):
    assert cli.main(["cleanup"]) == 2
    assert cli.main(["cleanup", "--reuse", "t", "--workload-id", "4a88fea2"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert (
        err
        == ["keystone-bench: cleanup needs one of --reuse TAG, --workload-id ID or --load ID"] * 2
    )


def test_projects_go_leaf_first():
    root = {"id": "r", "parent_id": "d"}
    mid = {"id": "m", "parent_id": "r"}
    leaves = [{"id": f"l{i}", "parent_id": "m"} for i in range(3)]
    other = {"id": "o", "parent_id": "d"}
    rounds = leftovers.leaf_first([root, mid, *leaves, other])
    assert [sorted(p["id"] for p in r) for r in rounds] == [
        ["l0", "l1", "l2", "o"],
        ["m"],
        ["r"],
    ]


class FakeAdmin:
    """Keystone's answers to list and delete, by kind (no HTTP: the order is the point)."""

    def __init__(self, records):
        self.records, self.deleted = records, []

    def request(self, method, path, what, params=None):
        kind = path.strip("/")
        return 200, {kind: list(self.records.get(kind, []))}

    def delete(self, kind, rid):
        self.deleted.append((kind, rid))
        return True


def test_only_the_workloads_names_are_deleted_members_first():
    admin = FakeAdmin(
        {
            "users": [{"id": "u1", "name": "rkb-4a88fea2-p00-u0000"}, {"id": "u2", "name": "bob"}],
            "projects": [
                {"id": "p1", "name": "c_rally_4a88fea2_x", "parent_id": "d"},
                {"id": "p2", "name": "rkb-4a88fea3-p00", "parent_id": "d"},
            ],
            "regions": [{"id": "rkb-4a88fea2-region00"}, {"id": "RegionOne"}],
            "services": [{"id": "s1", "name": "rkb-4a88fea2-svc000"}, {"id": "s2"}],
        }
    )
    counts = leftovers.delete_workload(admin, "4a88fea2", workers=1)
    assert admin.deleted == [
        ("users", "u1"),
        ("projects", "p1"),
        ("services", "s1"),
        ("regions", "rkb-4a88fea2-region00"),
    ]
    assert leftovers.describe(counts) == "1 users, 1 projects, 1 services, 1 regions"
