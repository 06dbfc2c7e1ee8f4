"""Copying /plan out to the host: the running count of the host copy's bytes, and its cap,
through replaced, shrunk and removed files (a fake /plan answers the tool server's ops)."""

from __future__ import annotations

import base64
from pathlib import Path

import pytest

from sandbox_runner.sandbox.plan_copy import (
    MAX_FILE_BYTES,
    MAX_TOTAL_BYTES,
    CopyProblem,
    HostCopy,
    copy_all,
    copy_file,
)
from sandbox_runner.types import ExecResult, ToolRequest

CHUNK = 192 * 1024
FAR = float("inf")


class FakePlan:
    """A sandbox's /plan as plan_files and plan_read see it: names to contents."""

    def __init__(self) -> None:
        self.files: dict[str, bytes] = {}

    def __call__(self, request: ToolRequest) -> ExecResult:
        if request.op == "plan_files":
            listing = [{"path": name.encode().hex(), "size": len(data)} for name, data in
                       self.files.items()]  # fmt: skip
            return ExecResult(True, f"{len(listing)} files", meta={"files": listing})
        assert request.op == "plan_read"
        data, offset = self.files[request.args["path"]], request.args["offset"]
        chunk = data[offset : offset + CHUNK]
        eof = offset + len(chunk) >= len(data)
        return ExecResult(True, base64.b64encode(chunk).decode(), meta={"eof": eof})


def on_disk(plan_dir: Path) -> int:
    return sum(path.stat().st_size for path in plan_dir.rglob("*") if path.is_file())


@pytest.fixture
def plan_dir(tmp_path: Path) -> Path:
    made = tmp_path / "plan"
    made.mkdir()
    return made


def test_the_count_follows_copies_replacements_and_shrinks(plan_dir: Path) -> None:
    (plan_dir / "earlier.md").write_bytes(b"x" * 100)  # a plan from an earlier session
    sandbox, host = FakePlan(), HostCopy(plan_dir)
    sandbox.files["plan.md"] = b"p" * MAX_FILE_BYTES
    assert copy_file(sandbox, "plan.md", host, FAR) == MAX_FILE_BYTES
    assert host.total == on_disk(plan_dir) == 100 + MAX_FILE_BYTES
    sandbox.files["plan.md"] = b"short"
    copy_file(sandbox, "plan.md", host, FAR)
    assert host.total == on_disk(plan_dir) == 105
    for name in ("a", "deep/b", "deep/c"):
        sandbox.files[name] = b"f" * MAX_FILE_BYTES
    assert copy_all(sandbox, host, FAR) == []
    assert host.total == on_disk(plan_dir) == 105 + 3 * MAX_FILE_BYTES
    assert (plan_dir / "plan.md").read_bytes() == b"short"


def test_the_cap_holds_and_a_shrunk_or_removed_file_frees_its_room(plan_dir: Path) -> None:
    (plan_dir / "staged.md").write_bytes(b"s" * 1000)  # the session's staging copy
    sandbox, host = FakePlan(), HostCopy(plan_dir)
    for name in ("a", "b", "c"):
        sandbox.files[name] = b"f" * MAX_FILE_BYTES
        copy_file(sandbox, name, host, FAR)
    room = MAX_TOTAL_BYTES - on_disk(plan_dir)
    sandbox.files["d"] = b"d" * (room + 1)
    with pytest.raises(CopyProblem, match="would pass"):
        copy_file(sandbox, "d", host, FAR)
    assert not (plan_dir / "d").exists() and host.total == on_disk(plan_dir)

    sandbox.files["a"] = b"small"  # shrunk in the sandbox: its room is free again
    copy_file(sandbox, "a", host, FAR)
    copy_file(sandbox, "d", host, FAR)
    assert host.total == on_disk(plan_dir) == MAX_TOTAL_BYTES - MAX_FILE_BYTES + 6

    sandbox.files["a"] = b"a" * MAX_FILE_BYTES  # grown past the cap by one byte
    with pytest.raises(CopyProblem, match="would pass"):
        copy_file(sandbox, "a", host, FAR)
    assert (plan_dir / "a").read_bytes() == b"small" and host.total == on_disk(plan_dir)

    (plan_dir / "staged.md").unlink()  # removed by the host, behind the count's back
    copy_file(sandbox, "a", host, FAR)
    assert host.total == on_disk(plan_dir) == MAX_TOTAL_BYTES - 999


def test_a_file_1100_directories_deep_is_left_out(plan_dir: Path) -> None:
    sandbox, host = FakePlan(), HostCopy(plan_dir)
    sandbox.files = {"plan.md": b"plan", "d/" * 1100 + "notes.md": b"deep", "a/b.md": b"b"}
    assert copy_all(sandbox, host, FAR) == ["a file with an unusable name"]
    assert sorted(path.name for path in plan_dir.iterdir()) == ["a", "plan.md"]
    assert host.total == 5
