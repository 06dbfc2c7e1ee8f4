"""Run names: random English pairs, never reused (pyfakefs for the directories)."""

from __future__ import annotations

import secrets
from pathlib import Path

import pytest
from pyfakefs.fake_filesystem import FakeFilesystem

from sandbox_runner.plans import names
from sandbox_runner.plans.names import ADJECTIVES, NOUNS, claim_directory, random_name


def test_names_are_adjective_noun_pairs() -> None:
    adjective, noun = random_name().split("-")
    assert adjective in ADJECTIVES and noun in NOUNS


def test_claimed_directories_are_new_and_created(fs: FakeFilesystem) -> None:
    parent = Path("/home/u/.planrun/plans")
    claimed = {claim_directory(parent) for _ in range(50)}
    assert len(claimed) == 50
    assert all(path.is_dir() and path.parent == parent for path in claimed)


def test_collisions_pick_another_name(fs: FakeFilesystem, monkeypatch: pytest.MonkeyPatch) -> None:
    parent = Path("/plans")
    fs.create_file(parent / "gentle-breeze" / "report.md", contents="earlier run")
    monkeypatch.setattr(names, "random_name", lambda: "gentle-breeze")
    claimed = claim_directory(parent)
    assert claimed.name.startswith("gentle-breeze-")
    assert (parent / "gentle-breeze" / "report.md").read_text() == "earlier run"


def test_gives_up_with_a_clear_error(fs: FakeFilesystem, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(names, "random_name", lambda: "gentle-breeze")
    monkeypatch.setattr(secrets, "randbelow", lambda _: 7)
    fs.create_dir("/plans/gentle-breeze")
    fs.create_dir("/plans/gentle-breeze-7")
    with pytest.raises(FileExistsError, match="could not find a free name"):
        claim_directory(Path("/plans"))
