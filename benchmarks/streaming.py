"""A streamed answer's first token: from the moment the fake Messages API sends it to its
first character on the terminal, read from a pty the session runs in; line mode, which
prints the same token with no screen to redraw, is the baseline."""

from __future__ import annotations

import fcntl
import os
import pty
import select
import signal
import statistics
import struct
import subprocess
import sys
import tempfile
import termios
import time
from pathlib import Path
from typing import Any

TARGET_MS = 100.0
"""A tenth of a second: what reads as at once."""
SAMPLES = 7
ROWS, COLUMNS = 40, 120
CURSOR_QUERY = b"\x1b[6n"


def _answer(body: dict[str, Any]) -> Any:
    """Each answer starts with a token of its own (TOKEN<n>), then a few slow words."""
    from tests.support.fake_messages_api import message, text

    turn = sum(1 for entry in body["messages"] if entry["role"] == "assistant")
    return message(text(f"TOKEN{turn}X and then some more words"), pace=0.02)


def _owned_repo(scratch: Path) -> Path:
    """A repository the work session may write: not root's (when run as root)."""
    repo = scratch / "stream-repo"
    (repo / "src").mkdir(parents=True)
    (repo / "src" / "app.py").write_text("def main():\n    return 42\n")
    if os.geteuid() == 0:
        for path in [repo, *repo.rglob("*")]:
            os.chown(path, 4321, 4321)
    return repo


class _Pty:
    """`planrun` on a pty of ROWS x COLUMNS: keys written in, the screen's bytes read out."""

    def __init__(self, repo: Path, home: Path, base_url: str, *, terminal: bool) -> None:
        env = dict(os.environ, ANTHROPIC_BASE_URL=base_url, ANTHROPIC_API_KEY="bench")
        env |= {"PLANRUN_HOME": str(home), "TERM": "xterm-256color", "LANG": "C.UTF-8"}
        self.master, secondary = pty.openpty()
        size = struct.pack("HHHH", ROWS, COLUMNS, 0, 0)
        fcntl.ioctl(secondary, termios.TIOCSWINSZ, size)
        command = [sys.executable, "-m", "sandbox_runner", "--repo", str(repo)]
        # Line mode reads a pipe (so it is not a terminal session) and writes to the pty.
        stdin: int = secondary if terminal else subprocess.PIPE
        self.process = subprocess.Popen(
            command, stdin=stdin, stdout=secondary, stderr=subprocess.DEVNULL, env=env,
            cwd=Path(__file__).resolve().parents[1], start_new_session=True,
        )  # fmt: skip
        os.close(secondary)
        self.seen = b""

    def send(self, text: str) -> None:
        if self.process.stdin is not None:
            self.process.stdin.write(text.replace("\r", "\n").encode())
            self.process.stdin.flush()
        else:
            os.write(self.master, text.encode())

    def wait_for(self, wanted: bytes, seconds: float = 60) -> float:
        """time.perf_counter() when WANTED first arrived on the screen."""
        deadline = time.monotonic() + seconds
        arrived = time.perf_counter()
        while wanted not in self.seen:
            if time.monotonic() > deadline:
                raise RuntimeError(f"{wanted!r} never reached the screen: {self.seen[-400:]!r}")
            ready, _, _ = select.select([self.master], [], [], 0.5)
            if ready:
                chunk = os.read(self.master, 65536)
                arrived = time.perf_counter()
                self.seen += chunk
                # As a terminal would, say where the cursor is (prompt_toolkit asks, and
                # draws no toolbar until it knows the room below the prompt).
                for _ in range(chunk.count(CURSOR_QUERY)):
                    os.write(self.master, b"\x1b[1;1R")
        return arrived

    def close(self) -> None:
        if self.process.stdin is not None:
            self.process.stdin.close()
        else:
            os.write(self.master, b"\x04")
        try:
            self.process.wait(30)
        except subprocess.TimeoutExpired:
            os.killpg(self.process.pid, signal.SIGTERM)
            self.process.wait(30)
        os.close(self.master)


def first_token_ms(terminal: bool, scratch: Path) -> list[float]:
    """Milliseconds from each answer's first text delta sent to its token on the screen."""
    from tests.support.fake_messages_api import FakeMessagesAPI

    repo = _owned_repo(scratch / ("terminal" if terminal else "line"))
    samples = []
    with FakeMessagesAPI(_answer) as api:
        screen = _Pty(repo, scratch / f"home-{terminal}", api.base_url, terminal=terminal)
        try:
            screen.wait_for(b"shift+tab to cycle" if terminal else b"/help lists commands")
            for turn in range(SAMPLES):
                screen.send(f"answer number {turn}\r")
                shown = screen.wait_for(f"TOKEN{turn}X".encode())
                sent = api.first_text_sent[turn]
                samples.append((shown - sent) * 1000)
                screen.wait_for(b"more words")
                time.sleep(0.3)  # the turn ends; the next message starts a fresh one
        finally:
            screen.close()
    return samples


def bench_first_token() -> tuple[list[float], list[float]]:
    """(terminal, line mode) samples in ms."""
    with tempfile.TemporaryDirectory() as scratch:
        root = Path(scratch)
        (root / "terminal").mkdir()
        (root / "line").mkdir()
        return first_token_ms(True, root), first_token_ms(False, root)


if __name__ == "__main__":
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    ours, line = bench_first_token()
    print(f"first token on screen: terminal p50 {statistics.median(ours):.1f} ms, "
          f"max {max(ours):.1f} ms; line mode p50 {statistics.median(line):.1f} ms")  # fmt: skip
