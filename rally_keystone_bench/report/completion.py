"""Shell completion scripts for keystone-bench, from the words its parser knows.

``keystone-bench completion bash`` (or ``zsh``) prints one; the words are
taken from the argparse parser when it is printed, so a new verb or option
completes without editing a script. Completes verbs, sub-verbs (``keystone
up``), each verb's options, and files after any other word.
"""

from __future__ import annotations

import shlex
from collections.abc import Mapping, Sequence

SHELLS = ("bash", "zsh")


def _case_arms(words: Mapping[str, Sequence[str]]) -> str:
    """One ``case`` arm per verb path ("" for the top level): its words to offer."""
    arms = []
    for path, offered in sorted(words.items()):
        arms.append(f"        {shlex.quote(path)}) words={shlex.quote(' '.join(offered))} ;;")
    return "\n".join(arms)


def _bash_body(words: Mapping[str, Sequence[str]], paths: Sequence[str]) -> str:
    """The function both shells run (zsh through bashcompinit)."""
    verbs = "|".join(shlex.quote(p) for p in paths if p)
    return f"""_keystone_bench() {{
    local cur path word words i
    cur="${{COMP_WORDS[COMP_CWORD]}}"
    path=""
    # The verb path so far: the words before the cursor that name a verb or sub-verb.
    for ((i = 1; i < COMP_CWORD; i++)); do
        word="${{COMP_WORDS[i]}}"
        case "${{path:+$path }}$word" in
            {verbs}) path="${{path:+$path }}$word" ;;
        esac
    done
    case "$path" in
{_case_arms(words)}
        *) words="" ;;
    esac
    if [[ "$cur" == -* || -z "$path" ]]; then
        COMPREPLY=($(compgen -W "$words" -- "$cur"))
    else
        COMPREPLY=($(compgen -W "$words" -- "$cur") $(compgen -f -- "$cur"))
    fi
}}"""


def bash(words: Mapping[str, Sequence[str]]) -> str:
    """A bash completion script: ``eval "$(keystone-bench completion bash)"``.

    WORDS: verb path ("" at the top, ``keystone``, ``keystone up``) -> the
    sub-verbs and options offered there.
    """
    paths = sorted(words)
    return (
        "# keystone-bench completion for bash: "
        'eval "$(keystone-bench completion bash)" in ~/.bashrc\n'
        + _bash_body(words, paths)
        + "\ncomplete -o filenames -o bashdefault -F _keystone_bench keystone-bench\n"
    )


def zsh(words: Mapping[str, Sequence[str]]) -> str:
    """A zsh script: the bash one through zsh's bashcompinit (``eval`` it as bash's)."""
    return (
        "# keystone-bench completion for zsh: "
        'eval "$(keystone-bench completion zsh)" in ~/.zshrc\n'
        "autoload -U +X compinit && compinit\n"
        "autoload -U +X bashcompinit && bashcompinit\n"
        + _bash_body(words, sorted(words))
        + "\ncomplete -o filenames -o bashdefault -F _keystone_bench keystone-bench\n"
    )


def script(shell: str, words: Mapping[str, Sequence[str]]) -> str:
    """SHELL's completion script (one of SHELLS)."""
    return bash(words) if shell == "bash" else zsh(words)
