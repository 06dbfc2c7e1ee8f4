"""A batch's output directory: claimed or reopened, its manifest, and where jobs scratch."""

from __future__ import annotations

import hashlib
import json
import os
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from sandbox_runner import __version__
from sandbox_runner.errors import ConfigError
from sandbox_runner.paths import planrun_home
from sandbox_runner.plans.history import batches_dir
from sandbox_runner.plans.names import claim_directory

MANIFEST = "batch.json"
SCRATCH = ".scratch"


def open_batch_dir(requested: Path | None, workspaces: list[Path]) -> Path:
    """A new batch directory, or --out: new, empty, or an earlier run of a batch (resumed).

    Raises:
        ConfigError: --out is a repository, a file, or a directory that is not a batch's.
    """
    if requested is None:
        return claim_directory(batches_dir())
    out_dir = requested.expanduser().resolve()
    if out_dir in workspaces:
        raise ConfigError(f"--out {requested} is a repository; give a directory for the batch")
    if out_dir.exists() and not out_dir.is_dir():
        raise ConfigError(f"--out {requested} exists and is not a directory")
    if out_dir.is_dir() and any(out_dir.iterdir()) and not (out_dir / MANIFEST).is_file():
        raise ConfigError(
            f"--out {requested} is not empty and holds no batch ({MANIFEST}); planrun never "
            "writes over other files"
        )
    try:
        out_dir.mkdir(parents=True, exist_ok=True)
    except OSError as error:
        raise ConfigError(f"cannot create --out {requested}: {error.strerror}") from None
    return out_dir


def record_run(out_dir: Path, batch_file: Path, digest: str, engine: str) -> None:
    """Write batch.json once; each later run appends itself to its `runs`."""
    path = out_dir / MANIFEST
    now = datetime.now(UTC).isoformat(timespec="seconds")
    try:
        manifest: dict[str, Any] = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        manifest = {
            "batch": out_dir.name,
            "created_at": now,
            "batch_file": str(batch_file),
            "batch_file_sha256": digest,
            "runs": [],
        }
    manifest.setdefault("runs", []).append(
        {"started_at": now, "planrun": __version__, "engine": engine, "batch_file_sha256": digest}
    )
    temporary = path.with_name(f".tmp-{MANIFEST}.{os.getpid()}")
    temporary.write_text(json.dumps(manifest, indent=2) + "\n", encoding="utf-8")
    os.replace(temporary, path)


def scratch_root(out_dir: Path, workspaces: list[Path]) -> Path:
    """Where running jobs keep their files: never inside a repository (the sandboxes'
    writable directories must not show in the read-only workspace)."""
    if not any(out_dir.is_relative_to(workspace) for workspace in workspaces):
        return out_dir / SCRATCH
    # The same place for every run of this batch: the next run keeps what an interrupted
    # one left there (the batch's lock keeps two drivers apart).
    digest = hashlib.sha256(str(out_dir).encode()).hexdigest()[:12]
    return planrun_home() / "tmp" / f"batch-{out_dir.name}-{digest}"
