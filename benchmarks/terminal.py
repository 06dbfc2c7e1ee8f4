"""The terminal session's speed: Shift+Tab to the redrawn badge, and `planrun` start to
an interactive prompt in a real terminal (tmux)."""

from __future__ import annotations

import asyncio
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

REDRAW_TARGET_MS = 16.0
START_TARGET_SECONDS = 0.4
SHIFT_TAB = "\x1b[Z"
PRESSES = 60


class _Sink:
    """A terminal that discards what it is sent (the renderer's work is still done)."""

    encoding = "utf-8"

    def write(self, data: str) -> int:
        return len(data)

    def flush(self) -> None:
        pass

    def isatty(self) -> bool:
        return True

    def fileno(self) -> int:
        raise OSError("no file descriptor")


async def _press_and_time(app: Any, send: Callable[[], None], changed: Callable[[], bool]) -> float:
    """Seconds from a key sent to the end of the first render that shows its effect."""
    done = asyncio.Event()

    def rendered(_: object) -> None:
        if changed():
            done.set()

    app.after_render += rendered
    start = time.perf_counter()
    send()
    await asyncio.wait_for(done.wait(), 5)
    elapsed = time.perf_counter() - start
    app.after_render -= rendered
    return elapsed


def _output() -> Any:
    from prompt_toolkit.data_structures import Size
    from prompt_toolkit.output.vt100 import Vt100_Output

    return Vt100_Output(_Sink(), lambda: Size(rows=40, columns=120), term="xterm-256color")  # type: ignore[arg-type]


def badge_redraw_ms(scratch: Path) -> list[float]:
    """Shift+Tab in the session's own prompt (a session on local fakes), PRESSES times."""
    from prompt_toolkit.input import create_pipe_input

    from sandbox_runner.session.commands import Commands
    from sandbox_runner.session.terminal import Terminal
    from sandbox_runner.session.terminal_output import TerminalUI
    from tests.unit.test_session import FakeUI, Models, open_session

    workspace = scratch / "redraw-repo"
    workspace.mkdir()
    os.environ["PLANRUN_HOME"] = str(scratch / "home")
    session = open_session(workspace, scratch, Models({}), FakeUI())
    samples: list[float] = []
    try:
        with create_pipe_input() as pipe:
            terminal = Terminal(
                session, Commands(session), TerminalUI(), input=pipe, output=_output()
            )

            async def drive() -> None:
                running = asyncio.ensure_future(terminal.run())
                await asyncio.sleep(0.2)  # the first render
                for _ in range(PRESSES):
                    wanted = terminal.shown_mode.next()
                    samples.append(await _press_and_time(
                        terminal.prompt.app,
                        lambda: pipe.send_text(SHIFT_TAB),
                        lambda wanted=wanted: terminal.shown_mode is wanted,  # type: ignore[misc]
                    ))  # fmt: skip
                pipe.send_text("\x04")
                await running

            asyncio.run(drive())
    finally:
        session.close()
    return [sample * 1e3 for sample in samples]


def bare_redraw_ms() -> list[float]:
    """The baseline: a bare PromptSession whose key binding flips a toolbar text."""
    from prompt_toolkit import PromptSession
    from prompt_toolkit.input import create_pipe_input
    from prompt_toolkit.key_binding import KeyBindings

    state = {"flag": False}
    bindings = KeyBindings()

    @bindings.add("s-tab")
    def _flip(event: Any) -> None:
        state["flag"] = not state["flag"]

    samples: list[float] = []
    with create_pipe_input() as pipe:
        prompt: PromptSession[str] = PromptSession(
            "› ",
            bottom_toolbar=lambda: "on" if state["flag"] else "off",
            key_bindings=bindings,
            input=pipe,
            output=_output(),
        )

        async def drive() -> None:
            running = asyncio.ensure_future(prompt.prompt_async())
            await asyncio.sleep(0.2)
            for _ in range(PRESSES):
                wanted = not state["flag"]
                samples.append(await _press_and_time(
                    prompt.app,
                    lambda: pipe.send_text(SHIFT_TAB),
                    lambda wanted=wanted: state["flag"] is wanted,  # type: ignore[misc]
                ))  # fmt: skip
            pipe.send_text("\r")
            await running

        asyncio.run(drive())
    return [sample * 1e3 for sample in samples]


def start_to_prompt_seconds(repo: Path, home: Path, base_url: str) -> float:
    """Seconds from `planrun` spawned in tmux to the badge on its screen."""
    from tests.support.tmux import Tmux

    env = dict(os.environ, ANTHROPIC_BASE_URL=base_url, ANTHROPIC_API_KEY="bench")
    env |= {"PLANRUN_HOME": str(home), "TERM": "xterm-256color", "LANG": "C.UTF-8"}
    env.pop("TMUX", None)
    start = time.perf_counter()
    with Tmux(
        [sys.executable, "-m", "sandbox_runner", "--repo", str(repo)], env=env, cwd=repo
    ) as term:
        deadline = start + 30
        while not re.search(r"shift\+tab to cycle", term.screen()):
            if time.perf_counter() > deadline:
                raise RuntimeError(f"no prompt:\n{term.screen()}")
            time.sleep(0.005)
        elapsed = time.perf_counter() - start
        term.keys("C-d")
        term.wait_exit()
    return elapsed


def python_start_seconds() -> float:
    start = time.perf_counter()
    subprocess.run([sys.executable, "-c", "pass"], check=True)
    return time.perf_counter() - start


def bench_terminal() -> tuple[tuple[list[float], list[float]], tuple[list[float], float]]:
    """(ours, baseline) redraw samples in ms; start samples in s and Python's own start."""
    from tests.support.fake_messages_api import FakeMessagesAPI, message, text

    with tempfile.TemporaryDirectory() as scratch:
        root = Path(scratch)
        redraw = (badge_redraw_ms(root), bare_redraw_ms())
        repo = root / "repo"
        (repo / "src").mkdir(parents=True)
        (repo / "src" / "app.py").write_text("def main():\n    return 42\n")
        with FakeMessagesAPI(lambda body: message(text("hi"))) as api:
            starts = [
                start_to_prompt_seconds(repo, root / f"home{n}", api.base_url) for n in range(5)
            ]
        python = statistics.median(python_start_seconds() for _ in range(5))
    return redraw, (starts, python)


if __name__ == "__main__":
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    (ours, bare), (starts, python) = bench_terminal()
    print(f"badge redraw p50 {statistics.median(ours):.2f} ms, max {max(ours):.2f} ms; "
          f"bare prompt p50 {statistics.median(bare):.2f} ms")  # fmt: skip
    print(f"start to prompt p50 {statistics.median(starts):.2f} s; python {python:.2f} s")
