"""Shipping the sandbox image as bytes: what a node refuses to load, and what it checks after."""

from __future__ import annotations

import hashlib
import io
import json
import tarfile
from typing import Any

import docker.errors
import pytest

from sandbox_runner.errors import ImageError
from sandbox_runner.sandbox.image_transfer import check_archive, load_image

TAG = "planrun-sandbox:0123456789ab"
CONFIG = b'{"architecture": "amd64", "os": "linux"}'
HEX = hashlib.sha256(CONFIG).hexdigest()
IMAGE_ID = "sha256:" + HEX
"""An image's ID is the digest of its config."""


def archive(
    manifest: Any, with_manifest: bool = True, extra: list[tuple[str, bytes]] | None = None
) -> bytes:
    """A `docker save` archive in Docker 20's layout (config, one layer, manifest.json),
    with the config also where the OCI layout keeps it."""
    buffer = io.BytesIO()
    members = [(f"{HEX}.json", CONFIG), (f"blobs/sha256/{HEX}", CONFIG)]
    members.append(("layer/layer.tar", b"layer"))
    if with_manifest:
        members.append(("manifest.json", json.dumps(manifest).encode()))
    with tarfile.open(fileobj=buffer, mode="w") as tar:
        for name, content in [*members, *(extra or [])]:
            info = tarfile.TarInfo(name)
            info.size = len(content)
            tar.addfile(info, io.BytesIO(content))
    return buffer.getvalue()


def entry(tags: list[str] | None = None, config: str = f"{HEX}.json") -> dict[str, Any]:
    return {"Config": config, "RepoTags": [TAG] if tags is None else tags, "Layers": []}


class LoadingImages:
    """The images part of a Docker client: load() tags what it is told to (outermost edge)."""

    def __init__(self, loads_as: str) -> None:
        self.loads_as = loads_as
        self.loaded: list[bytes] = []
        self.tags: dict[str, str] = {}

    def load(self, data: bytes) -> list[object]:
        self.loaded.append(data)
        self.tags[TAG] = self.loads_as
        return []

    def get(self, tag: str) -> object:
        if tag not in self.tags:
            raise docker.errors.ImageNotFound(tag)
        return type("Image", (), {"id": self.tags[tag]})()


class LoadingDocker:
    def __init__(self, loads_as: str = IMAGE_ID) -> None:
        self.images = LoadingImages(loads_as)


def test_the_drivers_own_archive_is_accepted_and_loaded() -> None:
    data = archive([entry()])
    check_archive(data, TAG, IMAGE_ID)
    client = LoadingDocker()
    load_image(client, data, tag=TAG, expected_id=IMAGE_ID, digest=hashlib.sha256(data).hexdigest())
    assert client.images.loaded == [data]


@pytest.mark.parametrize(
    ("manifest", "complaint"),
    [
        ([entry(), entry()], "exactly one image"),
        ([entry([TAG, "debian:bookworm-slim"])], "tagged"),
        ([entry(["planrun-sandbox:other"])], "tagged"),
        ([entry(config="layer/layer.tar")], "not the expected"),
        ({"Config": "x"}, "exactly one image"),
    ],
    ids=["two images", "a second tag", "another tag", "another image", "not a list"],
)
def test_an_archive_that_would_load_or_retag_anything_else_is_refused(
    manifest: Any, complaint: str
) -> None:
    data = archive(manifest)
    client = LoadingDocker()
    with pytest.raises(ImageError, match=complaint):
        load_image(
            client, data, tag=TAG, expected_id=IMAGE_ID, digest=hashlib.sha256(data).hexdigest()
        )
    assert client.images.loaded == []


def test_the_oci_layout_names_its_config_by_digest() -> None:
    check_archive(archive([entry(config=f"blobs/sha256/{HEX}")]), TAG, IMAGE_ID)


def test_a_second_manifest_or_a_config_that_is_not_what_its_name_says_is_refused() -> None:
    # Python would read the first manifest.json, `docker load` the last.
    retagging = [entry(["planrun-sandbox:victim"])]
    twice = archive([entry()], extra=[("./manifest.json", json.dumps(retagging).encode())])
    with pytest.raises(ImageError, match="appears twice"):
        check_archive(twice, TAG, IMAGE_ID)
    other = b'{"architecture": "amd64", "os": "linux", "evil": true}'
    disguised = archive([entry(config=f"x/{HEX}.json")], extra=[(f"x/{HEX}.json", other)])
    with pytest.raises(ImageError, match="not the expected"):
        check_archive(disguised, TAG, IMAGE_ID)


@pytest.mark.parametrize("spelling", ["/manifest.json", "x/../manifest.json", "//manifest.json"])
def test_a_second_manifest_spelled_otherwise_is_refused(spelling: str) -> None:
    # `docker load` cleans each name under its root: these all overwrite manifest.json
    # (checked on Docker 20.10: the retagging manifest won).
    retagging = [entry([TAG, "planrun-sandbox:victim"])]
    twice = archive([entry()], extra=[(spelling, json.dumps(retagging).encode())])
    with pytest.raises(ImageError, match="appears twice"):
        check_archive(twice, TAG, IMAGE_ID)


def test_bytes_that_differ_from_what_the_driver_put_are_never_loaded() -> None:
    data = archive([entry()])
    client = LoadingDocker()
    with pytest.raises(ImageError, match="digest"):
        load_image(client, data + b"x", tag=TAG, expected_id=IMAGE_ID, digest=_sha(data))
    with pytest.raises(ImageError, match="manifest"):
        bare = archive(None, with_manifest=False)
        load_image(client, bare, tag=TAG, expected_id=IMAGE_ID, digest=_sha(bare))
    assert client.images.loaded == []


def test_a_tag_that_names_another_image_after_loading_is_an_error() -> None:
    data = archive([entry()])
    client = LoadingDocker(loads_as="sha256:" + "e" * 64)
    with pytest.raises(ImageError, match="not the expected"):
        load_image(client, data, tag=TAG, expected_id=IMAGE_ID, digest=_sha(data))


def _sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()
