"""A trusted repository's `.devcontainer/devcontainer.json`: the image it names, or the
image its Dockerfile builds (without network).

devcontainer.json is JSON with comments and trailing commas (JSONC); read_jsonc reads it.
Only `image` and `build` (`dockerfile`, `context`, `args`) are used: planrun runs its own
hardened container, so mounts, ports, features and commands do not apply.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from sandbox_runner.errors import ConfigError
from sandbox_runner.safe_io import UnsafeFileError, read_beneath, read_untrusted_bytes
from sandbox_runner.sandbox.dockerfile_check import dockerfile_problem
from sandbox_runner.sandbox.image import Progress
from sandbox_runner.tree_walk import walk

DEVCONTAINER_FILES = (".devcontainer/devcontainer.json", ".devcontainer.json")
MAX_DEVCONTAINER_BYTES = 256 * 1024
MAX_DOCKERFILE_BYTES = 1024 * 1024
DEVCONTAINER_REPOSITORY = "planrun-devcontainer"


def strip_jsonc(text: str) -> str:
    """TEXT without its comments (// and /* */) and trailing commas, strings untouched."""
    return _without_trailing_commas(_without_comments(text))


def _string_end(text: str, start: int) -> int:
    index = start + 1
    while index < len(text) and text[index] != '"':
        index += 2 if text[index] == "\\" else 1
    return index + 1


def _without_comments(text: str) -> str:
    out: list[str] = []
    index = 0
    while index < len(text):
        if text[index] == '"':
            end = _string_end(text, index)
            out.append(text[index:end])
            index = end
        elif text.startswith("//", index):
            newline = text.find("\n", index)
            index = len(text) if newline < 0 else newline
        elif text.startswith("/*", index):
            close = text.find("*/", index + 2)
            if close < 0:
                raise ValueError("a /* comment is never closed")
            out.append(" ")
            index = close + 2
        else:
            out.append(text[index])
            index += 1
    return "".join(out)


def _without_trailing_commas(text: str) -> str:
    out: list[str] = []
    index = 0
    while index < len(text):
        if text[index] == '"':
            end = _string_end(text, index)
            out.append(text[index:end])
            index = end
            continue
        if text[index] == "," and text[index + 1 :].lstrip()[:1] in ("}", "]"):
            index += 1
            continue
        out.append(text[index])
        index += 1
    return "".join(out)


def read_jsonc(text: str) -> Any:
    """Parse JSON with comments and trailing commas.

    Raises:
        ValueError: the text is not JSONC (json.JSONDecodeError for the JSON part).
    """
    return json.loads(strip_jsonc(text))


@dataclass(frozen=True)
class Devcontainer:
    """What planrun takes from a devcontainer.json."""

    path: Path
    """The devcontainer.json file."""
    image: str | None = None
    """The image it names (`image`)."""
    dockerfile: Path | None = None
    """The Dockerfile it builds (`build.dockerfile`), inside the repository."""
    context: Path | None = None
    """The build context (`build.context`, default: the file's directory)."""
    args: dict[str, str] = field(default_factory=dict)
    """Build arguments (`build.args`)."""

    def tag(self) -> str:
        """The tag of the image the Dockerfile builds: a hash of its recipe and of its
        context's files (names, sizes, times), so an image built from other files (a pull
        request's) is never taken for this one."""
        assert self.context is not None
        recipe = [self.dockerfile_bytes(), str(self.context).encode()]
        recipe += [f"{key}={value}".encode() for key, value in sorted(self.args.items())]
        recipe += _context_listing(self.context)
        digest = hashlib.sha256(b"\0".join(recipe)).hexdigest()[:12]
        return f"{DEVCONTAINER_REPOSITORY}:{digest}"

    def dockerfile_bytes(self) -> bytes:
        """The Dockerfile's content (ConfigError when it is not a regular file of at most
        MAX_DOCKERFILE_BYTES: a FIFO there must not hang planrun)."""
        assert self.dockerfile is not None
        try:
            content = read_untrusted_bytes(self.dockerfile, MAX_DOCKERFILE_BYTES)
        except UnsafeFileError as error:
            raise ConfigError(f"{self.path}: build.dockerfile: {error}") from None
        if content is None:
            raise ConfigError(f"{self.path}: build.dockerfile {self.dockerfile} does not exist")
        return content


def _context_listing(context: Path) -> list[bytes]:
    """Each entry of the build context, links not followed: its path, mode, size and
    modification time (a checkout rewrites the times of the files it changes)."""
    listing = []
    for directory in walk(context):
        for entry in directory.entries:
            info = entry.stat(follow_symlinks=False)
            relative = directory.relative_of(entry)
            listing.append(f"{relative}\0{info.st_mode}\0{info.st_size}\0{info.st_mtime_ns}")
    return [entry.encode("utf-8", "surrogateescape") for entry in listing]


def find_devcontainer(root: Path) -> Devcontainer | None:
    """The repository's devcontainer.json, if it names an image or a Dockerfile.

    Raises:
        ConfigError: the file cannot be read or parsed, or names a path outside the
            repository, in one line naming the file.
    """
    for relative in DEVCONTAINER_FILES:
        path = root / relative
        try:
            raw = read_beneath(root, path, MAX_DEVCONTAINER_BYTES)
        except UnsafeFileError as error:
            raise ConfigError(f"{path}: cannot read it: {error}") from None
        if raw is None:
            continue
        try:
            data = read_jsonc(raw.decode("utf-8"))
        except (ValueError, UnicodeDecodeError) as error:
            raise ConfigError(f"{path}: not valid JSON with comments: {error}") from None
        if not isinstance(data, dict):
            raise ConfigError(f"{path}: the top level must be an object")
        return _devcontainer(root, path, data)
    return None


def _devcontainer(root: Path, path: Path, data: dict[str, Any]) -> Devcontainer | None:
    image, build = data.get("image"), data.get("build")
    if isinstance(image, str) and image.strip():
        return Devcontainer(path, image=image.strip())
    if not isinstance(build, dict) or not isinstance(build.get("dockerfile"), str):
        return None
    context = _inside(root, path.parent / str(build.get("context") or "."), path, "build.context")
    dockerfile = _inside(root, path.parent / build["dockerfile"], path, "build.dockerfile")
    if not dockerfile.is_relative_to(context):
        raise ConfigError(f"{path}: build.dockerfile must lie inside build.context")
    raw_args = build.get("args") or {}
    args = (
        {str(key): str(value) for key, value in raw_args.items()}
        if isinstance(raw_args, dict)
        else {}
    )
    return Devcontainer(path, dockerfile=dockerfile, context=context, args=args)


def _inside(root: Path, candidate: Path, path: Path, key: str) -> Path:
    resolved = candidate.resolve()
    if not resolved.is_relative_to(root.resolve()):
        raise ConfigError(f"{path}: {key} leads outside the repository ({resolved})")
    return resolved


def devcontainer_image(client: Any, found: Devcontainer, progress: Progress) -> str:
    """The image FOUND names, or the one its Dockerfile builds (built once, no network).

    Raises:
        ConfigError: the Dockerfile would make the daemon reach the network (ADD, ONBUILD,
            a base image to pull).
        ImageError: the build failed (the message says it ran without network).
    """
    if found.image is not None:
        return found.image
    from sandbox_runner.sandbox.derived_image import docker_build, image_present

    tag = found.tag()
    if image_present(client, tag):
        return tag
    assert found.dockerfile is not None and found.context is not None
    problem = dockerfile_problem(
        found.dockerfile_bytes().decode(errors="replace"), lambda name: image_present(client, name)
    )
    if problem:
        raise ConfigError(f"{found.dockerfile}: cannot build it without network: {problem}")
    progress(f"building {found.dockerfile} as {tag} (without network)")
    docker_build(
        client,
        str(found.context),
        tag,
        progress,
        labels={"io.planrun.image": "devcontainer"},
        dockerfile=str(found.dockerfile.relative_to(found.context)),
        buildargs=found.args,
        what=f"the build of {found.dockerfile}",
    )
    return tag
