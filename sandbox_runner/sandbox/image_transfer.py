"""The sandbox image as bytes, for engines that share no registry: `docker save` on one side;
on the other, the bytes checked against their digest and manifest, loaded, and the ID verified."""

from __future__ import annotations

import hashlib
import io
import json
import posixpath
import tarfile
from dataclasses import dataclass
from typing import Any

import docker.errors

from sandbox_runner.errors import ImageError


@dataclass(frozen=True)
class SavedImage:
    """One image as `docker save` wrote it, with what the receiver must find in it."""

    tag: str
    image_id: str
    """The full ID (`sha256:...`): the loaded image must have exactly this one."""
    data: bytes
    digest: str
    """sha256 of data, checked before anything is loaded."""

    @property
    def size_mb(self) -> float:
        return round(len(self.data) / 1e6, 1)


def image_id(client: Any, tag: str) -> str | None:
    """The full ID of the image under tag on this engine, or None when it has none."""
    try:
        return str(client.images.get(tag).id)
    except docker.errors.ImageNotFound:
        return None


def save_image(client: Any, tag: str) -> SavedImage:
    """The image under tag as a `docker save` archive that names only that tag.

    Raises:
        ImageError: the engine has no image under tag, or cannot save it.
    """
    try:
        image = client.images.get(tag)
        data = b"".join(image.save(named=tag))
    except docker.errors.DockerException as error:
        raise ImageError(f"cannot save {tag}: {error}") from None
    return SavedImage(tag, str(image.id), data, hashlib.sha256(data).hexdigest())


def load_image(client: Any, data: bytes, *, tag: str, expected_id: str, digest: str) -> None:
    """Load a saved image after checking it is the one expected, then check what loaded.

    Raises:
        ImageError: the bytes or their manifest are not what was expected, the engine
            refused them, or tag does not name expected_id afterwards.
    """
    if hashlib.sha256(data).hexdigest() != digest:
        raise ImageError("the shipped image does not match its digest")
    check_archive(data, tag, expected_id)
    try:
        client.images.load(data)
    except docker.errors.DockerException as error:
        raise ImageError(f"docker load of {tag} failed: {error}") from None
    loaded = image_id(client, tag)
    if loaded != expected_id:
        raise ImageError(f"after loading, {tag} is {loaded}, not the expected {expected_id}")


def check_archive(data: bytes, tag: str, expected_id: str) -> None:
    """Refuse an archive that holds anything but one image, expected_id, tagged tag only
    (a `docker load` would otherwise retag whatever the archive names).

    Raises:
        ImageError: no readable manifest, or one that names other images or tags.
    """
    try:
        with tarfile.open(fileobj=io.BytesIO(data), mode="r:") as archive:
            members = _unique_members(archive)
            manifest = json.loads(_member_bytes(archive, members, "manifest.json"))
            entry = manifest[0] if isinstance(manifest, list) and manifest else {}
            config_name = str(entry.get("Config", "")) if isinstance(entry, dict) else ""
            config = _member_bytes(archive, members, config_name) if config_name else b""
    except (tarfile.TarError, KeyError, ValueError, AttributeError) as error:
        raise ImageError(f"the shipped image has no readable manifest: {error}") from None
    if not isinstance(manifest, list) or len(manifest) != 1 or not isinstance(manifest[0], dict):
        raise ImageError("the shipped image must hold exactly one image")
    entry = manifest[0]
    if entry.get("RepoTags") != [tag]:
        raise ImageError(f"the shipped image is tagged {entry.get('RepoTags')}, not [{tag!r}]")
    # An image's ID is the digest of its config: what the file holds, not what it is called.
    found = "sha256:" + hashlib.sha256(config).hexdigest()
    if found != expected_id:
        raise ImageError(f"the shipped image is {found}, not the expected {expected_id}")


def _unique_members(archive: tarfile.TarFile) -> dict[str, tarfile.TarInfo]:
    """The archive's members by the name `docker load` writes them to; a name twice is
    refused (Python would read the first, `docker load` the last)."""
    members: dict[str, tarfile.TarInfo] = {}
    for member in archive.getmembers():
        name = _as_loaded(member.name)
        if name in members:
            raise ValueError(f"{name} appears twice in the archive")
        members[name] = member
    return members


def _member_bytes(
    archive: tarfile.TarFile, members: dict[str, tarfile.TarInfo], name: str
) -> bytes:
    member = members[_as_loaded(name)]
    handle = archive.extractfile(member) if member.isfile() else None
    if handle is None:
        raise ValueError(f"{name} is not a file in the archive")
    return handle.read()


def _as_loaded(name: str) -> str:
    """Where `docker load` extracts a member: its name cleaned, under the archive's root
    (`./manifest.json`, `/manifest.json` and `x/../manifest.json` are all `manifest.json`)."""
    return posixpath.normpath("/" + name).lstrip("/")
