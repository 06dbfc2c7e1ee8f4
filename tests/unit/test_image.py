"""The sandbox image's identity: a hash of its inputs, shipped as package data."""

from __future__ import annotations

from pathlib import Path

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


class FakeImages:
    """The images part of a Docker client, holding the given tags (outermost edge)."""

    def __init__(self, *tags: str) -> None:
        self.tags = set(tags)

    def get(self, tag: str) -> object:
        import docker

        if tag not in self.tags:
            raise docker.errors.ImageNotFound(tag)
        attrs = {"short_id": "sha256:abc", "id": image_id(tag), "attrs": {"Size": 5_000_000}}
        return type("Image", (), attrs)()


def image_id(tag: str) -> str:
    """The id FakeImages gives TAG."""
    import hashlib

    return "sha256:" + hashlib.sha256(tag.encode()).hexdigest()


class FakeDocker:
    def __init__(self, *tags: str) -> None:
        self.images = FakeImages(*tags)


def test_image_status_looks_at_the_configured_image(planrun_home: Path, tmp_path: Path) -> None:
    from click.testing import CliRunner

    from sandbox_runner.cli import Services, cli
    from sandbox_runner.sandbox.derived_image import derived_tag

    (planrun_home / "config.yaml").write_text("image: my/sandbox:1\n")
    where = planrun_home / "config.yaml"
    repo = ["--repo", str(tmp_path)]
    services = Services(docker=lambda: FakeDocker(image.image_tag()))
    result = CliRunner().invoke(cli, ["image", "status", *repo], obj=services)
    assert result.exit_code == 1
    mine = result.output.splitlines()[2]
    assert mine.startswith(f"your image     my/sandbox:1 (set by {where})  missing: build or pull")
    derived = derived_tag(image_id("my/sandbox:1"))
    present = Services(docker=lambda: FakeDocker(image.image_tag(), "my/sandbox:1"))
    result = CliRunner().invoke(cli, ["image", "status", *repo], obj=present)
    assert result.exit_code == 1
    assert f"derived image  {derived}  not built: `planrun image build` builds it" in result.output
    built = Services(docker=lambda: FakeDocker("my/sandbox:1", derived))
    result = CliRunner().invoke(
        cli, ["image", "status", *repo, "--image", "my/sandbox:1"], obj=built
    )
    assert result.exit_code == 0
    assert "your image     my/sandbox:1 (set by flag --image)  present" in result.output
    assert f"derived image  {derived}  built" in result.output


def test_a_missing_configured_image_is_not_advised_to_be_built() -> None:
    from sandbox_runner.errors import ImageMissingError

    with pytest.raises(ImageMissingError) as caught:
        image.require_image(FakeDocker(), "my/sandbox:1", "/home/me/.planrun/config.yaml")
    message = str(caught.value)
    assert message.startswith("sandbox image my/sandbox:1 (set by /home/me/.planrun/config.yaml)")
    assert "remove the setting" in message
