"""`make bench`: planrun's sandbox against baselines measured in the same run, on this machine.

`--quick` (`make bench-quick`) leaves out the monorepos of 100,000 and 1,000,000 files.

Each figure is printed with its baseline and the ratio, and checked against its target.
Exit status 1 when a target is missed, so the numbers cannot quietly regress.
"""

from __future__ import annotations

import os
import platform
import shutil
import statistics
import subprocess
import sys
import sysconfig
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from sandbox_runner.errors import PlanrunError
from sandbox_runner.limits import Limits
from sandbox_runner.sandbox.docker_engine import apt_install, connect
from sandbox_runner.sandbox.docker_sandbox import DockerSandbox
from sandbox_runner.sandbox.image import require_image
from sandbox_runner.sandbox.spec import SandboxSpec
from sandbox_runner.types import ToolRequest

SESSION = "bench"


@dataclass
class Figure:
    """One measured comparison and its target."""

    name: str
    ours: str
    baseline: str
    ratio: float | None
    target: str
    met: bool | None
    """Whether the target was met; None when it could not be checked (no baseline)."""


def percentile(samples: list[float], fraction: float) -> float:
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, round(fraction * (len(ordered) - 1)))]


def timed(action: Callable[[], Any], repeat: int) -> list[float]:
    samples = []
    for _ in range(repeat):
        start = time.perf_counter()
        action()
        samples.append(time.perf_counter() - start)
    return samples


def host_tool(command: str, package: str) -> str | None:
    """Make sure a baseline's host tool is there (as root on Debian: install it).

    Returns None when the tool can be run, else why not, in one line naming the package.
    """
    if shutil.which(command):
        return None
    try:
        apt_install([package], lambda line: print(f"bench: {line}", flush=True))
    except PlanrunError as error:
        return f"{command} is not installed ({error}); install the Debian package {package}"
    if shutil.which(command):
        return None
    return f"{command} is still missing after installing {package}"


def make_spec(
    image: str, workspace: Path, plan_dir: Path, limits: Limits | None = None
) -> SandboxSpec:
    return SandboxSpec.plan(workspace, plan_dir, image, limits=limits, session=SESSION)


def bench_round_trip(client: Any, image: str, workspace: Path, plan_dir: Path) -> Figure:
    with DockerSandbox(make_spec(image, workspace, plan_dir), client) as sandbox:
        read = ToolRequest("read", {"file_path": "/workspace/small.txt"})
        timed(lambda: sandbox.call(read), 50)
        ours = timed(lambda: sandbox.call(read), 1000)
        cid = sandbox.container_id
        assert cid is not None
        exec_cat = ["docker", "exec", cid, "cat", "/workspace/small.txt"]
        baseline = timed(lambda: subprocess.run(exec_cat, capture_output=True, check=True), 30)
    ratio = statistics.median(baseline) / statistics.median(ours)
    return Figure(
        "tool round trip (read of a small file)",
        f"p50 {statistics.median(ours) * 1e3:.2f} ms, p95 {percentile(ours, 0.95) * 1e3:.2f} ms",
        f"docker exec cat: p50 {statistics.median(baseline) * 1e3:.1f} ms, "
        f"p95 {percentile(baseline, 0.95) * 1e3:.1f} ms",
        ratio,
        ">= 100x faster at p50",
        ratio >= 100,
    )


def bench_ready(client: Any, image: str, workspace: Path, plan_dir: Path) -> Figure:
    def ready_once() -> float:
        sandbox = DockerSandbox(make_spec(image, workspace, plan_dir), client)
        start = time.perf_counter()
        sandbox.start()
        sandbox.call(ToolRequest("ping"))
        elapsed = time.perf_counter() - start
        sandbox.stop()
        return elapsed

    run_true = ["docker", "run", "--rm", "--network", "none", image, "true"]
    ready_once()
    subprocess.run(run_true, capture_output=True, check=True)
    ours, baseline = [], []
    for _ in range(7):
        ours.append(ready_once())
        baseline += timed(lambda: subprocess.run(run_true, capture_output=True, check=True), 1)
    ratio = statistics.median(ours) / statistics.median(baseline)
    return Figure(
        "sandbox ready (create to first tool reply)",
        f"p50 {statistics.median(ours) * 1e3:.0f} ms",
        f"docker run --rm IMAGE true: p50 {statistics.median(baseline) * 1e3:.0f} ms",
        ratio,
        "<= 1.2x",
        ratio <= 1.2,
    )


def bench_grep(client: Any, image: str, plan_dir: Path) -> Figure:
    tree = Path(sysconfig.get_paths()["stdlib"])
    files = sum(len(names) for _, _, names in os.walk(tree))
    pattern = r"def __init__\(self"
    cpus = float(os.cpu_count() or 1)
    spec = make_spec(image, tree, plan_dir, Limits(cpus=cpus, memory_mb=1024))
    with DockerSandbox(spec, client) as sandbox:
        grep = ToolRequest("grep", {"pattern": pattern, "output_mode": "count"}, timeout=300)
        sandbox.call(grep)
        ours = timed(lambda: sandbox.call(grep), 5)
    median = statistics.median(ours)
    name = f"grep over {tree} ({files} files, sandbox with {cpus:g} CPUs)"
    missing = host_tool("rg", "ripgrep")
    if missing is not None:
        return Figure(name, f"p50 {median * 1e3:.0f} ms", f"baseline missing: {missing}",
                      None, "<= 1.2x", None)  # fmt: skip
    host_rg = ["rg", "--no-config", "--hidden", "--count", "--glob", "!.git", "-e", pattern]
    host_rg.append(str(tree))
    subprocess.run(host_rg, capture_output=True)
    baseline = timed(lambda: subprocess.run(host_rg, capture_output=True), 5)
    ratio = median / statistics.median(baseline)
    return Figure(
        name,
        f"p50 {median * 1e3:.0f} ms",
        f"ripgrep on the host: p50 {statistics.median(baseline) * 1e3:.0f} ms",
        ratio,
        "<= 1.2x",
        ratio <= 1.2,
    )


def bench_idle_memory(client: Any, image: str, workspace: Path, plan_dir: Path) -> Figure:
    with DockerSandbox(make_spec(image, workspace, plan_dir), client) as sandbox:
        sandbox.call(ToolRequest("read", {"file_path": "/workspace/small.txt"}))
        time.sleep(1.0)
        stats = client.containers.get(sandbox.container_id).stats(stream=False)
    memory = stats["memory_stats"]
    detail = memory.get("stats", {})
    cache = detail.get("total_inactive_file", detail.get("inactive_file", detail.get("cache", 0)))
    used_mb = (memory["usage"] - cache) / 2**20
    return Figure(
        "idle sandbox memory (container + tool server)",
        f"{used_mb:.1f} MiB",
        "target 30 MiB",
        used_mb / 30,
        "<= 30 MiB",
        used_mb <= 30,
    )


def bench_overhead(perspectives: int, repo: Path, scratch: Path, client: Any, image: str) -> Figure:
    """One whole plan run with the model answering at once, in a warm process.

    Everything measured is planrun's: containers, tool calls, policy, validation, plan
    files, workspace check and report. The SDK is imported before timing starts, since
    a batch job or CI pipeline pays that once (a cold CLI start is measured separately).
    """
    from sandbox_runner.model.anthropic_model import AnthropicModel
    from sandbox_runner.runs.multi import PlanRunSpec, execute
    from tests.support.fake_messages_api import FakeMessagesAPI
    from tests.support.plan_scripts import PerspectiveScript, writes_plan
    from tests.unit.test_plan_loop import VALID_PLAN

    labels = [f"p{n}" for n in range(perspectives)]

    def factory(plan_dir: Path | None) -> DockerSandbox:
        # No plan directory: the throwaway sandbox that runs `git status` before and after.
        if plan_dir is None:
            spec = SandboxSpec.probe(repo, image, session=SESSION)
        else:
            spec = SandboxSpec.plan(repo, plan_dir, image, session=SESSION, agent=plan_dir.name)
        return DockerSandbox(spec, client)

    samples = []
    for attempt in range(4):
        script = PerspectiveScript({label: writes_plan(label, VALID_PLAN) for label in labels})
        with FakeMessagesAPI(script) as api:
            spec = PlanRunSpec(
                requirements="Add a flag",
                workspace=repo,
                perspectives=list(labels),
                model_id="claude-sonnet-4-6",
                parallel=perspectives,
                # The figure is the perspectives' overhead, as measured before the synthesis
                # existed; a synthesis is one more agent run after them.
                synthesis=False,
            )
            out_dir = scratch / f"bench-{perspectives}-{attempt}"
            out_dir.mkdir()
            start = time.perf_counter()
            outcome = execute(
                spec,
                out_dir,
                model_factory=lambda _: AnthropicModel(
                    "claude-sonnet-4-6", api_key="b", base_url=api.base_url
                ),
                sandbox_factory=factory,
            )
            elapsed = time.perf_counter() - start
        if outcome.record.exit_code != 0:
            raise RuntimeError(f"bench run failed: {[r.reason for r in outcome.record.results]}")
        if attempt:
            samples.append(elapsed)
    median = statistics.median(samples)
    target = {1: 1.5, 8: 4.0}.get(perspectives)
    return Figure(
        f"planrun overhead per run, {perspectives} perspective(s), model answering at once",
        f"p50 {median:.2f} s ({median / perspectives:.2f} s per plan)",
        "3 model turns and 2 tool calls per plan, one container each, report written",
        median / target if target else None,
        f"<= {target:.1f} s" if target else "none (how it grows)",
        median <= target if target else True,
    )


def bench_cold_cli(repo: Path, scratch: Path) -> Figure:
    """The same single plan as a fresh `planrun plan` process: start-up and SDK import included."""
    from tests.support.fake_messages_api import FakeMessagesAPI
    from tests.support.plan_scripts import PerspectiveScript, writes_plan
    from tests.unit.test_plan_loop import VALID_PLAN

    samples = []
    for attempt in range(3):
        with FakeMessagesAPI(PerspectiveScript({"plan": writes_plan("plan", VALID_PLAN)})) as api:
            env = dict(os.environ, ANTHROPIC_BASE_URL=api.base_url, ANTHROPIC_API_KEY="bench")
            out = scratch / f"cold-{attempt}"
            command = [sys.executable, "-m", "sandbox_runner", "plan", "Add a flag"]
            command += ["--repo", str(repo), "--out", str(out), "--json"]
            start = time.perf_counter()
            result = subprocess.run(command, capture_output=True, text=True, env=env)
            samples.append(time.perf_counter() - start)
        if result.returncode != 0:
            raise RuntimeError(f"planrun plan failed: {result.stderr[-500:]}")
    import_started = time.perf_counter()
    subprocess.run([sys.executable, "-c", "import anthropic"], check=True)
    sdk_import = time.perf_counter() - import_started
    median = statistics.median(samples)
    return Figure(
        "cold `planrun plan` process, 1 perspective",
        f"p50 {median:.2f} s",
        f"`python -c 'import anthropic'` alone: {sdk_import:.2f} s (overlapped with the start)",
        None,
        "none (information)",
        True,
    )


def measured(name: str, bench: Callable[[], Figure]) -> Figure:
    """Run one benchmark; a failure is reported as its figure, and the others still run."""
    try:
        return bench()
    except Exception as error:
        return Figure(name, f"failed: {type(error).__name__}: {error}", "-", None, "-", False)


def bench_guard_figure() -> Figure:
    """The work session's look after each tool call, against `find -type d` of the tree."""
    from benchmarks.guard import TARGET_RATIO, bench_guard

    ours, baseline, ratio, met = bench_guard()
    target = f"<= {TARGET_RATIO:.1f}x"
    return Figure("work-session guard, look after a call", ours, baseline, ratio, target, met)


def bench_stop(repo: Path, scratch: Path, client: Any) -> Figure:
    """Ctrl-C or SIGTERM during a run of 4 subagents whose model calls all hang."""
    from benchmarks.signals import PERSPECTIVES, TARGET_SECONDS, bench_signal_exit

    text, slowest = bench_signal_exit(repo, scratch, client)
    return Figure(
        f"exit after Ctrl-C or SIGTERM, {PERSPECTIVES} subagents waiting for a hung API",
        text,
        "containers removed, report written; `docker stop` waits 10 s before SIGKILL",
        slowest / TARGET_SECONDS,
        f"<= {TARGET_SECONDS:.0f} s",
        slowest <= TARGET_SECONDS,
    )


def bench_plan_mode(repo: Path, scratch: Path, client: Any, image: str) -> Figure:
    from benchmarks.sessions import PLAN_MODE_TARGET_MS, plan_mode_first_reply_ms

    samples = plan_mode_first_reply_ms(repo, scratch, client, image)
    median = statistics.median(samples)
    return Figure(
        "session: /plan to the plan session's first tool reply (container started ahead)",
        f"p50 {median:.0f} ms, max {max(samples):.0f} ms",
        "the model answering at once",
        median / PLAN_MODE_TARGET_MS,
        f"<= {PLAN_MODE_TARGET_MS:.0f} ms",
        median <= PLAN_MODE_TARGET_MS,
    )


def bench_first_line(repo: Path, scratch: Path) -> Figure:
    from benchmarks.sessions import FIRST_LINE_TARGET_S, first_line_seconds

    home = scratch / "session-home"
    samples = first_line_seconds(repo, home)
    median = statistics.median(samples)
    return Figure(
        "session: `planrun` start to its first line (line mode)",
        f"p50 {median:.2f} s",
        "a new process each time",
        median / FIRST_LINE_TARGET_S,
        f"<= {FIRST_LINE_TARGET_S} s",
        median <= FIRST_LINE_TARGET_S,
    )


def bench_scratch_figure(client: Any, image: str, scratch: Path) -> Figure:
    """A first test run in a scratch run's copy-on-write layer against the host."""
    from benchmarks.scratch import TARGET_RATIO, bench_scratch

    ours, baseline, ratio, met = bench_scratch(client, image, scratch, SESSION)
    return Figure(
        "scratch run, first test run", ours, baseline, ratio, f"<= {TARGET_RATIO:.1f}x", met
    )


def bench_terminal_figures() -> list[Figure]:
    """Shift+Tab to the redrawn badge, and `planrun` start to an interactive prompt."""
    from benchmarks.terminal import (
        REDRAW_TARGET_MS,
        START_TARGET_SECONDS,
        bench_terminal,
    )

    (ours, bare), (starts, python) = bench_terminal()
    redraw, bare_p50 = percentile(ours, 0.95), statistics.median(bare)
    start = statistics.median(starts)
    return [
        Figure(
            "Shift+Tab to the badge redrawn (session prompt, p95)",
            f"p95 {redraw:.1f} ms, p50 {statistics.median(ours):.1f} ms",
            f"bare prompt_toolkit prompt, toolbar flip: p50 {bare_p50:.1f} ms",
            statistics.median(ours) / bare_p50,
            f"<= {REDRAW_TARGET_MS:.0f} ms",
            redraw <= REDRAW_TARGET_MS,
        ),
        Figure(
            "`planrun` start to an interactive prompt (tmux, p50)",
            f"p50 {start:.2f} s, max {max(starts):.2f} s",
            f"`python -c pass`: {python:.2f} s",
            start / START_TARGET_SECONDS,
            f"<= {START_TARGET_SECONDS} s",
            start <= START_TARGET_SECONDS,
        ),
    ]


def bench_streaming_figure() -> Figure:
    """An answer's first streamed token, from the fake API sending it to the screen."""
    from benchmarks.streaming import TARGET_MS, bench_first_token

    ours, line = bench_first_token()
    median = statistics.median(ours)
    return Figure(
        "session: first streamed token, sent to on the screen (pty, p50)",
        f"p50 {median:.1f} ms, max {max(ours):.1f} ms",
        f"line mode, no screen to redraw: p50 {statistics.median(line):.1f} ms",
        median / max(statistics.median(line), 0.1),
        f"<= {TARGET_MS:.0f} ms",
        median <= TARGET_MS,
    )


def main(quick: bool = False) -> int:
    """Every figure; QUICK leaves out the 100,000- and 1,000,000-file monorepos."""
    from benchmarks.user_image import bench_user_image_ready

    client = connect()
    image = require_image(client)
    print(
        f"planrun benchmarks, {time.strftime('%Y-%m-%d')}, {platform.machine()}, "
        f"{os.cpu_count()} CPUs, Python {platform.python_version()}, image {image}"
    )
    with tempfile.TemporaryDirectory() as scratch:
        workspace, plan_dir = Path(scratch, "ws"), Path(scratch, "plan")
        workspace.mkdir()
        plan_dir.mkdir()
        (workspace / "small.txt").write_text("".join(f"line {n}\n" for n in range(20)))
        figures = [
            measured("round trip", lambda: bench_round_trip(client, image, workspace, plan_dir)),
            measured("sandbox ready", lambda: bench_ready(client, image, workspace, plan_dir)),
            measured("grep", lambda: bench_grep(client, image, plan_dir)),
            measured("idle memory", lambda: bench_idle_memory(client, image, workspace, plan_dir)),
            measured(
                "sandbox ready on your image",
                lambda: bench_user_image_ready(client, workspace, plan_dir, SESSION, Figure),
            ),
        ]
        repo = Path(scratch, "repo")
        for relative in ("src/app.py", "src/util.py", "tests/test_app.py", "README.md"):
            (repo / relative).parent.mkdir(parents=True, exist_ok=True)
            (repo / relative).write_text("# placeholder\n")
        # A git repository, as most are: the before/after `git status` checks are included.
        git = ["git", "-C", str(repo), "-c", "user.name=bench", "-c", "user.email=bench@example"]
        for command in (["init", "-q"], ["add", "."], ["commit", "-qm", "initial"]):
            subprocess.run([*git, *command], check=True)
        for count in (1, 4, 8):
            overhead = partial(bench_overhead, count, repo, Path(scratch), client, image)
            figures.append(measured(f"plan run overhead, {count} perspectives", overhead))
        figures.append(measured("cold CLI", lambda: bench_cold_cli(repo, Path(scratch))))
        figures.append(
            measured("stop on a signal", lambda: bench_stop(repo, Path(scratch), client))
        )
        figures.append(
            measured("plan mode", lambda: bench_plan_mode(repo, Path(scratch), client, image))
        )
        figures.append(measured("first line", lambda: bench_first_line(repo, Path(scratch))))
        figures.append(measured("work-session guard", bench_guard_figure))
        figures.append(measured("first streamed token", bench_streaming_figure))
        figures.append(
            measured("scratch run", lambda: bench_scratch_figure(client, image, Path(scratch)))
        )
        try:
            figures += bench_terminal_figures()
        except Exception as error:
            figures.append(Figure("terminal session", f"failed: {error!r}", "-", None, "-", False))
        from benchmarks.batch import bench_batch_local, bench_batch_ray, bench_resume_decision

        figures.append(
            measured(
                "batch, local engine",
                lambda: bench_batch_local(repo, Path(scratch), client, image, SESSION, Figure),
            )
        )
        figures.append(
            measured("batch, Ray", lambda: bench_batch_ray(repo, Path(scratch), client, Figure))
        )
        figures.append(
            measured("resume decision", lambda: bench_resume_decision(repo, Path(scratch), Figure))
        )
        figures += bench_monorepo_figures(quick, Path(scratch), client, image)
    return report(figures)


def bench_monorepo_figures(quick: bool, scratch: Path, client: Any, image: str) -> list[Figure]:
    """A plan run and a batch on generated trees of up to a million files (made once)."""
    from benchmarks.monorepo_bench import QUICK_SIZES, SIZES, monorepo_figures

    try:
        return monorepo_figures(QUICK_SIZES if quick else SIZES, scratch, client, image, Figure)
    except Exception as error:
        return [
            Figure("monorepos", f"failed: {type(error).__name__}: {error}", "-", None, "-", False)
        ]


def report(figures: list[Figure]) -> int:
    """Print every figure; exit status 1 when a target was missed or a benchmark failed."""
    width = max(len(f.name) for f in figures)
    for figure in figures:
        verdict = {True: "ok", False: "MISSED", None: "not checked"}[figure.met]
        print(f"{figure.name:<{width}}  {figure.ours}")
        print(f"{'':<{width}}  vs {figure.baseline}")
        if figure.ratio is not None or figure.met is None:
            ratio = "no ratio" if figure.ratio is None else f"ratio {figure.ratio:.2f}"
            print(f"{'':<{width}}  {ratio}, target {figure.target}: {verdict}")
    unchecked = [f.name for f in figures if f.met is None]
    if unchecked:
        print(f"not checked (a baseline or a module is missing, or the tree is too small "
              f"for the target): {', '.join(unchecked)}")  # fmt: skip
    return 1 if any(f.met is False for f in figures) else 0


if __name__ == "__main__":
    sys.exit(main(quick="--quick" in sys.argv[1:]))
