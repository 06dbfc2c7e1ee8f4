"""A program in a real terminal: tmux runs it, tests send keys and read the screen."""

from __future__ import annotations

import re
import shlex
import subprocess
import time
import uuid
from collections.abc import Mapping, Sequence
from pathlib import Path
from types import TracebackType
from typing import Self

WAIT_SECONDS = 60.0
POLL_SECONDS = 0.05


class ScreenTimeout(AssertionError):
    """The screen did not show what a test waited for; the message holds the last screen."""


class Tmux:
    """One detached tmux session of a fixed size running COMMAND; killed on exit."""

    def __init__(
        self,
        command: Sequence[str],
        *,
        env: Mapping[str, str],
        cwd: Path,
        width: int = 120,
        height: int = 40,
    ) -> None:
        self.name = f"planrun-test-{uuid.uuid4().hex[:8]}"
        exports = " ".join(f"{key}={shlex.quote(value)}" for key, value in env.items())
        # The program runs under `env`, so only the variables given reach it; when it
        # ends the pane stays (remain-on-exit) for the test to read its last screen.
        shell = f"env -i {exports} {shlex.join(command)}"
        new = ["new-session", "-d", "-s", self.name, "-x", str(width), "-y", str(height)]
        new += ["-c", str(cwd), shell]
        # A tmux server whose last session just ended may still be exiting, and refuse.
        for attempt in range(20):
            try:
                self._tmux(*new)
                break
            except subprocess.CalledProcessError:
                if attempt == 19:
                    raise
                time.sleep(POLL_SECONDS)
        self._tmux("set-option", "-t", self.name, "remain-on-exit", "on")

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        subprocess.run(["tmux", "kill-session", "-t", self.name], capture_output=True)

    def keys(self, *keys: str) -> None:
        """tmux key names: `BTab`, `Enter`, `C-c`, `Escape`, `Down`."""
        self._tmux("send-keys", "-t", self.name, *keys)

    def type(self, text: str) -> None:
        """Literal text, as typed."""
        self._tmux("send-keys", "-t", self.name, "-l", text)

    def screen(self, colours: bool = False) -> str:
        args = ["capture-pane", "-p", "-t", self.name] + (["-e"] if colours else [])
        return self._tmux(*args)

    def wait_for(
        self, pattern: str, *, colours: bool = False, timeout: float = WAIT_SECONDS
    ) -> str:
        """Poll the screen until PATTERN (a regex) is on it; the screen then."""
        deadline = time.monotonic() + timeout
        while True:
            screen = self.screen(colours)
            if re.search(pattern, screen):
                return screen
            if time.monotonic() > deadline:
                raise ScreenTimeout(f"{pattern!r} not on the screen:\n{screen}")
            time.sleep(POLL_SECONDS)

    def wait_gone(self, pattern: str, *, timeout: float = WAIT_SECONDS) -> str:
        """Poll until PATTERN is no longer on the screen."""
        deadline = time.monotonic() + timeout
        while re.search(pattern, screen := self.screen()):
            if time.monotonic() > deadline:
                raise ScreenTimeout(f"{pattern!r} still on the screen:\n{screen}")
            time.sleep(POLL_SECONDS)
        return screen

    def exited(self) -> bool:
        out = self._tmux("display-message", "-p", "-t", self.name, "#{pane_dead}")
        return out.strip() == "1"

    def wait_exit(self, timeout: float = WAIT_SECONDS) -> None:
        deadline = time.monotonic() + timeout
        while not self.exited():
            if time.monotonic() > deadline:
                raise ScreenTimeout(f"the program did not exit:\n{self.screen()}")
            time.sleep(POLL_SECONDS)

    def _tmux(self, *args: str) -> str:
        done = subprocess.run(["tmux", *args], capture_output=True, text=True, check=True)
        return done.stdout
