"""The repository as it travels to Ray nodes: deterministic, bounded, without credentials,
and extracted into a node's cache that repairs and prunes itself."""

from __future__ import annotations

import contextlib
import functools
import hashlib
import io
import os
import tarfile
from pathlib import Path

import pytest

from sandbox_runner.batch.shipping.tarball import (
    KEPT_REPOSITORIES,
    MARKER,
    extract,
    node_copy,
    repo_tarball,
)
from sandbox_runner.errors import ConfigError


def names(blob: bytes) -> list[str]:
    with tarfile.open(fileobj=io.BytesIO(blob), mode="r:gz") as archive:
        return archive.getnames()


def member_text(blob: bytes, name: str) -> str:
    with tarfile.open(fileobj=io.BytesIO(blob), mode="r:gz") as archive:
        handle = archive.extractfile(name)
        assert handle is not None
        return handle.read().decode()


def test_the_same_tree_gives_the_same_bytes(sample_repo: Path) -> None:
    first = repo_tarball(sample_repo, None)
    assert repo_tarball(sample_repo, None) == first  # so a node's cache hits on the next run
    (sample_repo / "src" / "new.py").write_text("x = 1\n")
    assert repo_tarball(sample_repo, None) != first


def test_what_the_local_engine_would_not_mount_stays_behind(sample_repo: Path) -> None:
    out = sample_repo / "plans-out"
    out.mkdir()
    (out / "plan.md").write_text("a plan\n")
    os.mkfifo(sample_repo / "pipe")
    (sample_repo / "outside").symlink_to("/etc/passwd")
    (sample_repo / "loop").symlink_to("loop")
    blob = repo_tarball(sample_repo, out)
    shipped = names(blob)
    assert "./pipe" not in shipped and not any("plans-out" in name for name in shipped)
    assert "./outside" in shipped and "./loop" in shipped and "./src/app.py" in shipped


def test_every_name_of_a_hard_linked_file_reaches_the_node(
    tmp_path: Path, sample_repo: Path
) -> None:
    os.link(sample_repo / "README.md", sample_repo / "README-again.md")
    os.mkfifo(sample_repo / "pipe")
    os.link(sample_repo / "pipe", sample_repo / "pipe-again")  # never opened (it would block)
    blob = repo_tarball(sample_repo, None)
    with node_copy(tmp_path / "cache", hashlib.sha256(blob).hexdigest(), lambda: blob) as copy:
        for name in ("README.md", "README-again.md"):
            assert (copy / name).read_text() == (sample_repo / "README.md").read_text()
        assert not (copy / "pipe").exists() and not (copy / "pipe-again").exists()


def test_a_repository_too_large_to_ship_is_refused_while_it_is_packed(
    sample_repo: Path,
) -> None:
    (sample_repo / "data.bin").write_bytes(os.urandom(200_000))
    with pytest.raises(ConfigError, match="over 100000 bytes of files to ship") as refused:
        repo_tarball(sample_repo, None, limit=100_000)
    assert "\n" not in str(refused.value) and "no setting raises" in str(refused.value)


def test_the_cap_counts_the_bytes_a_file_extracts_to_not_its_compressed_size(
    sample_repo: Path,
) -> None:
    with (sample_repo / "sparse.img").open("wb") as sparse:
        sparse.truncate(64 * 2**20)  # zeros: a few hundred KiB once compressed
    with pytest.raises(ConfigError, match=r"over 1 MiB of files .*counted as extracted"):
        repo_tarball(sample_repo, None, limit=2**20)


def test_a_node_refuses_a_tarball_that_extracts_past_the_cap_and_writes_nothing(
    tmp_path: Path,
) -> None:
    blob = gzipped_tar({"./zeros.bin": bytes(4 * 2**20)})
    target = tmp_path / "copy"
    with pytest.raises(ConfigError, match="extracts to over 1 MiB, planrun's cap"):
        extract(blob, target, hashlib.sha256(blob).hexdigest(), limit=2**20)
    assert not target.exists()


def gzipped_tar(files: dict[str, bytes]) -> bytes:
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz") as archive:
        for name, data in files.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            archive.addfile(info, io.BytesIO(data))
    return buffer.getvalue()


DEPTH = 1_100
"""Deeper than Python's default recursion limit (1000), which os.walk, tarfile.add and
shutil.rmtree each reach on Python 3.11."""


def test_a_tree_deeper_than_the_recursion_limit_is_packed_extracted_and_replaced(
    tmp_path: Path, sample_repo: Path
) -> None:
    deepest = sample_repo
    for _ in range(DEPTH):
        deepest = deepest / "d"
        deepest.mkdir()  # one at a time: os.makedirs recurses too
    (deepest / "bottom.txt").write_text("the bottom\n")
    cache = tmp_path / "cache"
    try:
        blob = repo_tarball(sample_repo, None)
        digest = hashlib.sha256(blob).hexdigest()
        with node_copy(cache, digest, lambda: blob) as copy:
            assert (copy / deepest.relative_to(sample_repo) / "bottom.txt").is_file()
        (cache / digest / MARKER).chmod(0o644)
        (cache / digest / MARKER).write_text("damaged")  # the copy is removed and extracted again
        with node_copy(cache, digest, lambda: blob) as again:
            assert (again / deepest.relative_to(sample_repo) / "bottom.txt").read_text() == (
                "the bottom\n"
            )
    finally:  # pytest removes its temporary directories with shutil.rmtree
        for top in (sample_repo / "d", *cache.glob("*/repo/d")):
            remove_chain(top)


def remove_chain(top: Path) -> None:
    """Remove a chain of nested directories from the bottom up, without recursion."""
    chain = [top]
    while chain[-1].is_dir():
        chain[-1].chmod(0o755)
        chain.append(chain[-1] / "d")
    for directory in reversed(chain[:-1]):
        for entry in directory.iterdir():
            if not entry.is_dir():
                entry.unlink()
        directory.rmdir()


@pytest.fixture
def shipped(sample_repo: Path) -> tuple[bytes, str]:
    (sample_repo / "outside").symlink_to("/etc/passwd")
    blob = repo_tarball(sample_repo, None)
    return blob, hashlib.sha256(blob).hexdigest()


def test_a_node_extracts_a_repository_once_read_only_with_its_links(
    tmp_path: Path, shipped: tuple[bytes, str]
) -> None:
    blob, digest = shipped
    fetched: list[int] = []

    def fetch() -> bytes:
        fetched.append(1)
        return blob

    with node_copy(tmp_path / "cache", digest, fetch) as copy:
        pass
    with node_copy(tmp_path / "cache", digest, fetch) as again:
        assert again == copy and len(fetched) == 1
    assert (copy / "src" / "app.py").is_file()
    assert os.readlink(copy / "outside") == "/etc/passwd"
    assert not os.access(copy / "src" / "app.py", os.W_OK) or os.geteuid() == 0
    assert (copy / "src").stat().st_mode & 0o222 == 0


def test_a_damaged_copy_is_replaced_and_wrong_bytes_leave_nothing(
    tmp_path: Path, shipped: tuple[bytes, str]
) -> None:
    blob, digest = shipped
    cache = tmp_path / "cache"
    damaged = cache / digest
    (damaged / "repo").mkdir(parents=True)
    (damaged / MARKER).write_text("something else")
    with node_copy(cache, digest, lambda: blob) as copy:
        assert (copy / "src" / "app.py").is_file()
    with (
        pytest.raises(ConfigError, match="does not match its digest"),
        node_copy(cache, "0" * 64, lambda: blob),
    ):
        pass
    assert sorted(p.name for p in cache.iterdir() if p.is_dir()) == [digest]
    with node_copy(cache, digest, lambda: blob):
        pass
    assert sorted(p.name for p in cache.iterdir()) == [".lock", digest, f"{digest}.in-use"]


def test_the_cache_keeps_the_most_recently_used_copies(tmp_path: Path, sample_repo: Path) -> None:
    cache = tmp_path / "cache"
    digests = []
    for number in range(KEPT_REPOSITORIES + 2):
        (sample_repo / "version.txt").write_text(f"{number}\n")
        blob = repo_tarball(sample_repo, None)
        digests.append(hashlib.sha256(blob).hexdigest())
        with node_copy(cache, digests[-1], functools.partial(bytes, blob)):
            pass
        os.utime(cache / digests[-1] / MARKER, (number, number))
    kept = {p.name for p in cache.iterdir() if p.is_dir()}
    assert len(kept) == KEPT_REPOSITORIES and digests[-1] in kept and digests[0] not in kept


def test_a_copy_in_use_is_never_pruned(tmp_path: Path, sample_repo: Path) -> None:
    cache = tmp_path / "cache"

    def use(number: int) -> contextlib.AbstractContextManager[Path]:
        (sample_repo / "version.txt").write_text(f"{number}\n")
        blob = repo_tarball(sample_repo, None)
        return node_copy(cache, hashlib.sha256(blob).hexdigest(), functools.partial(bytes, blob))

    with use(0) as running:  # a long job; more recent ones come and go meanwhile
        for number in range(1, KEPT_REPOSITORIES + 3):
            with use(number):
                pass
        assert (running / "version.txt").read_text() == "0\n"
    with pytest.raises(FileNotFoundError, match="the job's own"), use(KEPT_REPOSITORIES + 3):
        raise FileNotFoundError("the job's own error")  # passes through, the copy let go
    assert not running.exists()  # once its job is over, it is pruned with the rest
    assert len([p for p in cache.iterdir() if p.is_dir()]) == KEPT_REPOSITORIES
