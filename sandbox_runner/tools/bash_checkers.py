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
