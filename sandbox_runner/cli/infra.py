"""Commands for the machinery: the Docker engine, the sandbox image, and raw sandboxes."""

from __future__ import annotations

import shlex
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING

import click

from sandbox_runner.cli.options import examples, image_option, repo_option
from sandbox_runner.cli.services import reports_errors, services, warn

if TYPE_CHECKING:
    from sandbox_runner.sandbox.image_choice import ImageChoice
from sandbox_runner.limits import TOOL_TIMEOUT_SECONDS

# -- engine and image ---------------------------------------------------------------------


@click.group(
    short_help="Make sure a Docker engine answers.", epilog=examples("planrun engine start")
)
def engine() -> None:
    """The Docker engine planrun runs its sandboxes on."""


@engine.command("start", epilog=examples("planrun engine start"))
@click.pass_context
@reports_errors
def engine_start(ctx: click.Context) -> None:
    """Make sure a Docker engine answers (as root on Debian: install and start dockerd)."""
    from sandbox_runner.sandbox.docker_engine import ensure_engine

    client = ensure_engine(services(ctx).progress)
    version = client.version()
    click.echo(f"Docker engine {version.get('Version', '?')} is ready")


@click.group(
    short_help="Build the sandbox image, or say whether it is there.",
    epilog=examples("planrun image status", "planrun image build"),
)
def image() -> None:
    """The sandbox image."""


@image.command(
    "build",
    epilog=examples(
        "planrun image build", "planrun image build --force", "planrun image build --image node:22"
    ),
)
@click.option("--force", is_flag=True, help="Rebuild even when the image is present.")
@repo_option("The repository whose image settings (and trusted devcontainer.json) apply.")
@image_option()
@click.pass_context
@reports_errors
def image_build(ctx: click.Context, force: bool, repo: str, image: str | None) -> None:
    """Build the sandbox image (offline with mmdebstrap when no registry is reachable);
    with a configured image, the sandbox image derived from it too."""
    from sandbox_runner.sandbox import image as sandbox_image
    from sandbox_runner.sandbox.image_choice import sandbox_image as chosen_image

    svc = services(ctx)
    client = svc.docker()
    tag = sandbox_image.build(client, svc.progress, force=force)
    workspace, choice = _choice(repo, image)
    if choice.image is not None or choice.devcontainer:
        if force:
            from sandbox_runner.sandbox.derived_image import derive
            from sandbox_runner.sandbox.image_choice import configured_image

            user_image, where = configured_image(workspace, choice)
            if user_image is not None:
                derive(client, user_image, where, svc.progress, force=True)
        tag = chosen_image(client, workspace, choice, svc.progress)[0]
    click.echo(tag)


def _choice(repo: str, image: str | None) -> tuple[Path, ImageChoice]:
    from sandbox_runner.config import load_settings
    from sandbox_runner.sandbox.image_choice import ImageChoice

    workspace = Path(repo).expanduser().resolve()
    loaded = load_settings(workspace, flags={"image": image})
    for warning in loaded.warnings:
        warn(warning)
    return workspace, ImageChoice.of(loaded, workspace)


@image.command("status", epilog=examples("planrun image status"))
@repo_option("The repository whose image settings (and trusted devcontainer.json) apply.")
@image_option()
@click.pass_context
@reports_errors
def image_status(ctx: click.Context, repo: str, image: str | None) -> None:
    """Say which images planrun needs and whether they are present: planrun's own, and
    with a configured image, yours and the one derived from it."""
    from sandbox_runner.sandbox import derived_image
    from sandbox_runner.sandbox import image as sandbox_image
    from sandbox_runner.sandbox.image_choice import configured_image

    client = services(ctx).docker()
    workspace, choice = _choice(repo, image)
    user_image, where = configured_image(workspace, choice)
    state = sandbox_image.status(client)
    if state.present:
        click.echo(f"sandbox image  {state.tag}  present ({state.image_id}, {state.size_mb} MB)")
    else:
        click.echo(f"sandbox image  {state.tag}  missing: run `planrun image build`")
    base = "present" if state.base_present else "absent (made by mmdebstrap when needed)"
    click.echo(f"offline base   {state.base_tag}  {base}")
    ready = state.present
    if user_image is not None:
        derived = derived_image.status(client, user_image)
        if derived.base_id is None:
            click.echo(
                f"your image     {user_image} (set by {where})  missing: build or pull it "
                "under that tag, or remove the setting to use planrun's own image"
            )
        else:
            short_id = derived.base_id.removeprefix("sha256:")[:12]
            click.echo(f"your image     {user_image} (set by {where})  present ({short_id})")
            built = "built" if derived.built else "not built: `planrun image build` builds it"
            click.echo(f"derived image  {derived.tag}  {built}")
        ready = derived.built
    if not ready:
        ctx.exit(1)


# -- sandbox ------------------------------------------------------------------------------


@click.group(
    short_help="Run a command in a plan sandbox; remove leftovers.",
    epilog=examples("planrun sandbox run -- ls -la /workspace", "planrun sandbox gc"),
)
def sandbox() -> None:
    """Run commands in a plan sandbox, and clean up leftovers."""


@sandbox.command(
    "run",
    context_settings={"ignore_unknown_options": True},
    epilog=examples(
        "planrun sandbox run -- ls -la /workspace",
        "planrun sandbox run --repo ../api --memory 512 -- git status",
        "planrun sandbox run --image node:22 -- node --version",
    ),
)
@repo_option("Workspace, mounted read-only.")
@click.option(
    "--plan-dir",
    type=click.Path(path_type=Path),
    help="The writable plan directory (default: a new temporary one).",
)
@click.option(
    "--extra-dir",
    "extra_dirs",
    multiple=True,
    type=click.Path(path_type=Path),
    help="Another read-only directory (repeatable).",
)
@click.option(
    "--timeout",
    default=TOOL_TIMEOUT_SECONDS,
    show_default=True,
    help="Seconds before the command is killed.",
)
@click.option("--memory", "memory_mb", type=int, help="Memory limit in MB.")
@click.option("--pids", type=int, help="Process limit.")
@click.option("--cpus", type=float, help="CPU limit in cores.")
@image_option()
@click.argument("command", nargs=-1, required=True, type=click.UNPROCESSED)
@click.pass_context
@reports_errors
def sandbox_run(
    ctx: click.Context,
    repo: str,
    plan_dir: Path | None,
    extra_dirs: tuple[Path, ...],
    timeout: float,
    memory_mb: int | None,
    pids: int | None,
    cpus: float | None,
    image: str | None,
    command: tuple[str, ...],
) -> None:
    """Run COMMAND through a plan sandbox's bash operation, bypassing the tool policy.

    Same mounts and limits as a Plan subagent; prints the output and exits with the
    command's exit code. For debugging and for auditing the operating-system layer.
    """
    from sandbox_runner.sandbox.one_shot import run_command

    limits = {"memory_mb": memory_mb, "pids": pids, "cpus": cpus}
    with tempfile.TemporaryDirectory(prefix="planrun-plan-") as scratch:
        result = run_command(
            services(ctx).provider(),
            repo=repo,
            plan_dir=plan_dir or Path(scratch),
            extra_dirs=extra_dirs,
            command=shlex.join(command) if len(command) > 1 else command[0],
            timeout=timeout,
            limits={key: value for key, value in limits.items() if value is not None},
            image=image,
            progress=services(ctx).progress,
        )
    if result.output:
        click.echo(result.output, nl=not result.output.endswith("\n"))
    if not result.ok:
        raise click.ClickException(result.text)
    ctx.exit(result.exit_code if result.exit_code is not None else 1)


@sandbox.command("gc", epilog=examples("planrun sandbox gc", "planrun sandbox gc --all"))
@click.option(
    "--all", "everything", is_flag=True, help="Also remove containers of running planrun processes."
)
@click.pass_context
@reports_errors
def sandbox_gc(ctx: click.Context, everything: bool) -> None:
    """Remove planrun containers (and scratch volumes) left behind by processes that are
    gone, and the git guard seeds those processes left in planrun's cache."""
    from sandbox_runner.sandbox.docker_provider import collect_garbage
    from sandbox_runner.sandbox.host_walk.shared import prune_seeds

    removed = collect_garbage(services(ctx).docker(), everything=everything)
    seeds = prune_seeds(everything=everything)
    click.echo(
        f"removed {len(removed)} container(s) and volume(s)"
        + (f": {' '.join(removed)}" if removed else "")
        + (f"; {seeds} git guard seed(s)" if seeds else "")
    )
