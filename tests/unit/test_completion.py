"""``keystone-bench completion bash|zsh``: a script made from the parser, that completes."""

from __future__ import annotations

import shutil
import subprocess

import pytest

from rally_keystone_bench import cli


def _script(shell: str, capsys) -> str:
    assert cli.main(["completion", shell]) == 0
    return capsys.readouterr().out


def _leaf_paths(words: dict[str, list[str]]) -> set[str]:
    return {p for p in words if p}


def test_the_bash_script_lists_every_verb_and_the_gates_options(capsys):
    script = _script("bash", capsys)
    words = cli.completion_words(cli.build_parser())
    verbs = _leaf_paths(words)
    assert {"run", "compare", "gate", "keystone up", "completion"} <= verbs
    for verb in verbs:
        assert f"'{verb}') words=" in script or f" {verb}) words=" in script, verb
    gate_line = next(x for x in script.splitlines() if x.strip().startswith("gate)"))
    gate_options = {
        o for a in cli.build_parser()._subparsers._group_actions[0].choices["gate"]._actions
        for o in a.option_strings
    }  # fmt: skip
    assert {"--baseline", "--candidate", "--threshold", "--max-sql-increase"} <= gate_options
    assert all(f" {o} " in f" {gate_line.split(chr(39))[1]} " for o in gate_options)


def _complete(script: str, *words: str) -> list[str]:
    """What bash offers for WORDS (the last one being completed), with SCRIPT loaded."""
    line = " ".join(f"'{w}'" for w in words)
    probe = (
        f"{script}\nCOMP_WORDS=({line}); COMP_CWORD=$((${{#COMP_WORDS[@]}} - 1));"
        ' _keystone_bench; printf "%s\\n" "${COMPREPLY[@]}"'
    )
    out = subprocess.run(["bash", "-c", probe], capture_output=True, text=True, check=True)
    return out.stdout.split()


@pytest.mark.skipif(shutil.which("bash") is None, reason="bash is not installed")
def test_bash_completes_verbs_sub_verbs_and_options(capsys, tmp_path):
    script = _script("bash", capsys)
    assert _complete(script, "keystone-bench", "ga") == ["gate"]
    assert _complete(script, "keystone-bench", "gate", "--thre") == ["--threshold"]
    assert set(_complete(script, "keystone-bench", "keystone", "")) >= {"up", "down", "status"}
    assert _complete(script, "keystone-bench", "keystone", "up", "--po") == ["--port"]
    assert _complete(script, "keystone-bench", "completion", "z") == ["zsh"]
    # "up" alone is not a verb: the top level's words, not keystone up's
    assert "--port" not in _complete(script, "keystone-bench", "up", "--")


def test_zsh_gets_the_same_function_through_bashcompinit(capsys):
    bash, zsh = _script("bash", capsys), _script("zsh", capsys)
    assert "bashcompinit" in zsh
    body = bash[bash.index("_keystone_bench() {") :]
    assert body in zsh


def test_an_unknown_shell_is_one_line_and_exit_2(capsys):
    assert cli.main(["completion", "fish"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "fish" in err[0]
