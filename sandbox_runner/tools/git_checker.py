"""Plan mode's checker of git calls: only reading subcommands and options, never one that
runs a program, writes a file or reaches into submodules."""

from __future__ import annotations

import re

from sandbox_runner.tools.bash_checkers import forbidden_flag, name_set

__all__ = ["check_git"]


_GIT_GLOBAL_FLAGS = name_set(
    "--no-pager -P --no-optional-locks --literal-pathspecs --glob-pathspecs "
    "--noglob-pathspecs --icase-pathspecs --no-replace-objects --version --help"
)
_GIT_READERS = name_set(
    "status log diff show blame annotate grep ls-files ls-tree rev-parse rev-list describe "
    "shortlog cat-file show-ref for-each-ref name-rev merge-base whatchanged count-objects "
    "version diff-tree diff-files diff-index check-ignore check-attr show-branch cherry "
    "range-diff"
)
# Options of the readers above that write files or run programs (abbreviations count too).
_GIT_FORBIDDEN = ("--output", "--ext-diff", "--show-signature", "--open-files-in-pager")
# Sub-subcommands that only read; the bare form reads too for those in _GIT_BARE_READS.
_GIT_SUBACTIONS = {
    "stash": frozenset({"list", "show"}),
    "worktree": frozenset({"list"}),
    "notes": frozenset({"list", "show"}),
    "submodule": frozenset({"status"}),
    "reflog": frozenset({"show", "exists", "list"}),
    "remote": frozenset({"get-url"}),
}
_GIT_BARE_READS = frozenset({"notes", "submodule", "reflog", "remote"})
_GIT_LIST_MODE = name_set("-l --list --contains --no-contains --merged --no-merged --points-at")
_GIT_LIST_COMMON = _GIT_LIST_MODE | name_set(
    "-i --ignore-case --color --no-color --column --no-column --omit-empty --sort --format"
)
_GIT_LIST_VALUES = name_set("--sort --format")
_GIT_LIST_FLAGS = {
    "branch": _GIT_LIST_COMMON
    | name_set(
        "-a --all -r --remotes -v -vv -av -rv --verbose --show-current --abbrev --no-abbrev"
    ),
    "tag": _GIT_LIST_COMMON | frozenset({"-n"}),
}
_GIT_CONFIG_ACTIONS = name_set("--get --get-all --get-regexp --get-urlmatch --list -l")
_GIT_CONFIG_VALUES = name_set("--type --default")
_GIT_CONFIG_OPTIONS = _GIT_CONFIG_ACTIONS | name_set(
    "--local --global --system --worktree --show-origin --show-scope --name-only -z --null "
    "--type --bool --int --bool-or-int --path --expiry-date --includes --no-includes "
    "--default --all --regexp"
)


def check_git(args: list[str]) -> str | None:
    index = 0
    while index < len(args) and args[index].startswith("-"):
        if args[index] not in _GIT_GLOBAL_FLAGS:
            return f"`git {args[index]}` can point git elsewhere or run other programs"
        index += 1
    if index == len(args):
        return None
    subcommand, rest = args[index], args[index + 1 :]
    if not _git_reads(subcommand, rest):
        return f"`git {subcommand}` can change the repository or run other programs"
    flag = forbidden_flag(rest, "O" if subcommand == "grep" else "", _GIT_FORBIDDEN)
    if flag is not None:
        return f"`git {subcommand} {flag}` writes files or runs other programs"
    flag = _git_into_submodules(rest)
    if flag is not None:
        return f"`git {subcommand} {flag}` looks into submodules, which plan mode keeps out of"
    return None


# Options that make git read submodules' files or start git in them, and the values that
# keep to their commits (`--ignore-submodules` alone means all, `--submodule` alone log).
_GIT_SUBMODULE_OPTIONS = {
    "--recurse-submodules": (),
    "--ignore-submodules": ("all", "dirty"),
    "--submodule": ("short", "log"),
}


def _git_into_submodules(rest: list[str]) -> str | None:
    """The first option that would undo the sandbox's `diff.ignoreSubmodules=dirty`
    (abbreviations count, as in forbidden_flag)."""
    for arg in rest:
        name, equals, value = arg.partition("=")
        if not arg.startswith("--") or len(name) <= 2:
            continue
        for option, narrow in _GIT_SUBMODULE_OPTIONS.items():
            if option.startswith(name) and (not narrow or (equals and value not in narrow)):
                return arg
    return None


def _git_reads(subcommand: str, rest: list[str]) -> bool:
    """Whether `git subcommand rest...` only reads, options aside."""
    if subcommand in _GIT_READERS:
        return True
    if subcommand in _GIT_LIST_FLAGS:
        return _git_lists(subcommand, rest)
    if subcommand == "config":
        return _git_config_reads(rest)
    if subcommand == "remote" and rest[:1] in (["-v"], ["--verbose"]):
        rest = rest[1:]
    if subcommand in _GIT_SUBACTIONS:
        if not rest:
            return subcommand in _GIT_BARE_READS
        return rest[0] in _GIT_SUBACTIONS[subcommand]
    return subcommand == "help" and set(rest) <= {"-a", "--all", "-g", "--guides"}


def _git_config_reads(rest: list[str]) -> bool:
    """Whether `git config` only reads. Apart from the `get` and `list` subcommands of newer
    git, it reads options only up to its first other word: `git config a.b --list` sets a.b."""
    subcommand = rest[:1] in (["get"], ["list"])
    arguments = rest[1:] if subcommand else rest
    options = _git_options(arguments, _GIT_CONFIG_VALUES, permute=subcommand)[0]
    flags = {arg.partition("=")[0] for arg in options}
    return (subcommand or bool(_GIT_CONFIG_ACTIONS & flags)) and flags <= _GIT_CONFIG_OPTIONS


def _git_lists(subcommand: str, rest: list[str]) -> bool:
    """Whether `git branch`/`git tag` only lists: known flags, and names only as patterns."""
    options, names = _git_options(rest, _GIT_LIST_VALUES)
    list_mode = False
    for arg in options:
        name = arg.partition("=")[0]
        if subcommand == "tag" and re.fullmatch(r"-n\d*", name):
            name = "-n"
        if name not in _GIT_LIST_FLAGS[subcommand]:
            return False
        list_mode = list_mode or name in _GIT_LIST_MODE
    return list_mode or not names


def _git_options(
    rest: list[str], takes_value: frozenset[str], permute: bool = True
) -> tuple[list[str], list[str]]:
    """Split arguments into options and other words. git gives an option that takes a value
    the next argument whatever it is, so in `--format --list x` the `--list` is a format.
    Without permute, every argument from the first other word on is a word."""
    options: list[str] = []
    words: list[str] = []
    skip = False
    for arg in rest:
        if skip:
            skip = False
        elif arg.startswith("-") and (permute or not words):
            options.append(arg)
            skip = arg in takes_value
        else:
            words.append(arg)
    return options, words
