"""Checkpoints and /undo on a real directory: each turn's changes (whatever made them)
taken back, a change of the user's never overwritten, nothing written through a link,
nothing protected touched, and /diff leaving the user's own earlier work out."""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from sandbox_runner.errors import ConfigError
from sandbox_runner.session import shadow_git
from sandbox_runner.session.change_commands import session_diff, session_undo
from sandbox_runner.session.checkpoints import Checkpoints


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    root = tmp_path / "repo"
    (root / "src").mkdir(parents=True)
    (root / "src" / "app.py").write_text("def main():\n    return 42\n")
    (root / "README.md").write_text("user's work in progress\n")
    return root


@pytest.fixture
def checkpoints(repo: Path, tmp_path: Path) -> Checkpoints:
    made = Checkpoints(tmp_path / "session" / "checkpoints", repo)
    assert made.open() is None
    return made


def turn(checkpoints: Checkpoints, *changes: tuple[str, str | None]) -> None:
    """One agent turn that writes (or, for None, removes) files."""
    checkpoints.begin()
    for path, text in changes:
        target = checkpoints.workspace / path
        if text is None:
            target.unlink()
        else:
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(text)
    assert checkpoints.end() is None


def test_undo_restores_an_edit_removes_a_creation_and_brings_back_a_deletion(
    checkpoints: Checkpoints, repo: Path
) -> None:
    turn(checkpoints, ("src/app.py", "def main():\n    return 43\n"), ("src/new.py", "x = 1\n"))
    turn(checkpoints, ("README.md", None))
    lines = session_undo(checkpoints, ["2"])
    assert (repo / "src" / "app.py").read_text() == "def main():\n    return 42\n"
    assert not (repo / "src" / "new.py").exists()
    assert (repo / "README.md").read_text() == "user's work in progress\n"
    assert lines[0] == "undid turns 1, 2:"
    assert checkpoints.turns == []
    with pytest.raises(ConfigError, match="nothing to undo"):
        session_undo(checkpoints, [])


def test_undo_takes_back_the_last_turn_only(checkpoints: Checkpoints, repo: Path) -> None:
    turn(checkpoints, ("src/app.py", "one\n"))
    turn(checkpoints, ("src/app.py", "two\n"))
    session_undo(checkpoints, [])
    assert (repo / "src" / "app.py").read_text() == "one\n"


def test_undo_refuses_when_the_user_changed_a_file_since(
    checkpoints: Checkpoints, repo: Path
) -> None:
    turn(checkpoints, ("src/app.py", "agent\n"), ("src/other.py", "agent\n"))
    (repo / "src" / "app.py").write_text("mine now\n")
    with pytest.raises(ConfigError, match=r"src/app.py changed since .*nothing was restored"):
        session_undo(checkpoints, [])
    assert (repo / "src" / "app.py").read_text() == "mine now\n"
    assert (repo / "src" / "other.py").read_text() == "agent\n"


def test_a_symlink_planted_in_place_of_an_edited_file_is_replaced_never_followed(
    checkpoints: Checkpoints, repo: Path, tmp_path: Path
) -> None:
    outside = tmp_path / "outside.txt"
    outside.write_text("not yours\n")
    checkpoints.begin()
    (repo / "src" / "app.py").unlink()
    (repo / "src" / "app.py").symlink_to(outside)
    (repo / "src").rename(repo / "moved")
    (repo / "src").symlink_to(tmp_path)  # a directory of the repository now leads out
    assert checkpoints.end() is None
    session_undo(checkpoints, [])
    assert outside.read_text() == "not yours\n"
    assert not (repo / "src").is_symlink()
    assert (repo / "src" / "app.py").read_text() == "def main():\n    return 42\n"
    assert not (repo / "src" / "app.py").is_symlink()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["outside.txt", "repo", "session"]


def test_a_protected_file_is_left_as_it_is(checkpoints: Checkpoints, repo: Path) -> None:
    turn(checkpoints, (".envrc", "export A=1\n"), ("src/app.py", "x\n"))
    lines = session_undo(checkpoints, [])
    assert (repo / ".envrc").read_text() == "export A=1\n"
    assert "  left as they are (protected): .envrc" in lines


def test_diff_shows_the_agents_changes_not_the_users_earlier_work(
    checkpoints: Checkpoints, repo: Path
) -> None:
    turn(checkpoints, ("src/app.py", "def main():\n    return 43\n"))
    (repo / "notes.txt").write_text("the user's own, during the session\n")
    head, lines = session_diff(checkpoints, [])
    assert head == ["1 file changed by the agent this session: 1 line added, 1 removed"]
    assert [line.text for line in lines] == [
        "--- a/src/app.py",
        "+++ b/src/app.py",
        "@@ -1,2 +1,2 @@",
        " def main():",
        "-    return 42",
        "+    return 43",
    ]


def test_a_file_too_large_to_keep_makes_its_turn_not_undoable(
    checkpoints: Checkpoints, repo: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(shadow_git, "MAX_SNAPSHOT_FILE_BYTES", 100)
    checkpoints.begin()
    (repo / "big.bin").write_bytes(b"x" * 200)
    note = checkpoints.end()
    assert note is not None and "big.bin" in note and "cannot take this turn back" in note
    with pytest.raises(ConfigError, match="too large"):
        session_undo(checkpoints, [])
    assert (repo / "big.bin").exists()


def test_checkpoints_survive_a_restart(checkpoints: Checkpoints, repo: Path) -> None:
    turn(checkpoints, ("src/app.py", "changed\n"))
    again = Checkpoints(checkpoints.directory, repo)
    assert again.open() is None
    session_undo(again, [])
    assert (repo / "src" / "app.py").read_text() == "def main():\n    return 42\n"


def test_a_gitattributes_conversion_in_the_repository_does_not_change_what_is_kept(
    checkpoints: Checkpoints, repo: Path
) -> None:
    (repo / ".gitattributes").write_text("* text eol=lf\n")
    (repo / "w.bat").write_bytes(b"echo 1\r\n")
    turn(checkpoints, ("w.bat", "echo 2\n"))
    session_undo(checkpoints, [])
    assert (repo / "w.bat").read_bytes() == b"echo 1\r\n"


@pytest.mark.skipif(os.geteuid() != 0, reason="ownership is only given back by root")
def test_a_restored_file_belongs_to_the_repositorys_owner(
    checkpoints: Checkpoints, repo: Path
) -> None:
    os.chown(repo, 4321, 4321)
    turn(checkpoints, ("src/app.py", None))
    session_undo(checkpoints, [])
    assert (repo / "src" / "app.py").stat().st_uid == 4321


def test_a_turn_that_writes_more_than_a_checkpoint_keeps_turns_them_off_and_says_so(
    checkpoints: Checkpoints, repo: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(shadow_git, "MAX_SNAPSHOT_BYTES", 1000)
    checkpoints.begin()
    for number in range(20):
        (repo / f"out{number}.txt").write_text(f"{number}" * 100)
    note = checkpoints.end()
    assert note is not None and "checkpoints are off" in note and "MiB of new files" in note
    with pytest.raises(ConfigError, match="cannot work in this session"):
        session_undo(checkpoints, [])


def test_committed_files_cost_the_store_nothing(
    repo: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (repo / "data.txt").write_text("d" * 5000)
    env = {**os.environ, "GIT_CONFIG_GLOBAL": os.devnull, "GIT_CONFIG_NOSYSTEM": "1"}
    git = ["git", "-c", "user.name=u", "-c", "user.email=u@e", "-C", str(repo)]
    subprocess.run([*git, "init", "-q"], check=True, env=env)
    subprocess.run([*git, "add", "-A"], check=True, env=env)
    subprocess.run([*git, "commit", "-qm", "c"], check=True, env=env)
    monkeypatch.setattr(shadow_git, "MAX_SNAPSHOT_BYTES", 1000)
    checkpoints = Checkpoints(tmp_path / "session" / "checkpoints", repo)
    assert checkpoints.open() is None
    loose = list((checkpoints.directory / "git" / "objects").glob("??/*"))
    assert loose == []  # every file and tree is in the repository's objects already


def test_a_snapshot_cut_short_by_a_crash_does_not_stop_the_next_session(
    checkpoints: Checkpoints, repo: Path
) -> None:
    turn(checkpoints, ("src/app.py", "changed\n"))
    (checkpoints.directory / "git" / "index.lock").write_text("")  # kill -9 mid-snapshot
    again = Checkpoints(checkpoints.directory, repo)
    assert again.open() is None
    turn(again, ("src/app.py", "again\n"))
    session_undo(again, ["2"])
    assert (repo / "src" / "app.py").read_text() == "def main():\n    return 42\n"


def test_a_nested_repository_planted_by_the_agent_never_runs_its_own_programs(
    checkpoints: Checkpoints, repo: Path, tmp_path: Path
) -> None:
    marker = tmp_path / "ran"
    program = tmp_path / "evil.sh"
    program.write_text(f"#!/bin/sh\necho ran >> {marker}\n")
    program.chmod(0o755)
    nested = repo / "vendor" / "lib"
    nested.mkdir(parents=True)
    env = {**os.environ, "GIT_CONFIG_GLOBAL": os.devnull, "GIT_CONFIG_NOSYSTEM": "1"}
    git = ["git", "-c", "user.name=u", "-c", "user.email=u@e", "-C", str(nested)]
    (nested / "x.txt").write_text("x\n")
    (nested / ".gitattributes").write_text("* filter=evil\n")
    subprocess.run([*git, "init", "-q"], check=True, env=env)
    subprocess.run([*git, "add", "-A"], check=True, env=env)
    subprocess.run([*git, "commit", "-qm", "c"], check=True, env=env)
    for key, value in {"core.fsmonitor": program, "filter.evil.clean": program}.items():
        subprocess.run([*git, "config", key, str(value)], check=True, env=env)
    turn(checkpoints, ("vendor/lib/x.txt", "changed\n"))
    turn(checkpoints, ("vendor/lib/x.txt", "again\n"))
    assert not marker.exists()  # git on the host never asked the nested repository's status


@pytest.mark.parametrize("entry", ["", "."])
def test_a_git_program_in_the_repository_never_runs_for_a_relative_path_entry(
    repo: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, entry: str
) -> None:
    marker = tmp_path / "ran"
    (repo / "git").write_text(f"#!/bin/sh\necho ran >> {marker}\nexit 1\n")
    (repo / "git").chmod(0o755)
    monkeypatch.setenv("PATH", f"{entry}:{os.environ['PATH']}")  # a common slip in a shell rc
    checkpoints = Checkpoints(tmp_path / "session" / "checkpoints", repo)
    assert checkpoints.open() is None
    turn(checkpoints, ("src/app.py", "changed\n"))
    assert not marker.exists()


HIDE_AS_OWNER = """
import os, sys
from pathlib import Path
from sandbox_runner.session.checkpoints import Checkpoints
repo = Path(sys.argv[1])
checkpoints = Checkpoints(Path(sys.argv[2]), repo)
assert checkpoints.open() is None
checkpoints.begin()
(repo / "src" / "app.py").write_text("import evil\\n")
os.chmod(repo / "src" / "app.py", 0)
assert checkpoints.end() is None
print([turn.paths for turn in checkpoints.turns])
"""


def test_an_edit_made_unreadable_by_its_owner_is_still_a_change_of_the_turn(
    repo: Path, tmp_path: Path
) -> None:
    """Run as the repository's owner (root reads a file whatever its mode)."""
    session = tmp_path / "session"
    session.mkdir()
    run_as: list[str] = []
    if os.geteuid() == 0:
        for path in [tmp_path, session, repo, *repo.rglob("*")]:
            os.chown(path, 4321, 4321)
        for parent in tmp_path.parents:
            if parent == Path(tempfile.gettempdir()):
                break
            parent.chmod(parent.stat().st_mode | 0o011)
        run_as = ["setpriv", "--reuid=4321", "--regid=4321", "--clear-groups"]
    source = str(Path(__file__).resolve().parents[2])
    command = [*run_as, sys.executable, "-c", HIDE_AS_OWNER, str(repo), str(session / "c")]
    env = {"PYTHONPATH": source, "PATH": os.environ["PATH"]}
    found = subprocess.run(command, capture_output=True, text=True, env=env, check=True)
    assert found.stdout.strip() == "[['src/app.py']]"  # /diff shows it, /undo takes it back
