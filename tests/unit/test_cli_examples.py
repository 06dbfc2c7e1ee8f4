"""Every command's --help ends with examples, and every example is a command line that
works: its arguments pass click's checks and reach the command it is an example of."""

from __future__ import annotations

import shlex
from collections.abc import Iterator

import click
import pytest
from click.testing import CliRunner

from sandbox_runner.cli import cli


def walk(command: click.Command, path: str) -> Iterator[tuple[str, click.Command]]:
    """The command and every command under it, by their paths."""
    yield path, command
    if isinstance(command, click.Group):
        context = click.Context(command, info_name=path)
        for name in command.list_commands(context):
            found = command.get_command(context, name)
            assert found is not None, f"{path} lists {name} but has no such command"
            yield from walk(found, f"{path} {name}")


COMMANDS = dict(walk(cli, "planrun"))


def examples_of(command: click.Command) -> list[str]:
    lines = (command.epilog or "").splitlines()
    if "Examples:" not in lines:
        return []
    return [line.strip() for line in lines[lines.index("Examples:") + 1 :]]


EXAMPLES = [(path, line) for path, command in COMMANDS.items() for line in examples_of(command)]


def test_the_walk_finds_every_command() -> None:
    assert len(COMMANDS) > 20
    assert {"planrun", "planrun plan", "planrun batch run", "planrun plans resume"} <= set(COMMANDS)


@pytest.mark.parametrize("path", sorted(COMMANDS))
def test_help_ends_with_examples(path: str) -> None:
    examples = examples_of(COMMANDS[path])
    assert examples, f"`{path} --help` shows no examples"
    output = CliRunner().invoke(cli, [*path.split()[1:], "--help"], terminal_width=80).output
    shown = output[output.index("Examples:") :].splitlines()[1:]
    assert [line.strip() for line in shown] == examples, output


@pytest.mark.parametrize(("path", "example"), EXAMPLES)
def test_each_example_parses_and_reaches_its_command(
    path: str, example: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    reached: list[str] = []

    def record(*args: object, **kwargs: object) -> None:
        reached.append(click.get_current_context().command_path)

    # Nothing runs: each command only says it was reached, once click checked the arguments.
    for command in COMMANDS.values():
        monkeypatch.setattr(command, "callback", record)
    program, *args = shlex.split(example)
    assert program == "planrun"
    cli.main(args, prog_name="planrun", standalone_mode=False)
    assert reached, example
    is_group = isinstance(COMMANDS[path], click.Group)
    assert reached[-1] == path or (is_group and reached[-1].startswith(f"{path} ")), reached
