"""Judge a whole Bash command line for plan mode: allow it only if every part is read-only.

The command string is attacker-controlled (model output steered by repository content), so
`bash_lexer` reads it only as far as a safe subset of POSIX shell and refuses the rest; here
each simple command must be on the allow-list with harmless options, and commands with rules
of their own (sed, awk, git, ...) are judged by `bash_checkers`.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass

from sandbox_runner.tools.bash_checkers import (
    check_awk,
    check_cd,
    check_command,
    check_date,
    check_env,
    check_find,
    check_tail,
    check_uniq,
    check_xxd,
    forbidden_flag,
    name_set,
)
from sandbox_runner.tools.bash_lexer import Refusal, SimpleCommand, parse
from sandbox_runner.tools.git_checker import check_git
from sandbox_runner.tools.sed_checker import check_sed

__all__ = ["BashVerdict", "classify"]


@dataclass(frozen=True)
class BashVerdict:
    """Whether a Bash command may run in plan mode; if not, what was refused and why."""

    allowed: bool
    reason: str = ""
    offending: str = ""
    scratch: bool = False
    """Judged for a scratch run (tools/scratch_policy.py), where commands may write."""

    def guidance(self) -> str:
        """The message returned to the model instead of output when the command was refused."""
        if self.allowed:
            return ""
        if self.scratch:
            return (
                f"`{self.offending}` was not run: {self.reason}. Your commands run in a "
                "scratch sandbox without network, privileges or other machines: they may "
                "read, build, test and write (the writes are thrown away), but nothing "
                "they do can leave the sandbox. If the plan needs this command, record it in "
                "the plan instead (for example under next actions)."
            )
        return (
            f"Plan mode is read-only, so `{self.offending}` was not run: {self.reason}. "
            "Only read-only commands are allowed (ls, cat, head, tail, wc, find, grep, rg, "
            "git status, git log, git diff, ...). Leave plan mode to run it. If the command "
            "is something the plan should include, record it in the plan instead (for "
            "example under next actions)."
        )


def classify(command: str) -> BashVerdict:
    """Judge a whole command line for plan mode.

    Args:
        command: The Bash command line exactly as the model wrote it.

    Returns:
        An allowed verdict, or a refusal naming the offending part and the reason.
    """
    try:
        commands = parse(command)
    except Refusal as refusal:
        offending = refusal.offending or command.strip() or "(empty command)"
        return BashVerdict(False, refusal.reason, _shorten(offending))
    changed_directory = False
    for simple in commands:
        reason = _judge(simple)
        name = simple.words[0] if simple.words else ""
        if reason is None and name == "git" and changed_directory:
            # Like `git -C`: another directory may hold another repository, whose config
            # names programs for git to run. git runs from the repository root only.
            reason = "`git` after `cd` could run another repository's configured programs"
        if reason is not None:
            return BashVerdict(False, reason, _shorten(command[simple.start : simple.end]))
        changed_directory = changed_directory or name == "cd"
    return BashVerdict(True)


def _shorten(text: str, limit: int = 160) -> str:
    text = text.strip()
    return text if len(text) <= limit else text[: limit - 1] + "…"


# --- Judging one simple command -----------------------------------------------------------

# Commands that only read, whatever their arguments.
_READERS = name_set(
    "ls pwd cat head wc grep egrep fgrep stat du df cut tr nl cmp comm basename dirname "
    "realpath readlink echo true false test which type whoami id uname printenv column jq "
    "md5sum sha1sum sha224sum sha256sum sha384sum sha512sum b2sum cksum od hexdump strings "
    "tac rev fold expand unexpand paste join seq base64 nproc"
)

# Readers with options that write files or run programs: (short letters, long options).
# Commands in _CHECKERS, such as tail and date, are judged by their checker instead.
_FLAG_LIMITS: dict[str, tuple[str, tuple[str, ...]]] = {
    "sort": ("oT", ("--output", "--compress-program", "--temporary-directory")),
    "rg": ("", ("--pre", "--hostname-bin")),
    "file": ("C", ("--compile",)),
    "tree": ("oR", ()),
    "diff": ("", ("--output",)),
    "printf": ("v", ()),
}

_REFUSAL_GROUPS = (
    (
        "can change files or state",
        "rm rmdir cp mv ln install mkdir mktemp touch chmod chown chgrp truncate dd tee shred "
        "patch split csplit tar zip unzip gzip gunzip bzip2 xz zstd mkfifo mknod mount sync",
    ),
    (
        "runs arbitrary code",
        "python python2 python3 node deno bun perl ruby php lua tclsh sh bash zsh dash ksh "
        "fish csh tcsh busybox pwsh",
    ),
    (
        "runs another command, which plan mode cannot judge",
        "xargs timeout nice ionice nohup time watch builtin exec eval source . sudo su doas "
        "stdbuf setsid chroot strace ltrace parallel flock script",
    ),
    ("uses the network", "curl wget nc ncat netcat ssh scp sftp ftp telnet rsync socat"),
    (
        "installs packages or runs builds",
        "npm npx yarn pnpm pip pip3 pipx uv poetry conda apt apt-get dpkg yum dnf apk brew "
        "cargo go gem bundle make cmake ninja gradle mvn docker podman kubectl",
    ),
    ("is interactive", "less more vi vim nvim nano emacs ed ex top htop man info"),
    (
        "changes shell or system state",
        "export unset set alias unalias declare typeset local readonly shopt trap ulimit "
        "umask hash kill pkill killall shutdown reboot pushd popd wait read",
    ),
    ("reads options from the repository that can make it write files", "ctags"),
)
_REFUSAL_REASONS = {
    name: f"`{name}` {text}" for text, names in _REFUSAL_GROUPS for name in names.split()
}
_ASSIGNMENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\+?=")


def _judge(simple: SimpleCommand) -> str | None:
    """The reason a simple command is refused, or None when it is read-only."""
    for operator, target in simple.redirects:
        problem = _redirect_problem(operator, target)
        if problem is not None:
            return problem
    name, args = simple.words[0], simple.words[1:]
    if _ASSIGNMENT.match(name):
        return f"`{name.partition('=')[0]}=` sets a variable or the environment of a command"
    if "/" in name:
        return f"`{name}` runs a program by its path"
    if name in _CHECKERS:
        return _CHECKERS[name](args)
    if name in _FLAG_LIMITS:
        flag = forbidden_flag(args, *_FLAG_LIMITS[name])
        return None if flag is None else f"`{name} {flag}` can write files or run other programs"
    if name in _READERS:
        return None
    return _REFUSAL_REASONS.get(name, f"`{name}` is not a known read-only command")


def _redirect_problem(operator: str, target: str) -> str | None:
    kind = operator.lstrip("0123456789")
    if kind == "<":
        if target.startswith(("/dev/tcp/", "/dev/udp/")):
            return f"`{operator}{target}` opens a network connection"
        return None
    if target == "/dev/null" or (kind == ">&" and target.isascii() and target.isdigit()):
        return None
    return f"the output redirection `{operator}{target}` can write files"


_CHECKERS: dict[str, Callable[[list[str]], str | None]] = {
    "awk": check_awk,
    "gawk": check_awk,
    "mawk": check_awk,
    "nawk": check_awk,
    "cd": check_cd,
    "date": check_date,
    "command": check_command,
    "env": check_env,
    "find": check_find,
    "git": check_git,
    "sed": check_sed,
    "tail": check_tail,
    "uniq": check_uniq,
    "xxd": check_xxd,
}
