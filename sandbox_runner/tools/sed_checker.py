"""Plan mode's checker of sed calls: a script is read command by command, and any command
that writes (w, W, e, the s///w and s///e flags) or that cannot be parsed is refused."""

from __future__ import annotations

from sandbox_runner.tools.bash_checkers import name_set

__all__ = ["check_sed"]


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
