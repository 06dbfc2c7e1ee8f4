"""`@path` mentions: which words are mentions, what a message attaches (and refuses), and
the paths Tab completes, from a walk that stays bounded on a huge tree."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest
from prompt_toolkit.completion import CompleteEvent
from prompt_toolkit.document import Document

from sandbox_runner.session.commands import Commands
from sandbox_runner.session.mention_completion import MentionCompleter, path_candidates
from sandbox_runner.session.mentions import (
    MAX_FILE_BYTES,
    MAX_FILE_LINES,
    MAX_TOTAL_BYTES,
    expand_mentions,
    find_mentions,
)
from sandbox_runner.session.path_index import PathIndex, walk_repository
from tests.support.scripted_model import reply, say
from tests.unit.test_session import FakeUI, Models, open_session


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    root = tmp_path / "repo"
    (root / "src" / "lib").mkdir(parents=True)
    (root / "src" / "index.js").write_text("console.log('hi')\n")
    (root / "src" / "lib" / "util.js").write_text("export const x = 1\n")
    (root / "docs").mkdir()
    (root / "docs" / "my notes.md").write_text("# notes\n")
    return root


def test_mentions_are_words_that_start_with_at_not_addresses_or_code(repo: Path) -> None:
    text = 'see @src/index.js, me@host.org, `@src/lib`, @"docs/my notes.md" and @src/index.js.'
    assert [(m.typed, m.path) for m in find_mentions(text, repo)] == [
        ("@src/index.js", "src/index.js"),
        ('@"docs/my notes.md"', "docs/my notes.md"),
    ]
    assert [m.path for m in find_mentions("(@./src/lib/) @src//lib", repo)] == ["src/lib"]


def test_a_file_and_a_directory_are_attached_after_the_message(repo: Path) -> None:
    expanded = expand_mentions("explain @src/index.js and @src/", repo)
    text = expanded.text
    assert text.startswith("explain @src/index.js and @src/\n\n### Attached file: src/index.js")
    assert "````\nconsole.log('hi')\n````" in text
    assert "### Attached directory: src/ (2 entries)\n\nindex.js\nlib/" in text
    assert expanded.notes == [
        "`@src/index.js`: attached (1 lines)",
        "`@src/`: attached a listing (2 entries)",
    ]


def test_long_files_are_cut_and_the_cut_is_said(repo: Path) -> None:
    (repo / "many.txt").write_text("".join(f"line {n}\n" for n in range(MAX_FILE_LINES + 500)))
    (repo / "wide.txt").write_text(("x" * 1000 + "\n") * 400)
    expanded = expand_mentions("@many.txt @wide.txt", repo)
    assert f"line {MAX_FILE_LINES - 1}\n" in expanded.text
    assert f"line {MAX_FILE_LINES}\n" not in expanded.text
    assert f"[cut: only the first {MAX_FILE_LINES} lines of the file are attached]" in expanded.text
    assert len(expanded.text.encode()) < MAX_FILE_BYTES + 2 * 200_000
    assert "cut to the first 256 KiB" in expanded.notes[1]


def test_all_mentions_of_a_message_share_one_budget(repo: Path) -> None:
    for n in range(7):
        (repo / f"big{n}.txt").write_text(("y" * 100 + "\n") * 2000)
    expanded = expand_mentions(" ".join(f"@big{n}.txt" for n in range(7)), repo)
    assert len(expanded.text.encode()) <= MAX_TOTAL_BYTES + 4096
    assert "cut to the first 37 KiB" in expanded.notes[5]
    assert expanded.notes[6] == "`@big6.txt`: not attached: the message already carries 1024 KiB"


def test_what_a_mention_never_attaches(repo: Path, tmp_path: Path) -> None:
    outside = tmp_path / "secret.txt"
    outside.write_text("host secret")
    (repo / "out").symlink_to(outside)
    (repo / "outdir").symlink_to(tmp_path)
    (repo / ".git").mkdir()
    (repo / ".git" / "config").write_text("[http]\n\textraheader = AUTHORIZATION: basic x\n")
    (repo / ".env").write_text("API_KEY=1\n")
    (repo / "logo.png").write_bytes(b"\x89PNG\r\n\x1a\n\0\0\0")
    text = "@out @outdir/ @.git/config @.env @logo.png @../secret.txt @/etc/passwd @gone.py @here"
    expanded = expand_mentions(text, repo)
    assert expanded.text == text  # nothing attached
    notes = "\n".join(expanded.notes)
    assert "`@out`: not attached: out leads outside" in notes
    assert "`@outdir/`: not attached: outdir leads outside the repository" in notes
    assert "`@.git/config`: not attached: git's own files" in notes
    assert "`@.env`: not attached: the name looks like a secret (/attach .env sends it)" in notes
    assert "`@logo.png`: not attached: a binary file" in notes
    assert notes.count("only paths inside the repository") == 2
    assert "`@gone.py`: no such file in the repository" in notes
    assert "@here" not in notes  # a word, not a path


def test_a_link_inside_the_repository_is_followed_within_it(repo: Path) -> None:
    (repo / "entry.js").symlink_to("src/index.js")
    assert "console.log('hi')" in expand_mentions("@entry.js", repo).text


def test_the_message_sent_carries_the_file_and_the_user_is_told(repo: Path, tmp_path: Path) -> None:
    ui, models = FakeUI(), Models({"work": [reply(say("it logs hi"))]})
    session = open_session(repo, tmp_path, models, ui)
    try:
        session.send(Commands(session).message("what does @src/index.js do?"))
        sent = models.made["work"].requests[0].messages[0]["content"][0]["text"]
        assert "### Attached file: src/index.js\n\n````\nconsole.log('hi')" in sent
        assert ui.shown[0] == "`@src/index.js`: attached (1 lines)"
    finally:
        session.close()


def test_tab_completes_a_level_at_a_time_then_by_name(repo: Path) -> None:
    paths = walk_repository(repo).paths
    assert path_candidates(paths, "sr") == ["src/"]
    assert path_candidates(paths, "src/") == ["src/index.js", "src/lib/"]
    assert path_candidates(paths, "src/ind") == ["src/index.js"]
    assert path_candidates(paths, "UTIL") == ["src/lib/util.js"]
    completer = MentionCompleter(PathIndex(repo))
    document = Document("look at @src/ind")
    [completion] = completer.get_completions(document, CompleteEvent(completion_requested=True))
    assert (completion.text, completion.start_position) == ("src/index.js", -7)
    [spaced] = completer.get_completions(Document("@docs/my"), CompleteEvent())
    assert spaced.text == '"docs/my notes.md"'
    assert list(completer.get_completions(Document("mail me@src"), CompleteEvent())) == []


def test_the_walk_skips_git_ignored_bulky_and_linked_directories(
    repo: Path, tmp_path: Path
) -> None:
    (repo / ".git").mkdir()
    (repo / ".git" / "HEAD").write_text("ref: refs/heads/main\n")
    (repo / ".gitignore").write_text("build/\n*.log\n")
    for name in ("build", "node_modules", ".venv"):
        (repo / name).mkdir()
        (repo / name / "inside.js").write_text("")
    (repo / "debug.log").write_text("")
    (repo / "elsewhere").symlink_to(tmp_path)
    paths = walk_repository(repo).paths
    assert "src/index.js" in paths and "elsewhere" in paths
    assert not [p for p in paths if p.startswith((".git/", "build", "node_modules", ".venv"))]
    assert "debug.log" not in paths and not [p for p in paths if p.startswith("elsewhere/")]


def test_the_walk_of_a_huge_tree_is_cut_and_shallow_paths_come_first(tmp_path: Path) -> None:
    root = tmp_path / "huge"
    (root / "top").mkdir(parents=True)
    (root / "top" / "README.md").write_text("")
    for n in range(40):
        deep = root / "top" / f"d{n:02}"
        deep.mkdir()
        for m in range(100):
            (deep / f"f{m}.py").touch()
    started = time.monotonic()
    walked = walk_repository(root, max_scanned=1000)
    assert time.monotonic() - started < 1.0
    assert not walked.complete and len(walked.paths) <= 1000
    assert walked.paths[:2] == ("top/", "top/README.md")
    assert walk_repository(root, seconds=0.0).complete is False
    assert walk_repository(root).complete and len(walk_repository(root).paths) == 4042


def test_the_index_is_cached_and_refreshed_in_the_background(repo: Path) -> None:
    index = PathIndex(repo, fresh_seconds=3600)
    first = index.paths()
    (repo / "new.py").write_text("")
    assert index.paths() is first  # fresh: the cache, no walk
    index.fresh_seconds = 0
    index.paths()  # old: served as it is, a walk starts
    deadline = time.monotonic() + 5
    while "new.py" not in index.paths().paths:
        assert time.monotonic() < deadline
        time.sleep(0.01)
    assert os.path.exists(repo / "new.py")


def test_one_huge_directory_is_not_read_whole_and_unprintable_names_are_left_out(
    tmp_path: Path,
) -> None:
    root = tmp_path / "flat"
    root.mkdir()
    for n in range(3000):
        (root / f"f{n:04}").touch()
    (root / "evil\x1b[31mname").touch()
    walked = walk_repository(root, max_scanned=50)
    assert not walked.complete and len(walked.paths) == 50
    assert not [path for path in walk_repository(root).paths if not path.isprintable()]


def test_where_a_cut_walk_did_not_reach_the_directory_typed_is_listed(tmp_path: Path) -> None:
    root = tmp_path / "deep"
    for n in range(30):
        (root / f"d{n:02}").mkdir(parents=True)
        (root / f"d{n:02}" / "target.py").touch()
    index = PathIndex(root, walk=lambda where: walk_repository(where, max_scanned=5))
    completer = MentionCompleter(index)
    [found] = completer.get_completions(Document("@d29/tar"), CompleteEvent())
    assert found.text == "d29/target.py"
    assert index.directory("../") == [] and index.directory("d29/../..") == []
