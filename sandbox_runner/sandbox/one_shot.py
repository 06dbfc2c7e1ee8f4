"""One-shot use of a sandbox: run a single command with a plan subagent's mounts and limits."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from sandbox_runner.errors import ConfigError
from sandbox_runner.limits import TOOL_TIMEOUT_SECONDS, Limits
from sandbox_runner.sandbox.docker_provider import DockerProvider
from sandbox_runner.sandbox.host_paths import prepare_plan_dir, resolve_workspace
from sandbox_runner.sandbox.image import image_tag, require_image
from sandbox_runner.sandbox.spec import DEFAULT_PYTHON, SandboxSpec
from sandbox_runner.types import ExecResult, ToolRequest


def build_spec(
    docker_client: Any,
    *,
    repo: str | Path,
    plan_dir: Path,
    extra_dirs: tuple[Path, ...] = (),
    limits: Mapping[str, Any] | None = None,
    session: str = "adhoc",
    agent: str = "sandbox",
    image: str | None = None,
    progress: Callable[[str], None] = lambda _line: None,
) -> SandboxSpec:
    """Check the paths and the image, and describe the sandbox to start: on planrun's
    image, or on the one derived from IMAGE (built first when missing)."""
    workspace = resolve_workspace(repo)
    extras = tuple(resolve_workspace(directory) for directory in extra_dirs)
    python = DEFAULT_PYTHON
    if image is None:
        image = require_image(docker_client, image_tag())
    else:
        from sandbox_runner.sandbox.derived_image import RUNTIME_PYTHON, derive

        image, python = derive(docker_client, image, "flag --image", progress), RUNTIME_PYTHON
    try:
        resolved_limits = Limits(**(limits or {}))
    except ValueError as error:
        raise ConfigError(str(error)) from None
    return SandboxSpec.plan(
        workspace,
        prepare_plan_dir(plan_dir, workspace),
        image,
        extras,
        resolved_limits,
        session=session,
        agent=agent,
        python=python,
    )


def run_command(
    provider: DockerProvider,
    *,
    repo: str | Path,
    plan_dir: Path,
    command: str,
    timeout: float = TOOL_TIMEOUT_SECONDS,
    extra_dirs: tuple[Path, ...] = (),
    limits: Mapping[str, Any] | None = None,
    image: str | None = None,
    progress: Callable[[str], None] = lambda _line: None,
) -> ExecResult:
    """Run one shell command in a fresh plan sandbox and remove the sandbox afterwards."""
    spec = build_spec(
        provider.docker_client,
        repo=repo,
        plan_dir=plan_dir,
        extra_dirs=extra_dirs,
        limits=limits,
        image=image,
        progress=progress,
    )
    with provider.create(spec) as sandbox:
        return sandbox.call(ToolRequest("bash", {"command": command}, timeout=timeout))
