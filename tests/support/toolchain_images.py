"""Users' toolchain images for the tests, built offline and kept by a content tag.

A Node image and a Go image (Debian root filesystems made by mmdebstrap, without python3),
and a busybox image with no libc, no python and no bash at all (Debian's static busybox
alone in an otherwise empty root filesystem). Each is built once per recipe: its tag is
a hash of the recipe, so later runs on the machine reuse it.

`python -m tests.support.toolchain_images` builds all three.
"""

from __future__ import annotations

import hashlib
import io
import subprocess
import tarfile
import tempfile
from pathlib import Path
from typing import Any

import docker.errors

from sandbox_runner.sandbox.image import DEBIAN_SOURCES, DEBIAN_SUITE, SLIM_DPKG_OPTIONS

REPOSITORY = "planrun-test-toolchain"
NODE_PACKAGES = ("nodejs",)
GO_PACKAGES = ("golang-go", "ca-certificates")
# What each Debian image sets, as a Dockerfile's ENV would: Go finds its compiler on PATH
# and builds without a C compiler.
NODE_ENV = ("PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",)
GO_ENV = (
    "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin:/usr/lib/go/bin",
    "CGO_ENABLED=0",
)
BUSYBOX_ENV = ("PATH=/bin",)


def _tag(name: str, recipe: list[str]) -> str:
    digest = hashlib.sha256("\n".join(recipe).encode()).hexdigest()[:12]
    return f"{REPOSITORY}:{name}-{digest}"


def _present(client: Any, tag: str) -> bool:
    try:
        client.images.get(tag)
    except docker.errors.ImageNotFound:
        return False
    return True


def _import(client: Any, tarball: bytes | Path, tag: str, env: tuple[str, ...]) -> None:
    repository, _, version = tag.partition(":")
    changes = [f"ENV {entry.replace('=', ' ', 1)}" for entry in env] + ['CMD ["sh"]']
    data = tarball.read_bytes() if isinstance(tarball, Path) else tarball
    client.api.import_image_from_data(data, repository=repository, tag=version, changes=changes)


def debian_image(client: Any, name: str, packages: tuple[str, ...], env: tuple[str, ...]) -> str:
    """A Debian bookworm minbase image with PACKAGES (made once; its tag names the recipe)."""
    recipe = [DEBIAN_SUITE, *DEBIAN_SOURCES, *SLIM_DPKG_OPTIONS, *packages, *env]
    tag = _tag(name, recipe)
    if _present(client, tag):
        return tag
    with tempfile.TemporaryDirectory(prefix="planrun-toolchain-") as workdir:
        tarball = Path(workdir) / "rootfs.tar"
        command = [
            "mmdebstrap",
            "--variant=minbase",
            "--quiet",
            f"--include={','.join(packages)}",
            *(f"--dpkgopt={option}" for option in SLIM_DPKG_OPTIONS),
            DEBIAN_SUITE,
            str(tarball),
            *DEBIAN_SOURCES,
        ]
        subprocess.run(command, check=True, capture_output=True)
        _import(client, tarball, tag, env)
    return tag


def node_image(client: Any) -> str:
    """Debian's nodejs (node --test), no python3."""
    return debian_image(client, "node", NODE_PACKAGES, NODE_ENV)


def go_image(client: Any) -> str:
    """Debian's golang-go, no python3."""
    return debian_image(client, "go", GO_PACKAGES, GO_ENV)


def busybox_image(client: Any) -> str:
    """/bin/busybox (static) and its applet links, nothing else: no libc, python or bash."""
    tag = _tag("busybox", ["busybox-static", DEBIAN_SUITE, *BUSYBOX_ENV])
    if _present(client, tag):
        return tag
    with tempfile.TemporaryDirectory(prefix="planrun-busybox-") as workdir:
        subprocess.run(
            ["apt-get", "download", "busybox-static"], cwd=workdir, check=True, capture_output=True
        )
        package = next(Path(workdir).glob("busybox-static_*.deb"))
        subprocess.run(["dpkg-deb", "-x", str(package), f"{workdir}/root"], check=True)
        binary = Path(workdir, "root/bin/busybox").read_bytes()
        applets = subprocess.run(
            [f"{workdir}/root/bin/busybox", "--list"], check=True, capture_output=True, text=True
        ).stdout.split()
        _import(client, _busybox_tar(binary, applets), tag, BUSYBOX_ENV)
    return tag


def _busybox_tar(binary: bytes, applets: list[str]) -> bytes:
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w") as archive:
        for directory in ("bin", "tmp", "etc"):
            entry = tarfile.TarInfo(directory)
            entry.type, entry.mode = tarfile.DIRTYPE, 0o1777 if directory == "tmp" else 0o755
            archive.addfile(entry)
        entry = tarfile.TarInfo("bin/busybox")
        entry.size, entry.mode = len(binary), 0o755
        archive.addfile(entry, io.BytesIO(binary))
        for applet in applets:
            if applet in ("busybox", "bash"):
                continue
            link = tarfile.TarInfo(f"bin/{applet}")
            link.type, link.linkname = tarfile.SYMTYPE, "busybox"
            archive.addfile(link)
    return buffer.getvalue()


if __name__ == "__main__":
    from sandbox_runner.sandbox.docker_engine import connect

    docker_client = connect()
    for make in (busybox_image, node_image, go_image):
        print(make(docker_client), flush=True)
