"""The sandbox image's identity: a hash of its inputs, shipped as package data."""

from __future__ import annotations

import pytest

from sandbox_runner.sandbox import image


def test_inputs_ship_with_the_package() -> None:
    inputs = image.image_inputs()
    assert set(inputs) >= {"Dockerfile", "packages.txt"}
    dockerfile = inputs["Dockerfile"].decode()
    assert "USER 10001:10001" in dockerfile
    assert "apt-get install" in dockerfile and " sudo" not in dockerfile.split("RUN", 1)[1]


def test_the_base_packages_are_the_required_tools() -> None:
    assert image.base_packages() == [
        "python3",
        "git",
        "ripgrep",
        "universal-ctags",
        "ca-certificates",
    ]


def test_tags_follow_the_inputs(monkeypatch: pytest.MonkeyPatch) -> None:
    original = image.image_inputs()
    tag = image.image_tag()
    assert tag.startswith("planrun-sandbox:") and len(tag.split(":")[1]) == 12
    assert image.image_tag() == tag
    changed = dict(original, Dockerfile=original["Dockerfile"] + b"\n# changed\n")
    monkeypatch.setattr(image, "image_inputs", lambda: changed)
    assert image.image_tag() != tag
    assert image.base_tag() == image.base_tag()
    more_packages = dict(original, **{"packages.txt": original["packages.txt"] + b"curl\n"})
    monkeypatch.setattr(image, "image_inputs", lambda: more_packages)
    assert image.base_packages()[-1] == "curl"
