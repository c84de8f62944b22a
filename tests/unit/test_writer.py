"""writer.py, the one writer of files: whole files atomically, private ones 0600 from the start."""

from __future__ import annotations

import json
import os
import stat

import pytest

from rally_keystone_bench import writer


def mode(path) -> int:
    return stat.S_IMODE(os.stat(path).st_mode)


def test_a_file_is_written_whole_and_nothing_else_is_left(tmp_path):
    path = tmp_path / "summary.json"
    path.write_text("the old one\n")
    assert writer.write_text(path, "héllo\n") == path
    assert path.read_bytes() == "héllo\n".encode()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["summary.json"]


def test_a_private_file_is_its_owners_only_whatever_the_umask(tmp_path):
    old = os.umask(0)
    try:
        writer.write_private(tmp_path / "openrc", "export OS_PASSWORD=x\n")
        writer.write_text(tmp_path / "page.html", "<p>")
    finally:
        os.umask(old)
    assert mode(tmp_path / "openrc") == 0o600
    assert mode(tmp_path / "page.html") == 0o666  # what open(.., "w") makes under umask 0


def test_json_is_written_as_json_dumps_would_print_it(tmp_path):
    doc = {"b": [1, 2.5], "a": None}
    writer.write_json(tmp_path / "a.json", doc)
    assert (tmp_path / "a.json").read_text() == json.dumps(doc, indent=2) + "\n"
    writer.write_json(tmp_path / "b.json", doc, indent=None, newline=False, sort_keys=True)
    assert (tmp_path / "b.json").read_text() == json.dumps(doc, sort_keys=True)


def test_a_link_keeps_pointing_at_the_file_written(tmp_path):
    (tmp_path / "real").write_text("a")
    (tmp_path / "link").symlink_to(tmp_path / "real")
    writer.write_text(tmp_path / "link", "b")
    assert (tmp_path / "link").is_symlink() and (tmp_path / "real").read_text() == "b"


def test_a_device_is_written_in_place():
    writer.write_text(os.devnull, "nothing\n")  # --json /dev/stdout is written the same way
    assert os.path.exists(os.devnull)


def test_an_error_names_the_file_asked_for(tmp_path):
    with pytest.raises(FileNotFoundError) as err:
        writer.write_text(tmp_path / "no" / "x.json", "{}")
    assert err.value.filename == str(tmp_path / "no" / "x.json")


def test_a_key_is_made_once(tmp_path):
    writer.create_private(tmp_path / "key", "k1\n")
    with pytest.raises(FileExistsError):
        writer.create_private(tmp_path / "key", "k2\n")
    assert (tmp_path / "key").read_text() == "k1\n" and mode(tmp_path / "key") == 0o600


def test_a_copy(tmp_path):
    (tmp_path / "a").write_bytes(b"\x00report")
    writer.copy(tmp_path / "a", tmp_path / "b")
    assert (tmp_path / "b").read_bytes() == b"\x00report"


def test_a_stream_is_opened_to_write_or_append_only(tmp_path):
    with writer.open_stream(tmp_path / "log", "w") as out:
        out.write("one\n")
    with writer.open_stream(tmp_path / "log") as out:
        out.write("two\n")
    assert (tmp_path / "log").read_text() == "one\ntwo\n"
    with pytest.raises(ValueError):
        writer.open_stream(tmp_path / "log", "r+")


def test_a_move_replaces_its_target_and_a_touch_keeps_what_is_there(tmp_path):
    (tmp_path / "made").write_text("public key")
    (tmp_path / "there").write_text("old")
    writer.move(tmp_path / "made", tmp_path / "there")
    assert (tmp_path / "there").read_text() == "public key"
    assert not (tmp_path / "made").exists()
    writer.touch(tmp_path / "there")
    assert (tmp_path / "there").read_text() == "public key"
    writer.touch(tmp_path / "new")
    assert (tmp_path / "new").read_bytes() == b""
