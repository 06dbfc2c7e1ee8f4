"""Per-command checkers for plan mode: the reason an awk, sed, git, xxd, ... call is refused."""

from __future__ import annotations

import re

__all__ = [
    "check_awk",
    "check_cd",
    "check_command",
    "check_date",
    "check_env",
    "check_find",
    "check_git",
    "check_sed",
    "check_tail",
    "check_uniq",
    "check_xxd",
    "forbidden_flag",
    "name_set",
]


def name_set(text: str) -> frozenset[str]:
    """The space-separated words of text, as a set."""
    return frozenset(text.split())


def forbidden_flag(args: list[str], short: str, long: tuple[str, ...]) -> str | None:
    """The first argument that could be read as one of the forbidden options.

    Every argument is judged, `--` and what follows it included: `--` can be the value of
    the option before it (`rg -e -- --pre=sh`, `sort --random-source -- -o out`), and only
    a table of each program's options that take a value, for every version, could tell.
    The price is refusing a file or pattern spelled like a forbidden option (`rg -- --pre`),
    which is harmless. Short letters count anywhere in a cluster for the same reason.
    """
    for arg in args:
        name = arg.partition("=")[0]
        if arg.startswith("--"):
            if len(name) > 2 and any(option.startswith(name) for option in long):
                return arg
        elif arg.startswith("-") and set(arg[1:]) & set(short):
            return arg
    return None


def _operands(args: list[str], takes_value: frozenset[str]) -> list[str]:
    """The non-option arguments as GNU getopt reads them, skipping the value of each option
    in takes_value, long ones also when abbreviated.

    takes_value must hold every option that takes a separate value: one left out would make
    its value count as an operand, or, if that value is spelled like a listed option, hide
    the operand after it.
    """
    operands: list[str] = []
    skip = after_dashes = False
    for arg in args:
        if skip:
            skip = False
        elif after_dashes or arg == "-" or not arg.startswith("-"):
            operands.append(arg)
        else:
            after_dashes, skip = arg == "--", _takes_value(arg, takes_value)
    return operands


def _takes_value(arg: str, takes_value: frozenset[str]) -> bool:
    if arg in takes_value:
        return True
    abbreviation = arg.startswith("--") and len(arg) > 2 and "=" not in arg
    return abbreviation and any(option.startswith(arg) for option in takes_value)


# The options of tail that follow the file and of date that set the clock, as for
# forbidden_flag: (short letters, long options).
_TAIL_FOLLOW = ("fF", ("--follow",))
_DATE_SET = ("s", ("--set",))


def check_tail(args: list[str]) -> str | None:
    for arg in args:
        if arg.startswith("+") and set(arg) & {"f", "F"}:
            return f"`tail {arg}` follows the file and never ends"
    flag = forbidden_flag(args, *_TAIL_FOLLOW)
    return None if flag is None else f"`tail {flag}` follows the file and never ends"


def check_cd(args: list[str]) -> str | None:
    if len(_operands(args, frozenset())) <= 1:
        return None
    return "`cd` takes one directory"


def check_command(args: list[str]) -> str | None:
    if args[:1] in (["-v"], ["-V"]):
        return None
    return "`command` runs another command, which plan mode cannot judge"


def check_env(args: list[str]) -> str | None:
    return "`env` with arguments runs another command" if args else None


_FIND_ACTIONS = name_set("-delete -exec -execdir -ok -okdir -fprint -fprint0 -fprintf -fls")


def check_find(args: list[str]) -> str | None:
    for arg in args:
        if arg in _FIND_ACTIONS:
            return f"`find {arg}` deletes files, writes files or runs commands"
    return None


_UNIQ_VALUES = name_set("-f -s -w --skip-fields --skip-chars --check-chars")


def check_uniq(args: list[str]) -> str | None:
    if len(_operands(args, _UNIQ_VALUES)) <= 1:
        return None
    return "`uniq` writes its second file operand"


# xxd reads options only before its first operand, knows them by their first two letters
# (`-cols`, `--cols` and `-colsX` are all `-c`; `---` is `--`) and writes its second operand.
# Only these spellings are read; guessing at others could misplace the operands.
_XXD_VALUES = name_set("-c -cols -g -groupsize -l -len -o -offset -s -seek -n -name")
_XXD_OTHERS = re.compile(
    r"-([abCdeEhipruv]|autoskip|bits|include|ps|postscript|plain|revert"
    r"|[cglos][+-]?(0x)?[0-9a-fA-F]+)"
)


def check_xxd(args: list[str]) -> str | None:
    index = 0
    while index < len(args):
        arg = args[index]
        word = arg[1:] if arg.startswith("--") and len(arg) > 2 else arg
        if word == "--" or arg == "-" or not arg.startswith("-"):
            operands = len(args) - index - (word == "--")
            return None if operands <= 1 else "`xxd` writes its second file operand"
        if word not in _XXD_VALUES and not _XXD_OTHERS.fullmatch(word):
            return f"`xxd {arg}` is an option plan mode cannot read safely"
        index += 2 if word in _XXD_VALUES else 1
    return None


# Options of date that take the next argument. An operand that is not a `+FORMAT` sets the
# clock (`date 010100002030`).
_DATE_VALUES = name_set("-d --date -f --file -r --reference -s --set --rfc-3339")


def check_date(args: list[str]) -> str | None:
    flag = forbidden_flag(args, *_DATE_SET)
    if flag is not None:
        return f"`date {flag}` sets the system clock"
    for operand in _operands(args, _DATE_VALUES):
        if not operand.startswith("+"):
            return f"`date {operand}` sets the system clock; a format starts with `+`"
    return None


# awk is a full language; these words are how a program writes files or runs commands.
_AWK_DANGERS = ("system", "getline", "|", ">", "@")


def check_awk(args: list[str]) -> str | None:
    index, program = 0, ""
    while index < len(args):
        arg = args[index]
        index += 1
        if arg == "--":
            program = " ".join(args[index : index + 1])
            break
        if arg == "-" or not arg.startswith("-"):
            program = arg
            break
        if arg in ("-F", "-v"):
            index += 1
        elif not re.match(r"-[Fv].", arg):
            return f"`awk {arg}` can load a program or write files"
    for danger in _AWK_DANGERS:
        if danger in program:
            return f"an awk program with `{danger}` can write files or run commands"
    return None


_SED_LONG = name_set(
    "--quiet --silent --regexp-extended --separate --unbuffered --null-data --posix --debug "
    "--sandbox --help --version"
)
_SED_PLAIN = frozenset("{}=dDgGhHnNpPxzF")
_SED_TEXT = frozenset("aic")
_SED_ARGUMENT = frozenset("bTtrRv:lLqQ")
_SED_WRITERS = frozenset("wWe")
_SED_UNPARSED = "the sed script has a part that plan mode cannot parse"


def check_sed(args: list[str]) -> str | None:
    scripts: list[str] = []
    operands: list[str] = []
    index = 0
    while index < len(args):
        arg = args[index]
        index += 1
        if arg == "--":
            operands += args[index:]
            break
        if arg == "-" or not arg.startswith("-"):
            operands.append(arg)
            continue
        option, value = _sed_option(arg)
        if option is None:
            return f"`sed {arg}` can edit files in place or run a script plan mode cannot see"
        if value is None:
            value, index = " ".join(args[index : index + 1]), index + 1
        if option == "e":
            scripts.append(value)
    return _sed_script_problem("\n".join(scripts or operands[:1]))


def _sed_option(arg: str) -> tuple[str | None, str | None]:
    """Read one sed option: (None, _) when it is refused, else ("e" or "l", value) for
    --expression and --line-length, ("", "") for a harmless flag. A value of None means the
    option takes the next argument; "--line-length=" takes an empty value, not the next."""
    name, equals, value = arg.partition("=")
    if name in ("--expression", "--line-length"):
        return ("e" if name == "--expression" else "l"), value if equals else None
    if arg in _SED_LONG:
        return "", ""
    if arg.startswith("--"):
        return None, None
    for position, letter in enumerate(arg[1:], start=2):
        if letter in "el":
            return letter, arg[position:] or None
        if letter not in "nErsuz":
            return None, None
    return "", ""


def _sed_script_problem(script: str) -> str | None:
    """Walk a sed script command by command; refuse w, W, e and anything unparsable."""
    pos = 0
    try:
        while pos < len(script):
            pos = _sed_command_end(script, pos)
    except ValueError as problem:
        return str(problem)
    return None


def _sed_command_end(script: str, pos: int) -> int:
    """Where the sed command at pos ends. Arguments are cut short rather than long, so a
    misread can only show sed's data to the checks as commands, never hide a command.

    Raises:
        ValueError: the command writes files, runs commands, or cannot be parsed.
    """
    if script[pos] in " \t\n;":
        return pos + 1
    if script[pos] == "#":
        return _find_any(script, pos, "\n")
    pos = _skip_sed_address(script, pos)
    command = script[pos : pos + 1]
    if command in _SED_WRITERS:
        raise ValueError(f"the sed command `{command}` writes files or runs commands")
    if command in ("s", "y"):
        end = _skip_delimited(script, pos + 1, 2)
        pos = _find_any(script, end, " \t\n;}#")
        flags = set(script[end:pos])
        if command == "s" and flags & _SED_WRITERS:
            raise ValueError("the sed flags `w` and `e` write files or run commands")
        if flags - (set("gpiImM0123456789") if command == "s" else set()):
            raise ValueError(_SED_UNPARSED)
        return pos
    if command in _SED_TEXT:
        return _find_any(script, pos + 1, ";\n}")
    if command in _SED_ARGUMENT:
        label_start = _skip_any(script, pos + 1, " \t")
        return _find_any(script, label_start, " \t;\n}")
    if command in _SED_PLAIN:
        return pos + 1
    raise ValueError(_SED_UNPARSED)


def _skip_sed_address(script: str, pos: int) -> int:
    while pos < len(script):
        if script[pos] in "0123456789$~+,! \t":
            pos += 1
        elif script[pos] in "/\\":
            pos = _skip_delimited(script, pos + 1 if script[pos] == "\\" else pos, 1)
            while pos < len(script) and script[pos] in "IM":
                pos += 1
        else:
            break
    return pos


def _skip_delimited(script: str, start: int, count: int) -> int:
    """The position after count more delimiters. Newlines, even escaped, are refused: a
    part that spans lines could hide the next line's command.

    Raises:
        ValueError: the part is unterminated or spans lines.
    """
    if start >= len(script) or script[start] in "\n\\":
        raise ValueError(_SED_UNPARSED)
    delimiter, pos = script[start], start + 1
    while count:
        if pos >= len(script) or script[pos] == "\n":
            raise ValueError(_SED_UNPARSED)
        if script[pos] == "\\" and script[pos + 1 : pos + 2] not in ("", "\n"):
            pos += 1
        elif script[pos] == delimiter:
            count -= 1
        pos += 1
    return pos


def _find_any(text: str, pos: int, chars: str) -> int:
    while pos < len(text) and text[pos] not in chars:
        pos += 1
    return pos


def _skip_any(text: str, pos: int, chars: str) -> int:
    while pos < len(text) and text[pos] in chars:
        pos += 1
    return pos


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
