"""Sandboxes on the user's own image: planrun's runtime added to it, once per base image.

The runtime (`planrun-runtime:<tag>`) is python3 with its standard library, bash, rg,
ctags and git, taken from planrun's own sandbox image with every library they load and
glibc's loader, rewritten to load only from /opt/planrun/runtime (runtime_collect.sh). It
runs on any Linux image: without python, bash, or even a libc (busybox alone).

A derived image (`planrun-derived:<tag>`) is the user's image with that runtime copied in,
its sandbox mount points made, its setuid bits cleared and planrun's user named
(image_setup.py, run by the runtime's python), its entrypoint cleared. Its tag is a hash
of the base image's id and of planrun's inputs, so it is built once and rebuilt only
when either changes. The container options do not change: a derived image is run exactly
as planrun's own.
"""

from __future__ import annotations

import hashlib
import json
import shutil
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import docker.errors

from sandbox_runner import __version__
from sandbox_runner.errors import ImageError, ImageMissingError
from sandbox_runner.sandbox import image as planrun_image
from sandbox_runner.sandbox.image import Progress

RUNTIME_REPOSITORY = "planrun-runtime"
DERIVED_REPOSITORY = "planrun-derived"
RUNTIME_DIR = "/opt/planrun/runtime"
RUNTIME_PYTHON = f"{RUNTIME_DIR}/bin/python3"
"""The tool server's interpreter in a derived image."""
COLLECT_SCRIPT = "runtime_collect.sh"
SETUP_SCRIPT = "image_setup.py"
IMAGE_ENV_NAME = "image-env.json"
RUNTIME_DOCKERFILE = """\
FROM {sandbox}
USER 0:0
COPY . /opt/planrun-build/
RUN ["/bin/bash", "/opt/planrun-build/runtime_collect.sh", "{runtime_dir}"{debs}]
"""
DERIVED_DOCKERFILE = """\
FROM {base}
USER 0:0
COPY --from={runtime} {runtime_dir} {runtime_dir}
COPY image_setup.py image-env.json /opt/planrun/
RUN ["{python}", "-I", "-S", "/opt/planrun/image_setup.py"]
ENTRYPOINT []
CMD []
USER 10001:10001
WORKDIR /workspace
"""


def _quiet(_: str) -> None:
    pass


def _input(name: str) -> bytes:
    return Path(__file__).with_name(name).read_bytes()


def _digest(*parts: bytes) -> str:
    hasher = hashlib.sha256()
    for part in parts:
        hasher.update(len(part).to_bytes(8, "big") + part)
    return hasher.hexdigest()[:12]


def runtime_tag() -> str:
    """The runtime's tag: a hash of planrun's sandbox image tag and of the collect script."""
    digest = _digest(planrun_image.image_tag().encode(), _input(COLLECT_SCRIPT))
    return f"{RUNTIME_REPOSITORY}:{digest}"


def derived_tag(base_id: str) -> str:
    """The derived image's tag: a hash of its base image's id and of planrun's inputs."""
    recipe = (base_id, runtime_tag(), DERIVED_DOCKERFILE)
    digest = _digest(*(part.encode() for part in recipe), _input(SETUP_SCRIPT))
    return f"{DERIVED_REPOSITORY}:{digest}"


@dataclass(frozen=True)
class DerivedStatus:
    """What `planrun image status` says of a configured image."""

    image: str
    """The user's image, as configured."""
    base_id: str | None
    """Its id; None when it is not present."""
    tag: str | None
    """The derived image's tag; None when the base is not there to compute it."""
    built: bool


def _get(client: Any, tag: str) -> Any | None:
    try:
        return client.images.get(tag)
    except docker.errors.ImageNotFound:
        return None
    except docker.errors.APIError as error:  # an invalid reference
        raise ImageError(f"image {tag!r}: {_reason(error)}") from None


def image_present(client: Any, tag: str) -> bool:
    """Whether the engine has TAG."""
    return _get(client, tag) is not None


def base_image_id(client: Any, image: str, configured_in: str) -> str:
    """The id of the user's image; ImageMissingError (saying where it was set) if absent."""
    found = _get(client, image)
    if found is None:
        raise ImageMissingError(image, configured_in)
    return str(found.id)


def status(client: Any, image: str) -> DerivedStatus:
    """Whether IMAGE and the image derived from it are present."""
    found = _get(client, image)
    if found is None:
        return DerivedStatus(image, None, None, False)
    tag = derived_tag(str(found.id))
    return DerivedStatus(image, str(found.id), tag, _get(client, tag) is not None)


def derive(
    client: Any,
    image: str,
    configured_in: str,
    progress: Progress = _quiet,
    *,
    force: bool = False,
) -> str:
    """The derived image of IMAGE, built first when it is missing (or when FORCE).

    Builds planrun's own image and the runtime as well, the first time. No step reaches
    the network, but for installing patchelf when the host cannot download it.

    Raises:
        ImageMissingError: IMAGE is not present.
        ImageError: a build failed (the message has docker's reason).
    """
    base_id = base_image_id(client, image, configured_in)
    tag = derived_tag(base_id)
    if not force and _get(client, tag) is not None:
        return tag
    runtime = build_runtime(client, progress)
    progress(f"deriving {tag} from {image}: adding planrun's runtime (once for this image)")
    with tempfile.TemporaryDirectory(prefix="planrun-derive-") as context:
        Path(context, SETUP_SCRIPT).write_bytes(_input(SETUP_SCRIPT))
        # The tool server hands the base's ENV to commands (toolserver/processes.py).
        config = client.images.get(base_id).attrs.get("Config") or {}
        Path(context, IMAGE_ENV_NAME).write_text(json.dumps(config.get("Env") or []))
        if config.get("Volumes"):
            volumes = ", ".join(sorted(config["Volumes"]))
            progress(f"warning: {image} declares volumes ({volumes}): each sandbox gets them "
                     "as writable anonymous volumes; prefer an image without VOLUME")  # fmt: skip
        dockerfile = DERIVED_DOCKERFILE.format(
            base=base_id,
            runtime=runtime,
            runtime_dir=RUNTIME_DIR,
            python=RUNTIME_PYTHON,
        )
        Path(context, "Dockerfile").write_text(dockerfile)
        labels = {"io.planrun.image": "derived", "io.planrun.base": image}
        docker_build(client, context, tag, progress, labels=labels)
    progress(f"built {tag}")
    return tag


def build_runtime(client: Any, progress: Progress = _quiet) -> str:
    """planrun's runtime image, built (from planrun's sandbox image) unless present."""
    tag = runtime_tag()
    if _get(client, tag) is not None:
        return tag
    sandbox = planrun_image.build(client, progress)
    progress(f"building planrun's runtime {tag} from {sandbox}")
    with tempfile.TemporaryDirectory(prefix="planrun-runtime-") as context:
        Path(context, COLLECT_SCRIPT).write_bytes(_input(COLLECT_SCRIPT))
        debs = _download_patchelf(context, progress)
        arguments = "".join(f', "/opt/planrun-build/{name}"' for name in debs)
        dockerfile = RUNTIME_DOCKERFILE.format(
            sandbox=sandbox, runtime_dir=RUNTIME_DIR, debs=arguments
        )
        Path(context, "Dockerfile").write_text(dockerfile)
        # patchelf comes from the host's apt when it can download it; else from the image's.
        docker_build(
            client, context, tag, progress, labels={"io.planrun.image": "runtime"}, network=not debs
        )
    return tag


def _download_patchelf(context: str, progress: Progress) -> list[str]:
    if shutil.which("apt-get") is None:
        return []
    done = subprocess.run(
        ["apt-get", "download", "patchelf"], cwd=context, capture_output=True, text=True
    )
    if done.returncode != 0:
        progress("cannot download patchelf on the host; the build installs it with apt")
        return []
    return sorted(path.name for path in Path(context).glob("patchelf_*.deb"))


def docker_build(
    client: Any,
    context: str,
    tag: str,
    progress: Progress,
    *,
    labels: dict[str, str],
    dockerfile: str = "Dockerfile",
    buildargs: dict[str, str] | None = None,
    network: bool = False,
    what: str = "docker build",
) -> None:
    """Build CONTEXT as TAG, saying each step; no network unless NETWORK.

    Raises:
        ImageError: the build failed, with docker's reason (and that it had no network).
    """
    stream = client.api.build(
        path=context,
        dockerfile=dockerfile,
        buildargs=buildargs or {},
        tag=tag,
        labels={**labels, "io.planrun.image-version": __version__},
        network_mode="default" if network else "none",
        rm=True,
        forcerm=True,
        decode=True,
    )
    try:
        for chunk in stream:
            if "error" in chunk:
                reason = " ".join(str(chunk["error"]).split())[:300]
                offline = "" if network else " (the build runs without network)"
                raise ImageError(f"{what} failed{offline}: {reason}")
            text = str(chunk.get("stream", "")).strip()
            if text.startswith("Step "):
                progress(text if len(text) <= 100 else text[:97] + "...")
    except docker.errors.APIError as error:
        raise ImageError(f"{what} failed: {_reason(error)}") from None


def _reason(error: docker.errors.APIError) -> str:
    return str(getattr(error, "explanation", "") or error).splitlines()[0][:200]
