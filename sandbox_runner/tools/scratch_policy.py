"""Judge a Bash command line for a scratch run: commands may write (their writes land in a
throw-away layer, sandbox/scratch.py), so only what tries to leave the sandbox is refused.

The kernel holds the line (no network, no capabilities, a read-only root, the repository
under a copy-on-write layer); this judgement only tells the model early, and in words,
that a command reaching the network, a container engine or root cannot work. A line the
lexer cannot read runs: refusing it would protect nothing.
"""

from __future__ import annotations

from pathlib import Path

from sandbox_runner.tools.bash_lexer import Refusal, parse
from sandbox_runner.tools.bash_policy import BashVerdict

__all__ = ["classify_scratch"]

_LEAVING = (
    (
        "it uses the network, and the sandbox has none",
        "curl wget nc ncat netcat ssh scp sftp ftp telnet rsync socat git-remote-http",
    ),
    ("it needs privileges the sandbox never has", "sudo su doas mount umount chroot unshare"),
    ("it reaches a container engine or a cluster, which the sandbox has none of",
     "docker podman kubectl nerdctl ctr"),
    ("it is interactive and would wait for input until it times out",
     "less more vi vim nvim nano emacs ed ex top htop man info"),
)  # fmt: skip
_REASONS = {name: reason for reason, names in _LEAVING for name in names.split()}
# Programs that run the command after them: `env curl` is judged as curl.
_WRAPPERS = frozenset(
    {"env", "timeout", "nice", "nohup", "time", "stdbuf", "setsid", "ionice", "command", "exec"}
)
_NETWORK_GIT = frozenset({"fetch", "pull", "push", "clone", "ls-remote"})
_INSTALLING = {
    "pip": {"install", "download"},
    "pip3": {"install", "download"},
    "npm": {"install", "i", "ci", "add"},
    "yarn": {"add", "install"},
    "pnpm": {"add", "install", "i"},
    "apt": {"install", "update"},
    "apt-get": {"install", "update"},
    "gem": {"install"},
    "cargo": {"install"},
    "go": {"get", "install"},
}
"""Package managers' subcommands that download: they would wait on a network that is not
there (pip retries for a minute) before failing."""
_GIT_VALUES = frozenset({"-C", "-c", "--git-dir", "--work-tree", "--namespace"})


def classify_scratch(command: str) -> BashVerdict:
    """Judge a whole command line for a scratch run.

    Args:
        command: The Bash command line exactly as the model wrote it.

    Returns:
        An allowed verdict, or a refusal naming the command that would try to leave.
    """
    try:
        commands = parse(command)
    except Refusal:
        return BashVerdict(True, scratch=True)
    for simple in commands:
        reason = _leaving(simple.words)
        for operator, target in simple.redirects:
            if target.startswith(("/dev/tcp/", "/dev/udp/")):
                reason = f"`{operator}{target}` opens a network connection, and there is none"
        if reason is not None:
            offending = command[simple.start : simple.end].strip()
            return BashVerdict(False, reason, offending[:160], scratch=True)
    return BashVerdict(True, scratch=True)


def _leaving(words: list[str]) -> str | None:
    """Why the program a simple command runs would try to leave the sandbox, or None."""
    index = 0
    while index < len(words):
        name = Path(words[index]).name
        if "=" in words[index] and index == 0:
            index += 1  # VARIABLE=value before the program
            continue
        if name in _WRAPPERS:
            index += 1
            while index < len(words) and (words[index].startswith("-") or "=" in words[index]):
                index += 1
            if name == "timeout" and index < len(words):
                index += 1  # its duration
            continue
        if name == "git" and _git_subcommand(words[index + 1 :]) in _NETWORK_GIT:
            return "`git` would reach a remote over the network, and the sandbox has none"
        rest = words[index + 1 :]
        if name.startswith("python") and rest[:2] == ["-m", "pip"]:
            name, rest = "pip", rest[2:]
        if _first_word(rest) in _INSTALLING.get(name, ()):
            return (
                f"`{name} {_first_word(rest)}` downloads packages, and the sandbox has no network"
            )
        return _REASONS.get(name)
    return None


def _first_word(arguments: list[str]) -> str:
    return next((word for word in arguments if not word.startswith("-")), "")


def _git_subcommand(arguments: list[str]) -> str:
    """git's subcommand: the first word that is neither an option nor an option's value."""
    skip = False
    for word in arguments:
        if skip:
            skip = False
        elif word in _GIT_VALUES:
            skip = True
        elif not word.startswith("-"):
            return word
    return ""
