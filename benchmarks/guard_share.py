"""The git guard's first look shared across a batch: JOBS sandboxes on one big repository,
each walking it itself, against the same sandboxes checking the host's one walk (the seed,
sandbox/guard_seed.py). Real containers; each tool server reports its first look's time.

    python benchmarks/guard_share.py /work/bigrepos/files-1000000 [jobs] [parallel]
"""

from __future__ import annotations

import statistics
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.guard import GuardFigure
from sandbox_runner.sandbox.docker_engine import connect
from sandbox_runner.sandbox.docker_sandbox import DockerSandbox
from sandbox_runner.sandbox.guard_seed import write_seed
from sandbox_runner.sandbox.image import require_image
from sandbox_runner.sandbox.spec import SandboxSpec
from sandbox_runner.types import ToolRequest

JOBS = 16
PARALLEL = 4
"""Sandboxes at once, as a batch's `parallel` setting runs them."""
SEEDED_TARGET = 0.5
"""A seeded sandbox's first look, as a share of one that walks everything."""
FIRST_LOOK_TIMEOUT = 600.0


def guard_share_figures(
    repository: Path, jobs: int = JOBS, parallel: int = PARALLEL
) -> list[GuardFigure]:
    """A batch of JOBS probe sandboxes on REPOSITORY (a benchmarks/monorepo.py repository,
    such as one of 1,000,000 files), PARALLEL at a time, first without a seed, then with
    one the host made once.

    Returns, in order: the median seeded sandbox's first look against the median unseeded
    one's (target: at most SEEDED_TARGET of it); and the batch's first looks in all, the
    host's walk included, against the unseeded batch's (target: at most SEEDED_TARGET).
    """
    client = connect()
    image = require_image(client)
    unseeded = batch_first_looks(client, image, repository, None, jobs, parallel)
    with tempfile.TemporaryDirectory(prefix="planrun-bench-seed-") as scratch:
        started = time.perf_counter()
        path = write_seed(repository, Path(scratch))
        host = time.perf_counter() - started
        if path is None:
            raise RuntimeError(f"no seed could be made of {repository}")
        seeded = batch_first_looks(client, image, repository, path.parent, jobs, parallel)
    median_seeded, median_unseeded = statistics.median(seeded), statistics.median(unseeded)
    total_seeded, total_unseeded = host + sum(seeded), sum(unseeded)
    return [
        GuardFigure(
            f"git guard first look per sandbox, seeded ({jobs} jobs, {parallel} at once)",
            f"median {median_seeded:.2f} s (max {max(seeded):.2f} s)",
            f"walking everything: median {median_unseeded:.2f} s (max {max(unseeded):.2f} s)",
            median_seeded / median_unseeded,
            median_seeded <= SEEDED_TARGET * median_unseeded,
        ),
        GuardFigure(
            f"git guard first looks of a {jobs}-job batch, seeded",
            f"{total_seeded:.1f} s (host's walk {host:.1f} s + {sum(seeded):.1f} s)",
            f"walking everything: {total_unseeded:.1f} s",
            total_seeded / total_unseeded,
            total_seeded <= SEEDED_TARGET * total_unseeded,
        ),
    ]


def batch_first_looks(
    client: object, image: str, repository: Path, seed: Path | None, jobs: int, parallel: int
) -> list[float]:
    """Each sandbox's first look, in seconds, as its tool server measured it."""
    with ThreadPoolExecutor(parallel) as pool:
        return list(pool.map(lambda _: first_look(client, image, repository, seed), range(jobs)))


def first_look(client: object, image: str, repository: Path, seed: Path | None) -> float:
    spec = SandboxSpec.probe(repository, image, session="bench", agent="guard", git_seed=seed)
    with DockerSandbox(spec, client) as sandbox:
        deadline = time.monotonic() + FIRST_LOOK_TIMEOUT
        while time.monotonic() < deadline:
            meta = sandbox.call(ToolRequest("ping", {})).meta
            if "git_first_look_ms" in meta:
                if seed is not None and not meta.get("git_seeded_directories"):
                    raise RuntimeError("the sandbox did not take the seed")
                return float(meta["git_first_look_ms"]) / 1000
            time.sleep(0.1)
    raise TimeoutError("the git guard's first look did not end")


if __name__ == "__main__":
    arguments = sys.argv[1:]
    counts = [int(argument) for argument in arguments[1:3]]
    for figure in guard_share_figures(Path(arguments[0]), *counts):
        verdict = "ok" if figure.met else "MISSED"
        print(f"{figure.name}: {figure.ours} vs {figure.baseline} = {figure.ratio:.3f} {verdict}")
