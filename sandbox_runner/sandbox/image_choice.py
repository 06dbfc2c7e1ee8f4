"""Which image a workspace's sandboxes run: planrun's own, or one derived from the user's
(the `image` setting, or a trusted repository's devcontainer.json)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from sandbox_runner.config import DEFAULT_SOURCE, LoadedSettings
from sandbox_runner.sandbox.spec import DEFAULT_PYTHON

# Sources of the image setting that beat a devcontainer.json: the user said so for this
# very command.
EXPLICIT_SOURCES = ("environment variable", "flag")


@dataclass(frozen=True)
class ImageChoice:
    """The configured image, where it was set, and whether a devcontainer.json may choose."""

    image: str | None
    """The user's image; None: planrun's own (unless a devcontainer.json names one)."""
    configured_in: str
    """The setting's source, for messages."""
    devcontainer: bool
    """Whether the repository's devcontainer.json is read: only when trusted, and only
    when the image was not chosen by the environment, a flag or the project's config."""

    @classmethod
    def of(cls, loaded: LoadedSettings, workspace: Path) -> ImageChoice:
        """The choice LOADED makes for WORKSPACE."""
        source = loaded.sources["image"]
        explicit = source.startswith(EXPLICIT_SOURCES) or (
            source != DEFAULT_SOURCE and Path(source).is_relative_to(workspace)
        )
        return cls(loaded.settings.image, source, loaded.project_trusted and not explicit)


def sandbox_image(
    client: Any, workspace: Path, choice: ImageChoice, progress: Callable[[str], None]
) -> tuple[str, str]:
    """The image to run and the tool server's interpreter in it, building what is missing
    of a derived image (once per base image).

    Raises:
        ImageMissingError: planrun's image or the user's is not there.
        ImageError: a build failed; ConfigError: a bad devcontainer.json.
    """
    from sandbox_runner.sandbox.derived_image import RUNTIME_PYTHON, derive
    from sandbox_runner.sandbox.image import require_image

    image, configured_in = choice.image, choice.configured_in
    if choice.devcontainer:
        from sandbox_runner.sandbox.devcontainer import devcontainer_image, find_devcontainer

        found = find_devcontainer(workspace)
        if found is not None:
            image, configured_in = devcontainer_image(client, found, progress), str(found.path)
    if image is None:
        return require_image(client), DEFAULT_PYTHON
    return derive(client, image, configured_in, progress), RUNTIME_PYTHON


def configured_image(workspace: Path, choice: ImageChoice) -> tuple[str | None, str]:
    """The user's image CHOICE names and where, without building anything: a trusted
    devcontainer.json's image, or the tag its Dockerfile builds to (ConfigError if bad)."""
    if choice.devcontainer:
        from sandbox_runner.sandbox.devcontainer import find_devcontainer

        found = find_devcontainer(workspace)
        if found is not None:
            return found.image or found.tag(), str(found.path)
    return choice.image, choice.configured_in
