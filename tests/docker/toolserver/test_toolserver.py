"""The in-container tool server, run as a real subprocess and spoken to in JSON lines."""

from __future__ import annotations

import json
import os
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.support.toolserver_process import NOBODY, ServerProcess

StartServer = Callable[..., ServerProcess]


def token_holders(token: str) -> list[int]:
    """Pids of live processes started by the command that carries TOKEN."""
    marker = f"PLANRUN_CMD={token}\0".encode()
    pids = []
    for name in os.listdir("/proc"):
        if name.isdigit():
            try:
                if marker in Path(f"/proc/{name}/environ").read_bytes():
                    pids.append(int(name))
            except OSError:
                continue
    return pids


def assert_no_holders(token: str) -> None:
    deadline = time.monotonic() + 3
    while token_holders(token) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert token_holders(token) == []


def set_mtime(path: Path, seconds: float) -> None:
    os.utime(path, (seconds, seconds), follow_symlinks=False)


# ----------------------------------------------------------------------------- protocol


def test_ready_line_and_ping(server: ServerProcess) -> None:
    assert server.ready == {"event": "ready", "pid": 1, "protocol": 1}
    response = server.call("ping")
    assert response["ok"] and response["output"] == "pong"
    assert set(response) == {
        "id", "ok", "output", "exit_code", "timed_out", "truncated", "error", "meta"
    }  # fmt: skip
    assert response["meta"]["server_ms"] >= 0


def test_bad_input_is_answered_and_the_server_survives(server: ServerProcess) -> None:
    server.send_line(b"this is not json")
    assert "not valid JSON" in server.wait_for(None)["error"]
    server.send_line(b"[1, 2]")
    assert "expected a JSON object" in server.wait_for(None)["error"]
    server.send_line(b'{"id": 7, "op": "frobnicate"}')
    assert "Unknown op: 'frobnicate'" in server.wait_for(7)["error"]
    server.send_line(b'{"id": 8, "op": "read", "args": [1]}')
    assert "args must be a JSON object" in server.wait_for(8)["error"]
    server.send_line(b'{"id": 9, "op": "read", "args": {}}')
    assert "file_path" in server.wait_for(9)["error"]
    server.send_line(b"\xff\xfe garbage")
    assert server.wait_for(None)["ok"] is False
    assert server.ok("ping") == "pong"


def test_concurrent_requests_are_answered_by_id(server: ServerProcess, workspace: Path) -> None:
    for number in range(20):
        (workspace / f"f{number}.txt").write_text(f"content {number}\n")
    slow = server.send("bash", {"command": "sleep 1; echo slow"})
    reads = {server.send("read", {"file_path": f"f{n}.txt"}): n for n in range(20)}
    for request_id, number in reads.items():
        assert server.wait_for(request_id)["output"] == f"     1\tcontent {number}"
    assert server.wait_for(slow)["output"] == "slow"
    assert server.arrival_order[-1] == slow


def test_stdin_eof_kills_running_commands_and_exits_zero(
    start_server: StartServer, workspace: Path, plan_dir: Path, tmp_path: Path
) -> None:
    out = tmp_path / "out"
    out.mkdir()
    token_file = out / "token"
    process = start_server(workspace, plan_dir, writable=[out])
    process.send(
        "bash", {"command": f"echo $PLANRUN_CMD > {token_file}; setsid sleep 300 & sleep 300"}
    )
    deadline = time.monotonic() + 10
    while len(session_leaders(token_file)) < 2:  # bash itself and the setsid sleep
        assert time.monotonic() < deadline, "the command did not start"
        time.sleep(0.02)
    token = token_file.read_text().strip()
    assert process.close() == 0
    assert_no_holders(token)


def session_leaders(token_file: Path) -> list[int]:
    """Processes of the command named in TOKEN_FILE that lead a session of their own."""
    token = token_file.read_text().strip() if token_file.exists() else ""
    leaders = []
    for pid in token_holders(token) if token else []:
        try:
            if os.getsid(pid) == pid:
                leaders.append(pid)
        except OSError:
            continue
    return leaders


# ----------------------------------------------------------------------------- read


def test_read_numbers_lines_and_honours_offset_and_limit(
    server: ServerProcess, workspace: Path
) -> None:
    (workspace / "ten.txt").write_text("".join(f"line {n}\r\n" for n in range(1, 11)))
    assert server.ok("read", {"file_path": "ten.txt"}).splitlines()[0] == "     1\tline 1"
    output = server.ok("read", {"file_path": str(workspace / "ten.txt"), "offset": 3, "limit": 2})
    assert output.splitlines() == [
        "     3\tline 3",
        "     4\tline 4",
        "... [6 more lines not shown; use offset=5/limit to read them]",
    ]
    assert server.call("read", {"file_path": "ten.txt", "offset": 3, "limit": 2})["truncated"]
    past = server.ok("read", {"file_path": "ten.txt", "offset": 50})
    assert "only 10 lines" in past


def test_read_cuts_long_lines_and_caps_total_output(server: ServerProcess, workspace: Path) -> None:
    (workspace / "long.txt").write_text("x" * 5000 + "\nshort\n")
    lines = server.ok("read", {"file_path": "long.txt"}).splitlines()
    assert lines[0] == "     1\t" + "x" * 2000 + "... [line truncated: 3000 more bytes]"
    assert lines[1] == "     2\tshort"
    (workspace / "wide.txt").write_text(("y" * 1000 + "\n") * 2000)
    response = server.call("read", {"file_path": "wide.txt"})
    assert response["truncated"]
    assert len(response["output"]) < 270_000
    assert "output truncated at 262144 bytes; use offset=" in response["output"]


def test_read_huge_file_without_newlines_streams(server: ServerProcess, workspace: Path) -> None:
    big = workspace / "big.bin"
    with big.open("wb") as handle:
        for _ in range(50):
            handle.write(b"a" * 1_000_000)
    before = server.peak_memory_kib()
    output = server.ok("read", {"file_path": "big.bin"}, timeout=60)
    assert output == "     1\t" + "a" * 2000 + "... [line truncated: 49998000 more bytes]"
    assert server.peak_memory_kib() - before < 20_000


def test_read_refuses_binary_fifo_directory_missing_and_reports_empty(
    server: ServerProcess, workspace: Path
) -> None:
    (workspace / "blob").write_bytes(b"abc\0def")
    assert server.error("read", {"file_path": "blob"}) == (
        f"Cannot read binary file: {workspace}/blob (7 bytes)"
    )
    os.mkfifo(workspace / "pipe")
    assert "Not a regular file" in server.error("read", {"file_path": "pipe"})
    assert "Path is a directory, not a file" in server.error("read", {"file_path": "."})
    assert server.error("read", {"file_path": "nope.txt"}) == (
        f"File does not exist: {workspace}/nope.txt"
    )
    (workspace / "empty.txt").write_text("")
    assert "empty" in server.ok("read", {"file_path": "empty.txt"})


def test_read_symlink_loop_gives_a_clear_error(server: ServerProcess, workspace: Path) -> None:
    (workspace / "loop").symlink_to("loop")
    assert server.error("read", {"file_path": "loop"}) == (
        f"Too many levels of symbolic links: {workspace}/loop"
    )


def test_unreadable_file_and_directory_give_permission_errors(
    start_server: StartServer, workspace: Path, plan_dir: Path
) -> None:
    (workspace / "locked").mkdir()
    (workspace / "secret.txt").write_text("hidden\n")
    (workspace / "secret.txt").chmod(0o000)
    (workspace / "locked").chmod(0o000)
    try:
        for uid in (None, NOBODY):  # the sandbox user, and one that owns nothing here
            process = start_server(workspace, plan_dir, user=uid)
            assert process.error("read", {"file_path": "secret.txt"}) == (
                f"Permission denied: {workspace}/secret.txt"
            )
            assert "[cannot list: Permission denied]" in process.ok("ls")
            assert process.close() == 0
    finally:
        (workspace / "locked").chmod(0o755)


# ----------------------------------------------------------------------------- glob


def test_glob_braces_double_star_and_mtime_order(server: ServerProcess, workspace: Path) -> None:
    files = ["a.py", "src/b.py", "src/deep/c.md", "src/deep/d.txt", ".git/e.py", "x.py"]
    for age, name in enumerate(files):
        path = workspace / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(name)
        set_mtime(path, 1_000_000 + age)
    found = server.ok("glob", {"pattern": "**/*.{py,md}"}).splitlines()
    assert found == [
        f"{workspace}/{name}" for name in ("x.py", "src/deep/c.md", "src/b.py", "a.py")
    ]
    assert server.ok("glob", {"pattern": "*.py"}).splitlines() == [
        f"{workspace}/x.py",
        f"{workspace}/a.py",
    ]
    assert server.ok("glob", {"pattern": "src/*.py"}) == f"{workspace}/src/b.py"
    assert server.ok("glob", {"pattern": "[ab].py", "path": str(workspace)}) == f"{workspace}/a.py"
    assert server.ok("glob", {"pattern": "deep/?.txt", "path": "src"}) == (
        f"{workspace}/src/deep/d.txt"
    )
    assert server.ok("glob", {"pattern": f"{workspace}/src/**/*.md"}) == (
        f"{workspace}/src/deep/c.md"
    )
    assert server.ok("glob", {"pattern": "**/*.rs"}) == "No files found"
    assert "Directory does not exist" in server.error("glob", {"pattern": "*", "path": "nope"})


def test_glob_caps_at_one_hundred_with_a_note(server: ServerProcess, workspace: Path) -> None:
    for number in range(150):
        path = workspace / f"f{number:03}.txt"
        path.write_text("x")
        set_mtime(path, 1_000_000 + number)
    response = server.call("glob", {"pattern": "*.txt"})
    lines = response["output"].splitlines()
    # Past the cap the walk stops: the first matches by path, not the newest.
    assert lines[:-1] == [f"{workspace}/f{number:03}.txt" for number in range(100)]
    assert lines[-1] == (
        "[showing the first 100 matches by path; there are more: "
        "narrow with path= or a more specific pattern]"
    )
    assert response["truncated"]


def test_glob_and_ls_survive_symlink_loops(server: ServerProcess, workspace: Path) -> None:
    (workspace / "d").mkdir()
    (workspace / "d" / "up").symlink_to("..")
    (workspace / "d" / "self").symlink_to("self")
    (workspace / "d" / "f.txt").write_text("x")
    found = server.ok("glob", {"pattern": "**/*"}, timeout=10).splitlines()
    assert sorted(found) == [f"{workspace}/d/f.txt", f"{workspace}/d/self"]
    listing = server.ok("ls", timeout=10)
    assert "    - up -> .." in listing and "    - self -> self" in listing


def test_non_utf8_and_control_character_names_are_shown_escaped(
    server: ServerProcess, workspace: Path
) -> None:
    raw = os.fsencode(workspace) + b"/bad\xffname.txt"
    with open(raw, "wb") as handle:
        handle.write(b"needle\n")
    (workspace / "new\nline.txt").write_text("needle\n")
    found = server.ok("glob", {"pattern": "*.txt"})
    assert f"{workspace}/bad\\xffname.txt" in found.splitlines()
    assert f"{workspace}/new\\nline.txt" in found.splitlines()
    listing = server.ok("ls")
    assert "  - bad\\xffname.txt" in listing
    assert "needle" not in listing
    assert "bad\\xffname.txt" in server.ok("grep", {"pattern": "needle"})


# ----------------------------------------------------------------------------- grep


@pytest.fixture
def code_tree(workspace: Path) -> Path:
    files = {
        "src/app.py": "def main():\n    return 42\n\nclass Thing:\n    pass\n",
        "src/util.py": "def helper():\n    return 'MAIN'\n",
        "docs/readme.md": "main entry point\n-flag option\n",
        ".git/HEAD": "ref: main\n",
        ".hidden.py": "def hidden_main():\n    pass\n",
    }
    for age, (name, text) in enumerate(files.items()):
        path = workspace / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
        set_mtime(path, 1_000_000 + age)
    return workspace


def test_grep_files_mode_sorts_newest_first(server: ServerProcess, code_tree: Path) -> None:
    output = server.ok("grep", {"pattern": "main", "-i": True})
    assert output.splitlines() == [
        "Found 4 files",
        f"{code_tree}/.hidden.py",
        f"{code_tree}/docs/readme.md",
        f"{code_tree}/src/util.py",
        f"{code_tree}/src/app.py",
    ]
    assert server.ok("grep", {"pattern": "MAIN"}).splitlines()[1:] == [f"{code_tree}/src/util.py"]


def test_grep_content_mode_options(server: ServerProcess, code_tree: Path) -> None:
    args = {"pattern": "return", "output_mode": "content"}
    assert server.ok("grep", args).splitlines() == [
        f"{code_tree}/src/app.py:2:    return 42",
        f"{code_tree}/src/util.py:2:    return 'MAIN'",
    ]
    assert server.ok("grep", {**args, "-n": False, "glob": "app.*"}) == (
        f"{code_tree}/src/app.py:    return 42"
    )
    context = server.ok("grep", {**args, "path": "src/app.py", "-C": 1})
    assert context.splitlines() == ["1-def main():", "2:    return 42", "3-"]
    assert server.ok("grep", {"pattern": "main", "type": "md"}).splitlines()[1:] == [
        f"{code_tree}/docs/readme.md"
    ]
    limited = server.call("grep", {**args, "head_limit": 1})
    assert limited["truncated"]
    assert limited["output"].splitlines()[-1] == "[showing first 1 of 2 lines (head_limit)]"


def test_grep_multiline_dash_pattern_count_and_failures(
    server: ServerProcess, code_tree: Path
) -> None:
    multiline = {"pattern": r"class Thing:\n\s+pass", "output_mode": "content", "multiline": True}
    assert "4:class Thing:" in server.ok("grep", multiline)
    assert server.ok("grep", {"pattern": "-flag"}).splitlines()[1:] == [
        f"{code_tree}/docs/readme.md"
    ]
    count = server.ok("grep", {"pattern": "pass|return", "output_mode": "count"})
    assert count.splitlines() == [
        f"{code_tree}/.hidden.py:1",
        f"{code_tree}/src/app.py:2",
        f"{code_tree}/src/util.py:1",
        "",
        "Found 4 matching lines in 3 files",
    ]
    assert server.ok("grep", {"pattern": "no such text anywhere"}) == "No matches found"
    assert "regex parse error" in server.error("grep", {"pattern": "(unclosed"})
    assert "unrecognized file type" in server.error("grep", {"pattern": "x", "type": "nosuch"})
    assert "File does not exist" in server.error("grep", {"pattern": "x", "path": "nope"})


def test_grep_refuses_a_fifo_instead_of_waiting_on_it(
    server: ServerProcess, workspace: Path
) -> None:
    os.mkfifo(workspace / "pipe")  # rg would block opening a FIFO that has no writer
    started = time.monotonic()
    response = server.call("grep", {"pattern": "x", "path": "pipe"}, timeout=30)
    assert not response["ok"] and not response["timed_out"]
    assert response["error"] == f"Not a regular file (fifo): {workspace}/pipe"
    assert time.monotonic() - started < 5
    assert server.ok("ping") == "pong"


# ----------------------------------------------------------------------------- ls


def test_ls_tree_skips_hidden_and_ignored(server: ServerProcess, workspace: Path) -> None:
    for name in ("b.txt", "a/z.py", "a/__pycache__/z.pyc", ".env", "a/.cache/x", "debug.log"):
        path = workspace / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("x")
    assert server.ok("ls", {"ignore": ["*.log"]}).splitlines() == [
        f"- {workspace}/",
        "  - a/",
        "    - z.py",
        "  - b.txt",
    ]
    assert "Path is not a directory" in server.error("ls", {"path": "b.txt"})
    assert "Directory does not exist" in server.error("ls", {"path": "nope"})


def test_ls_caps_at_one_thousand_entries(server: ServerProcess, workspace: Path) -> None:
    for number in range(1100):
        (workspace / f"f{number:04}").write_text("")
    response = server.call("ls")
    lines = response["output"].splitlines()
    assert len(lines) == 1002
    assert lines[1000] == "  - f0999"
    assert lines[-1].startswith("[listing cut at 1000 entries")
    assert response["truncated"]


# ----------------------------------------------------------------------------- bash


def test_bash_exit_code_streams_and_clean_environment(
    server: ServerProcess, workspace: Path
) -> None:
    response = server.call(
        "bash", {"command": "pwd; echo oops >&2; echo ${LEAK_CHECK:-unset}; exit 3"}
    )
    assert response["ok"] and response["exit_code"] == 3
    assert response["output"] == f"{workspace}\nunset\n[stderr]\noops"
    env = server.call("bash", {"command": "env"})
    assert f"PLANRUN_CMD={env['meta']['token']}" in env["output"].splitlines()
    assert "HOME=/tmp" in env["output"].splitlines()
    assert server.call("bash", {"command": "kill -TERM $$"})["exit_code"] == 128 + 15


def test_bash_output_is_bounded(server: ServerProcess) -> None:
    response = server.call("bash", {"command": "yes | head -c 10000000; seq 3 >&2"})
    assert response["truncated"]
    assert response["output"].endswith(
        "... [stdout truncated: 9970000 more bytes]\n[stderr]\n1\n2\n3"
    )
    assert len(response["output"]) < 31_000
    assert server.peak_memory_kib() < 100_000


def test_bash_timeout_kills_the_process_group(server: ServerProcess) -> None:
    started = time.monotonic()
    response = server.call("bash", {"command": "sleep 300 & echo before; sleep 300"}, timeout=1)
    assert time.monotonic() - started < 10
    assert response["ok"] and response["timed_out"]
    assert response["output"] == "before\n[command timed out after 1 s and was killed]"
    assert_no_holders(response["meta"]["token"])


def test_bash_timeout_in_milliseconds_wins(server: ServerProcess) -> None:
    response = server.call("bash", {"command": "sleep 30", "timeout": 300}, timeout=60)
    assert response["timed_out"]
    assert "timed out after 0.3 s" in response["output"]


def test_bash_leaves_no_background_process_behind(server: ServerProcess) -> None:
    started = time.monotonic()
    commands = ["sleep 300 & echo done", "setsid sleep 300 & echo done", "(sleep 300 &); echo done"]
    for command in commands:
        response = server.call("bash", {"command": command})
        assert response["output"] == "done" and response["exit_code"] == 0
        assert_no_holders(response["meta"]["token"])
    assert time.monotonic() - started < 15


# ----------------------------------------------------------------------------- write, edit


def test_write_and_edit_inside_the_plan_dir(server: ServerProcess, plan_dir: Path) -> None:
    target = plan_dir / "sub" / "dir" / "plan.md"
    assert server.ok("write", {"file_path": str(target), "content": "alpha beta alpha\n"}) == (
        f"File written: {target} (17 bytes)"
    )
    edit = {"file_path": str(target), "old_string": "beta", "new_string": "gamma"}
    assert server.ok("edit", edit) == f"File edited: {target} (1 replacement)"
    assert server.cat(target) == "alpha gamma alpha"
    twice = {**edit, "old_string": "alpha", "new_string": "omega"}
    assert server.error("edit", twice) == (
        "old_string is not unique in file (2 occurrences); give more context or set replace_all"
    )
    assert "(2 replacements)" in server.ok("edit", {**twice, "replace_all": True})
    assert server.cat(target) == "omega gamma omega"
    assert "old_string not found in file" in server.error("edit", edit)
    assert "identical" in server.error("edit", {**edit, "new_string": "beta"})
    missing = {**edit, "file_path": str(plan_dir / "nope.md")}
    assert server.error("edit", missing) == f"File does not exist: {plan_dir}/nope.md"
    server.ok("write", {"file_path": str(target), "content": "short"})
    assert server.cat(target) == "short"


def test_write_outside_the_plan_dir_is_refused(
    server: ServerProcess, plan_dir: Path, workspace: Path, tmp_path: Path
) -> None:
    for path in ("/etc/evil.md", "relative.md", f"{plan_dir}/../escape.md", str(plan_dir)):
        message = server.error("write", {"file_path": path, "content": "x"})
        assert message.startswith(f"Write is only allowed in the plan directory {plan_dir}: ")
    assert not (workspace / "relative.md").exists()
    assert not (tmp_path / "escape.md").exists()
    edit = {"file_path": str(workspace / "a.md"), "old_string": "a", "new_string": "b"}
    assert "only allowed in the plan directory" in server.error("edit", edit)


def test_symlinks_in_the_plan_dir_are_not_followed(
    start_server: StartServer, workspace: Path, plan_dir: Path, tmp_path: Path
) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "victim.txt").write_text("original")
    (outside / "victim.txt").chmod(0o666)
    server = start_server(workspace, plan_dir, writable=[outside])
    plant = f"ln -s {outside}/victim.txt {plan_dir}/leaf.md && ln -s {outside} {plan_dir}/dirlink"
    assert server.call("bash", {"command": plant})["exit_code"] == 0
    for path in (plan_dir / "leaf.md", plan_dir / "dirlink" / "new.md"):
        message = server.error("write", {"file_path": str(path), "content": "pwned"})
        assert message.startswith("Refusing to follow a symbolic link in the plan directory")
    edit = {"file_path": str(plan_dir / "leaf.md"), "old_string": "original", "new_string": "x"}
    assert "symbolic link" in server.error("edit", edit)
    assert (outside / "victim.txt").read_text() == "original"
    assert sorted(os.listdir(outside)) == ["victim.txt"]
    assert server.close() == 0


def test_plan_size_cap(start_server: StartServer, workspace: Path, plan_dir: Path) -> None:
    process = start_server(workspace, plan_dir, plan_kib=64)
    first = str(plan_dir / "one.md")
    process.ok("write", {"file_path": first, "content": "a" * 40_000})
    message = process.error(
        "write", {"file_path": str(plan_dir / "two.md"), "content": "b" * 40_000}
    )
    assert message.startswith(f"Plan directory is full: {plan_dir}/two.md was not changed")
    assert "holds at most 64 KB and 10000 files" in message
    assert process.call("bash", {"command": f"ls {plan_dir}"})["output"] == "one.md"
    process.ok("write", {"file_path": first, "content": "c" * 20_000})
    grow = {"file_path": first, "old_string": "c", "new_string": "ddd", "replace_all": True}
    assert "Plan directory is full" in process.error("edit", grow)
    assert process.cat(Path(first)) == "c" * 20_000  # a failed write leaves the plan whole
    assert process.close() == 0


def test_plan_entries_cap(start_server: StartServer, workspace: Path, plan_dir: Path) -> None:
    process = start_server(workspace, plan_dir, plan_entries=20)
    errors = [
        process.call("write", {"file_path": f"{plan_dir}/n{number}.md", "content": "x"})["error"]
        for number in range(25)
    ]
    assert errors[:10] == [None] * 10
    assert any(error and error.startswith("Plan directory is full") for error in errors)
    # Commands are held by the kernel too, not only the write tool.
    flood = process.call("bash", {"command": f"for n in $(seq 100); do : > {plan_dir}/f$n; done"})
    assert flood["exit_code"] != 0 and "No space left on device" in flood["output"]
    assert process.close() == 0


# ----------------------------------------------------------------------------- stat


def test_stat_reports_type_and_size(server: ServerProcess, workspace: Path) -> None:
    (workspace / "f.txt").write_text("12345")
    (workspace / "link").symlink_to("f.txt")
    info = json.loads(server.ok("stat", {"path": "f.txt"}))
    assert (info["type"], info["size"]) == ("file", 5)
    assert json.loads(server.ok("stat", {"path": "link"}))["target"] == "f.txt"
    assert "File does not exist" in server.error("stat", {"path": "nope"})
