"""The slash commands of a session, shared by line mode and the terminal."""

from __future__ import annotations

import shlex
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from sandbox_runner.catalog import MODEL_ALIASES, model_id_for
from sandbox_runner.errors import ConfigError, PlanrunError
from sandbox_runner.plans.files import write_new
from sandbox_runner.safe_io import UnsafeFileError, read_untrusted_bytes
from sandbox_runner.session.apply_patches import apply_patches
from sandbox_runner.session.change_commands import session_diff, session_undo, undo_note
from sandbox_runner.session.diffs import DiffLine
from sandbox_runner.session.session import Session
from sandbox_runner.session.status_view import cost_lines, memory_lines, status_lines
from sandbox_runner.session.todos import todo_lines
from sandbox_runner.tools.permissions import PermissionMode

MAX_ATTACH_BYTES = 256 * 1024
INIT_REQUEST = (
    "Please explore this repository and write a CLAUDE.md file at its root for future "
    "agents working in it: what the project is, how it is laid out, how to build, test "
    "and lint it (the exact commands), and the conventions the code follows. Keep it "
    "short and specific to this repository. If a CLAUDE.md exists already, improve it "
    "rather than starting over."
)

COMMANDS: dict[str, str] = {
    "/plan": "enter plan mode (and give it a task): /plan [task]",
    "/exit-plan": "leave plan mode, plan untouched, nothing sent to the agent",
    "/accept": "accept the plan and implement it: /accept [note]",
    "/apply-plan": "accept the plan into a mode: /apply-plan [default|acceptEdits]",
    "/apply-patches": "apply the accepted plan's proposed patches, each edit approved as usual",
    "/reject": "restore the plan file as it was and leave plan mode",
    "/save-plan": "copy the plan into the repository: /save-plan [path] [--force]",
    "/mode": "show or set the mode: /mode [default|acceptEdits|plan]",
    "/model": "show the model, or switch from the next turn: /model [sonnet|opus|haiku|claude-…]",
    "/attach": "attach a file to your next message: /attach PATH",
    "/clear": "start a new conversation (same mode and plan file; the old one stays on disk)",
    "/compact": "summarise the conversation to free the context window",
    "/init": "ask the agent to explore the repository and draft a CLAUDE.md",
    "/todos": "the work agent's checklist, every item",
    "/cost": "tokens and cost so far, per conversation and in all",
    "/status": "session, mode, plan file, memory files, tokens and cost",
    "/memory": "the memory files in use (CLAUDE.md, AGENTS.md, PLANRUN.md) and how to edit them",
    "/mcp": "the MCP servers, whether they run, and their tools (read-only ones marked)",
    "/diff": "what the agent changed in the repository this session: /diff [path]",
    "/undo": "take back the files the agent changed in its last turn: /undo [N turns]",
    "/resume": "the repository's other sessions; /resume ID switches to one (this one is kept)",
    "/help": "this list",
    "/exit": "end the session (its state is kept; planrun --continue comes back)",
    "/quit": "the same as /exit",
    "!": "run a command in the work container, its output added for the agent: !CMD",
}
MODE_NAMES = {mode.value.casefold(): mode for mode in PermissionMode}


@dataclass
class Outcome:
    """What a command printed, and whether the session ends."""

    lines: list[str]
    quit: bool = False
    diff: list[DiffLine] = field(default_factory=list)
    """A diff to show after the lines (in colour where the output has it)."""
    resume: str | None = None
    """The session to switch to once this one ends (`/resume ID`)."""


class Commands:
    """Parses and runs slash commands against a session."""

    def __init__(self, session: Session, extra_dirs: Sequence[Path] = ()) -> None:
        self.session = session
        self.extra_dirs = list(extra_dirs)
        self.attached: list[str] = []
        self._handlers: dict[str, Callable[[list[str]], Outcome]] = {
            "/plan": self._plan,
            "/exit-plan": lambda args: self._done(session.exit_plan, "plan mode left"),
            "/accept": lambda args: self._accept(" ".join(args), None),
            "/apply-plan": self._apply,
            "/apply-patches": lambda args: Outcome(apply_patches(session)),
            "/reject": lambda args: self._done(session.reject, "plan rejected; file restored"),
            "/save-plan": self._save,
            "/mode": self._mode,
            "/attach": self._attach,
            "/compact": lambda args: self._done(session.compact, ""),
            "/model": self._model,
            "/clear": self._clear,
            "/init": self._init,
            "/todos": lambda args: Outcome(todo_lines(session.state.todos)),
            "/cost": lambda args: Outcome(cost_lines(session)),
            "/status": lambda args: Outcome(status_lines(session)),
            "/memory": lambda args: Outcome(memory_lines(session)),
            "/mcp": lambda args: Outcome(
                session.mcp.describe() if session.mcp else ["no MCP servers"]
            ),
            "/diff": self._diff,
            "/undo": self._undo,
            "/help": lambda args: Outcome([f"{name}  {text}" for name, text in COMMANDS.items()]),
            "/exit": lambda args: Outcome([come_back(session)], quit=True),
            "/quit": lambda args: Outcome([come_back(session)], quit=True),
            "/resume": self._resume,
        }

    def run(self, line: str) -> Outcome:
        """Run one command line (it starts with /); a mistake is one line, never a crash."""
        try:
            words = shlex.split(line)
        except ValueError as error:
            return Outcome([f"error: {error}"])
        name, args = words[0], words[1:]
        handler = self._handlers.get(name)
        if handler is None:
            return Outcome([f"error: unknown command {name}; /help lists them"])
        try:
            return handler(args)
        except ConfigError as error:
            return Outcome([f"error: {error}"])
        except OSError as error:
            return Outcome(
                [f"error: {error.strerror or error}: {error.filename or ''}".rstrip(": ")]
            )

    def _resume(self, args: list[str]) -> Outcome:
        from sandbox_runner.session.picker import resume_target

        target, lines = resume_target(self.session.state, " ".join(args))
        if target is None:
            return Outcome(lines)
        return Outcome([*lines, come_back(self.session)], quit=True, resume=target)

    def shell(self, line: str) -> Outcome:
        """`!cmd`: run it in the work container; its output, then how it ended."""
        from sandbox_runner.session.shell import run_shell

        try:
            run = run_shell(self.session, line.removeprefix("!"))
        except PlanrunError as error:
            return Outcome([f"error: {error}"])
        return Outcome([*run.output.rstrip("\n").splitlines(), f"({run.status})"])

    def message(self, text: str) -> str:
        """A user message with the files attached since the last one, and those its
        `@path` mentions name (each said to the user: attached, or why not)."""
        from sandbox_runner.session.mentions import expand_mentions  # not before the prompt

        expanded = expand_mentions(text, self.session.workspace)
        for note in expanded.notes:
            self.session.ui.show(note)
        parts, self.attached = [*self.attached, expanded.text], []
        return "\n\n".join(parts)

    def _done(self, action: Callable[[], None], said: str) -> Outcome:
        action()
        return Outcome([said] if said else [])

    def _diff(self, args: list[str]) -> Outcome:
        lines, diff = session_diff(self.session.checkpoints, args)
        return Outcome(lines, diff=diff)

    def _undo(self, args: list[str]) -> Outcome:
        if self.session.working:
            raise ConfigError("/undo waits for the agent's turn to end")
        lines = session_undo(self.session.checkpoints, args)
        self.session.notes.add("work", undo_note(lines))
        return Outcome(lines)

    def _plan(self, args: list[str]) -> Outcome:
        self.session.enter_plan()
        lines = [f"plan mode: the plan file is {self.session.plan_file.host_path}"]
        if args:
            self.session.send(self.message(" ".join(args)))
        return Outcome(lines)

    def _accept(self, note: str, mode: PermissionMode | None) -> Outcome:
        self.session.accept(note, mode)
        lines = [f"plan accepted: {self.session.state.mode} mode, implementing"]
        self.session.run_pending()
        return Outcome(lines)

    def _apply(self, args: list[str]) -> Outcome:
        mode = _mode(args[0]) if args else None
        return self._accept(" ".join(args[1:]), mode)

    def _mode(self, args: list[str]) -> Outcome:
        if args:
            self.session.set_mode(_mode(args[0]))
        return Outcome([f"mode: {self.session.state.mode}"])

    def _model(self, args: list[str]) -> Outcome:
        if not args:
            aliases = ", ".join(f"{alias} ({model})" for alias, model in MODEL_ALIASES.items())
            return Outcome([f"model: {self.session.state.model}", f"aliases: {aliases}"])
        model = model_id_for(args[0])
        if model is None or len(args) > 1:
            raise ConfigError(
                f"unknown model {' '.join(args)!r}; one of {', '.join(MODEL_ALIASES)} or a "
                "model id (claude-…)"
            )
        self.session.set_model(model)
        return Outcome([f"model: {model} (from the next turn)"])

    def _clear(self, args: list[str]) -> Outcome:
        session = self.session
        session.clear()
        self.attached = []
        lines = [
            f"new conversation in {session.state.active_id}; the old one stays in its transcript"
        ]
        if session.state.active == "work" and session.state.todos:
            session.state.todos = []  # the new conversation knows nothing of it (Claude Code's way)
            session.save()
            lines.append("checklist cleared")
        return Outcome(lines)

    def _init(self, args: list[str]) -> Outcome:
        if self.session.state.permission_mode is PermissionMode.PLAN:
            raise ConfigError("/init writes CLAUDE.md: leave plan mode (/exit-plan) first")
        self.session.send(self.message(INIT_REQUEST))
        return Outcome([])

    def _save(self, args: list[str]) -> Outcome:
        session = self.session
        if session.state.permission_mode is PermissionMode.PLAN:
            raise ConfigError(
                "the repository is read-only in plan mode; /accept or /exit-plan first, "
                "then /save-plan"
            )
        text = session.plan_file.read() if session.state.plan_file else None
        if text is None:
            raise ConfigError("there is no plan yet; /plan writes one")
        force = "--force" in args
        names = [arg for arg in args if arg != "--force"]
        target = save_target(session.workspace, names[0] if names else "PLAN.md", force)
        write_new(target, text)
        return Outcome([f"plan saved to {target}"])

    def _attach(self, args: list[str]) -> Outcome:
        if len(args) != 1:
            raise ConfigError("/attach takes one path")
        from sandbox_runner.plans.inputs import read_context_files  # not before the prompt

        session = self.session
        if session.state.permission_mode is PermissionMode.PLAN:
            try:
                text = read_context_files([Path(args[0])], session.workspace, self.extra_dirs)
            except ConfigError as error:
                raise ConfigError(
                    f"{error}. In plan mode only files in the repository and the extra "
                    "read-only directories can be attached; leave plan mode (/exit-plan) to "
                    "attach others"
                ) from None
        elif Path(args[0]).expanduser().is_absolute():
            text = _read_any(Path(args[0]).expanduser(), session.workspace)
        else:
            # A path in the repository is read beneath it: a link there leads nowhere else.
            text = read_context_files([Path(args[0])], session.workspace, [])
        self.attached.append(text)
        return Outcome([f"attached {args[0]} to your next message"])


def save_target(workspace: Path, name: str, force: bool) -> Path:
    """Where /save-plan writes: beneath the repository, not under .git, no link followed
    on the way; an existing file is replaced only with --force, and only a regular one."""
    relative = Path(name)
    if relative.is_absolute() or ".." in relative.parts or not relative.parts:
        raise ConfigError(f"/save-plan takes a path inside the repository, not {name}")
    if ".git" in relative.parts:
        raise ConfigError("/save-plan never writes under .git")
    directory = workspace
    for part in relative.parts[:-1]:
        directory = directory / part
        if directory.is_symlink() or (directory.exists() and not directory.is_dir()):
            raise ConfigError(f"{directory} is a link or not a directory; /save-plan stops there")
    target = directory / relative.parts[-1]
    if target.is_symlink():
        raise ConfigError(f"{target} is a symbolic link; /save-plan never writes through one")
    if target.exists():
        if not force:
            raise ConfigError(f"{target} exists; /save-plan {name} --force replaces it")
        if not target.is_file():
            raise ConfigError(f"{target} is not a regular file; /save-plan leaves it alone")
        target.unlink()
    directory.mkdir(parents=True, exist_ok=True)
    return target


def come_back(session: Session) -> str:
    """The last line of a session: how to come back to it."""
    session_id = session.state.id
    return (
        f"session {session_id} kept: planrun --continue (or planrun --resume {session_id}) "
        "comes back"
    )


def _mode(name: str) -> PermissionMode:
    mode = MODE_NAMES.get(name.casefold())
    if mode is None:
        raise ConfigError(f"unknown mode {name!r}; one of: default, acceptEdits, plan")
    return mode


def _read_any(path: Path, workspace: Path) -> str:
    resolved = path if path.is_absolute() else workspace / path
    try:
        data = read_untrusted_bytes(resolved, MAX_ATTACH_BYTES + 1)
    except UnsafeFileError as error:
        raise ConfigError(f"cannot attach {path}: {error}") from None
    if data is None:
        raise ConfigError(f"{resolved} does not exist")
    text = data[:MAX_ATTACH_BYTES].decode("utf-8", errors="replace")
    return f"### Attached file: {resolved}\n\n````\n{text}\n````"
