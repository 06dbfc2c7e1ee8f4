"""The user's image: devcontainer.json (JSON with comments), which image a workspace's
sandboxes run, the derived tag, and what commands inherit from the image."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from sandbox_runner.config import load_settings
from sandbox_runner.errors import ConfigError
from sandbox_runner.sandbox.derived_image import derived_tag
from sandbox_runner.sandbox.devcontainer import find_devcontainer, read_jsonc
from sandbox_runner.sandbox.image_choice import ImageChoice, configured_image
from sandbox_runner.sandbox.toolserver import processes

JSONC = """// The team's container
{
  "name": "app", /* a block
  comment */
  "image": "team/node:22", // trailing comment
  "url": "http://example.com/*not-a-comment*/",
  "quote": "a \\" ,} inside",
  "list": [1, 2,],
}
"""


def test_jsonc_comments_and_trailing_commas_are_read_and_strings_kept() -> None:
    assert read_jsonc(JSONC) == {
        "name": "app",
        "image": "team/node:22",
        "url": "http://example.com/*not-a-comment*/",
        "quote": 'a " ,} inside',
        "list": [1, 2],
    }
    with pytest.raises(ValueError):
        read_jsonc('{"a": 1 /* never closed')


def test_a_devcontainer_names_an_image_or_a_dockerfile_inside_the_repository(
    tmp_path: Path,
) -> None:
    folder = tmp_path / ".devcontainer"
    folder.mkdir()
    (folder / "devcontainer.json").write_text(JSONC)
    found = find_devcontainer(tmp_path)
    assert found is not None and found.image == "team/node:22"
    (folder / "Dockerfile").write_text("FROM scratch\n")
    (folder / "devcontainer.json").write_text(
        '{"build": {"dockerfile": "Dockerfile", "context": "..", "args": {"V": 1},},}'
    )
    found = find_devcontainer(tmp_path)
    assert found is not None and found.image is None
    assert found.context == tmp_path.resolve() and found.args == {"V": "1"}
    assert found.tag() == found.tag() and found.tag().startswith("planrun-devcontainer:")
    (folder / "devcontainer.json").write_text('{"build": {"dockerfile": "../../Dockerfile"}}')
    with pytest.raises(ConfigError, match=r"build\.dockerfile leads outside the repository"):
        find_devcontainer(tmp_path)


def test_a_devcontainer_is_read_only_for_a_trusted_repository(
    tmp_path: Path, planrun_home: Path
) -> None:
    repo = tmp_path / "repo"
    (repo / ".devcontainer").mkdir(parents=True)
    (repo / ".devcontainer/devcontainer.json").write_text('{"image": "team/node:22"}')
    (planrun_home / "config.yaml").write_text("image: mine:1\n")
    untrusted = ImageChoice.of(load_settings(repo), repo)
    assert not untrusted.devcontainer
    assert configured_image(repo, untrusted)[0] == "mine:1"
    (planrun_home / "config.yaml").write_text(f"image: mine:1\ntrusted_projects: [{repo}]\n")
    trusted = ImageChoice.of(load_settings(repo), repo)
    assert configured_image(repo, trusted) == (
        "team/node:22",
        str(repo / ".devcontainer/devcontainer.json"),
    )
    # The user's flag, for this very command, beats the repository's file.
    flagged = ImageChoice.of(load_settings(repo, flags={"image": "other:2"}), repo)
    assert configured_image(repo, flagged) == ("other:2", "flag --image")


def test_the_derived_tag_follows_the_base_image() -> None:
    assert derived_tag("sha256:aaa") == derived_tag("sha256:aaa")
    assert derived_tag("sha256:aaa") != derived_tag("sha256:bbb")
    assert derived_tag("sha256:aaa").startswith("planrun-derived:")


def test_commands_inherit_the_image_s_env_but_not_git_s_or_a_preload(tmp_path: Path) -> None:
    declared = [
        "PATH=/usr/local/go/bin:/usr/bin:/bin",
        "GOFLAGS=-mod=mod",
        "GIT_DIR=/elsewhere",
        "BASH_ENV=/etc/evil",
        "LD_PRELOAD=/lib/x.so",
        "not-a-variable",
    ]
    (tmp_path / "env.json").write_text(json.dumps(declared))
    env = processes.image_env(str(tmp_path / "env.json"))
    assert env == {"PATH": "/usr/local/go/bin:/usr/bin:/bin", "GOFLAGS": "-mod=mod"}
    assert processes.image_env(str(tmp_path / "missing.json")) == {}
    runtime = tmp_path / "runtime"
    runtime.mkdir()
    assert processes.command_search_path(env, str(runtime)) == (
        f"/usr/local/go/bin:/usr/bin:/bin:{runtime}"
    )
    assert processes.command_search_path({}, str(tmp_path / "none")) == processes.COMMAND_PATH


def test_no_command_is_looked_up_in_the_repository_or_a_writable_place(tmp_path: Path) -> None:
    image = {"PATH": ".::/workspace/node_modules/.bin:/tmp/bin:/ro/x:/usr/local/bin:/bin"}
    assert processes.command_search_path(image, str(tmp_path / "none")) == "/usr/local/bin:/bin"
    only_bad = {"PATH": "./bin:/workspace"}
    assert processes.command_search_path(only_bad, str(tmp_path / "none")) == (
        processes.COMMAND_PATH
    )
