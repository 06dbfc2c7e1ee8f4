"""The sandbox image: its content-addressed tag, its status, and building it online or offline."""

from __future__ import annotations

import hashlib
import shutil
import subprocess
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Any

import docker.errors

from sandbox_runner import __version__
from sandbox_runner.errors import ImageError, ImageMissingError
from sandbox_runner.sandbox.docker_engine import apt_install

Progress = Callable[[str], None]
IMAGE_REPOSITORY = "planrun-sandbox"
BASE_REPOSITORY = "planrun-base"
ONLINE_BASE = "debian:bookworm-slim"
DEBIAN_SUITE = "bookworm"
DEBIAN_SOURCES = (
    "deb http://deb.debian.org/debian bookworm main",
    "deb http://deb.debian.org/debian bookworm-updates main",
    "deb http://deb.debian.org/debian-security bookworm-security main",
)
# What makes the offline root filesystem "slim": no documentation, manuals or locales.
SLIM_DPKG_OPTIONS = (
    "path-exclude=/usr/share/man/*",
    "path-exclude=/usr/share/doc/*",
    "path-include=/usr/share/doc/*/copyright",
    "path-exclude=/usr/share/locale/*",
    "path-exclude=/usr/share/info/*",
)


def _quiet(_: str) -> None:
    pass


def image_inputs() -> dict[str, bytes]:
    """The files the image is built from, by name (package data, works when installed)."""
    folder = resources.files("sandbox_runner.images").joinpath("sandbox")
    return {
        entry.name: entry.read_bytes()
        for entry in sorted(folder.iterdir(), key=lambda item: item.name)
        if entry.is_file()
    }


def _digest(*parts: bytes) -> str:
    hasher = hashlib.sha256()
    for part in parts:
        hasher.update(len(part).to_bytes(8, "big") + part)
    return hasher.hexdigest()[:12]


def base_packages() -> list[str]:
    """The Debian packages of the offline base, from packages.txt."""
    text = image_inputs()["packages.txt"].decode()
    return [line.strip() for line in text.splitlines() if line.strip() and not line.startswith("#")]


def base_tag() -> str:
    """Tag of the offline base image, derived from its package list and build recipe."""
    recipe = "\n".join([DEBIAN_SUITE, *DEBIAN_SOURCES, *SLIM_DPKG_OPTIONS, *base_packages()])
    return f"{BASE_REPOSITORY}:{DEBIAN_SUITE}-{_digest(recipe.encode())}"


def image_tag() -> str:
    """Tag of the sandbox image: a hash of every image input, so changes rebuild it."""
    inputs = image_inputs()
    parts = [name.encode() + b"\0" + content for name, content in inputs.items()]
    return f"{IMAGE_REPOSITORY}:{_digest(*parts)}"


@dataclass(frozen=True)
class ImageStatus:
    """What `planrun image status` reports."""

    tag: str
    present: bool
    image_id: str | None
    size_mb: float | None
    base_tag: str
    base_present: bool


def _get(client: Any, tag: str) -> Any | None:
    try:
        return client.images.get(tag)
    except docker.errors.ImageNotFound:
        return None


def status(client: Any, configured: str | None = None) -> ImageStatus:
    """Which of the images planrun needs are present: the configured sandbox image (the
    `image` setting) or planrun's own, and the bases it is built from."""
    tag = configured or image_tag()
    image = _get(client, tag)
    return ImageStatus(
        tag=tag,
        present=image is not None,
        image_id=image.short_id if image is not None else None,
        size_mb=round(image.attrs.get("Size", 0) / 1e6, 1) if image is not None else None,
        base_tag=base_tag(),
        base_present=_get(client, base_tag()) is not None,
    )


def require_image(client: Any, tag: str | None = None, configured_in: str = "") -> str:
    """Return the image tag to run, or raise ImageMissingError saying how to get it.

    configured_in names where a configured tag was set (the advice then differs: planrun
    builds only its own tag).
    """
    if _get(client, tag or image_tag()) is None:
        raise ImageMissingError(tag or image_tag(), configured_in if tag else "")
    return tag or image_tag()


def build(client: Any, progress: Progress = _quiet, *, force: bool = False) -> str:
    """Build the sandbox image unless it is present; return its tag.

    The base is debian:bookworm-slim when it is present or can be pulled; otherwise a
    Debian root filesystem is made with mmdebstrap and imported (no registry needed).
    """
    tag = image_tag()
    if not force and _get(client, tag) is not None:
        progress(f"{tag} is already built")
        return tag
    base = _choose_base(client, progress)
    progress(f"building {tag} on {base}")
    with tempfile.TemporaryDirectory(prefix="planrun-image-") as context:
        for name, content in image_inputs().items():
            Path(context, name).write_bytes(content)
        _docker_build(client, context, tag, base, progress)
    progress(f"built {tag}")
    return tag


def _choose_base(client: Any, progress: Progress) -> str:
    if _get(client, ONLINE_BASE) is not None:
        return ONLINE_BASE
    if _get(client, base_tag()) is not None:
        return base_tag()
    progress(f"pulling {ONLINE_BASE}")
    try:
        client.images.pull(ONLINE_BASE)
        return ONLINE_BASE
    except docker.errors.APIError as error:
        reason = str(getattr(error, "explanation", "") or error).splitlines()[0][:120]
        progress(f"cannot pull {ONLINE_BASE} ({reason}); building the base offline with mmdebstrap")
    return build_offline_base(client, progress)


def build_offline_base(client: Any, progress: Progress = _quiet) -> str:
    """Make the base image from a Debian root filesystem: mmdebstrap, then docker import."""
    tag = base_tag()
    if shutil.which("mmdebstrap") is None:
        try:
            apt_install(["mmdebstrap"], progress)
        except Exception as error:
            raise ImageError(f"cannot build the base image offline: {error}") from None
    with tempfile.TemporaryDirectory(prefix="planrun-rootfs-") as workdir:
        tarball = Path(workdir) / "rootfs.tar"
        command = [
            "mmdebstrap",
            "--variant=minbase",
            f"--include={','.join(base_packages())}",
            *(f"--dpkgopt={option}" for option in SLIM_DPKG_OPTIONS),
            DEBIAN_SUITE,
            str(tarball),
            *DEBIAN_SOURCES,
        ]
        progress(f"making a Debian {DEBIAN_SUITE} root filesystem (about a minute)")
        _run_with_progress(command, progress)
        progress(f"importing the root filesystem as {tag}")
        repository, _, version = tag.partition(":")
        with tarball.open("rb") as data:
            client.api.import_image_from_data(
                data, repository=repository, tag=version, changes=['CMD ["/bin/bash"]']
            )
    return tag


def _run_with_progress(command: list[str], progress: Progress) -> None:
    process = subprocess.Popen(
        command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, errors="replace"
    )
    assert process.stdout is not None
    tail: list[str] = []
    for line in process.stdout:
        line = line.rstrip()
        tail = [*tail[-9:], line]
        if line.startswith("I: ") and not line.startswith(("I: running", "I: removing")):
            progress(line[3:])
    if process.wait() != 0:
        detail = " | ".join(tail[-3:])
        raise ImageError(f"{command[0]} failed with exit code {process.returncode}: {detail}")


def _docker_build(client: Any, context: str, tag: str, base: str, progress: Progress) -> None:
    stream = client.api.build(
        path=context,
        tag=tag,
        buildargs={"BASE": base},
        labels={"io.planrun.image": "sandbox", "io.planrun.image-version": __version__},
        rm=True,
        forcerm=True,
        decode=True,
    )
    for chunk in stream:
        if "error" in chunk:
            raise ImageError(f"docker build failed: {str(chunk['error']).strip()[:300]}")
        text = str(chunk.get("stream", "")).strip()
        if text.startswith("Step "):
            progress(text if len(text) <= 100 else text[:97] + "...")
