"""The web grant: what its entries mean, where it comes from (the user's file, flags,
the environment), that a project file can only narrow it, and what it offers."""

from __future__ import annotations

import ipaddress
from pathlib import Path

import pytest
from pyfakefs.fake_filesystem import FakeFilesystem

from sandbox_runner.batch.setup import batch_jobs, prepare_tasks
from sandbox_runner.batch.tasks_file import load_batch_file
from sandbox_runner.config import load_settings
from sandbox_runner.errors import ConfigError
from sandbox_runner.web_grant import GrantError, WebGrant, granted, offered, parse_entry

HOME = Path("/home/dev/.planrun")
REPO = Path("/work/repo")


@pytest.mark.parametrize(
    ("entry", "normalised"),
    [
        ("Docs.Python.org.", "docs.python.org"),
        ("*.ReadTheDocs.io", "*.readthedocs.io"),
        ("127.0.0.1", "127.0.0.1"),
        ("[::1]", "::1"),
        ("10.1.0.0/16", "10.1.0.0/16"),
        ("bücher.example", "xn--bcher-kva.example"),
    ],
)
def test_entries_are_normalised(entry: str, normalised: str) -> None:
    assert parse_entry(entry) == normalised


@pytest.mark.parametrize(
    ("entry", "problem"),
    [
        ("https://docs.python.org", "give the host alone"),
        ("docs.python.org/3/", "leave out the path"),
        ("docs.python.org:443", "leave out the path and the port"),
        ("*", "not a valid host name"),
        ("docs.*.org", "a wildcard may only start it"),
        ("*.io", "a whole top-level domain"),
        ("user@host.org", "give the host alone"),
    ],
)
def test_bad_entries_say_what_is_wrong(entry: str, problem: str) -> None:
    with pytest.raises(GrantError, match=problem):
        parse_entry(entry)


def test_a_host_matches_itself_and_a_wildcard_only_its_subdomains() -> None:
    grant = WebGrant.of(["docs.python.org", "*.readthedocs.io", "127.0.0.1"])
    assert grant.allows_host("DOCS.python.org.")
    assert not grant.allows_host("python.org") and not grant.allows_host("evil-docs.python.org")
    assert grant.allows_host("requests.readthedocs.io")
    assert grant.allows_host("a.b.readthedocs.io")
    assert not grant.allows_host("readthedocs.io")
    assert not grant.allows_host("readthedocs.io.evil.com")
    assert not grant.allows_host("evilreadthedocs.io")
    assert grant.allows_host("127.0.0.1") and not grant.allows_host("127.0.0.2")
    assert grant.names_address(ipaddress.ip_address("::ffff:127.0.0.1"))


def test_web_search_gets_the_granted_domains_and_needs_one() -> None:
    grant = WebGrant.of(["docs.python.org", "*.readthedocs.io", "127.0.0.1"])
    assert grant.search_domains() == ["docs.python.org", "readthedocs.io"]
    names = ["Read", "WebFetch", "WebSearch"]
    assert offered(names, grant) == names
    assert offered(names, WebGrant()) == ["Read"]
    assert offered(names, WebGrant.of(["127.0.0.1"])) == ["Read", "WebFetch"]


def test_allow_web_flags_add_to_the_setting_and_a_bad_one_is_named() -> None:
    grant = granted(["docs.python.org"], ["127.0.0.1", "docs.python.org"])
    assert grant.entries == ("docs.python.org", "127.0.0.1")
    with pytest.raises(ConfigError, match=r"^--allow-web 'http://x.org' is not a host name"):
        granted([], ["http://x.org"])


def user_and_project(fs: FakeFilesystem, user: str | None, project: str | None) -> None:
    fs.create_dir(REPO)
    if user is not None:
        fs.create_file(HOME / "config.yaml", contents=user)
    if project is not None:
        fs.create_file(REPO / ".planrun" / "config.yaml", contents=project)


def test_the_user_file_grants_and_a_project_may_narrow(fs: FakeFilesystem) -> None:
    user_and_project(
        fs,
        'web:\n  allow: [docs.python.org, "*.readthedocs.io"]\n',
        "web: {allow: [requests.readthedocs.io]}\n",
    )
    loaded = load_settings(REPO, env={}, home=HOME)
    assert loaded.settings.web == ["requests.readthedocs.io"]
    assert loaded.sources["web"] == str(REPO / ".planrun" / "config.yaml")


@pytest.mark.parametrize(
    ("user", "project", "added"),
    [
        (None, "web: {allow: [docs.python.org]}\n", "docs.python.org"),
        ("web: {allow: [docs.python.org]}\n", "web: {allow: [evil.example]}\n", "evil.example"),
        ("web: {allow: [docs.python.org]}\n", "web: {allow: ['*.python.org']}\n", "*.python.org"),
        ("web: {allow: ['10.0.0.0/8']}\n", "web: {allow: ['0.0.0.0/0']}\n", "0.0.0.0/0"),
    ],
)
def test_a_project_cannot_widen_the_grant(
    fs: FakeFilesystem, user: str | None, project: str, added: str
) -> None:
    user_and_project(fs, user, project)
    with pytest.raises(ConfigError) as caught:
        load_settings(REPO, env={}, home=HOME)
    message = str(caught.value)
    assert f"key 'web' grants {added}, but a project config may only narrow" in message


def test_the_environment_grants_hosts_and_bad_values_are_one_line(fs: FakeFilesystem) -> None:
    user_and_project(fs, None, None)
    loaded = load_settings(REPO, env={"PLANRUN_WEB": "docs.python.org, *.rtfd.io"}, home=HOME)
    assert loaded.settings.web == ["docs.python.org", "*.rtfd.io"]
    fs.create_file(HOME / "config.yaml", contents="web: {allow: [x.org], deny: [y.org]}\n")
    with pytest.raises(ConfigError, match="must be a mapping with one key, allow"):
        load_settings(REPO, env={}, home=HOME)


def test_a_batchs_allow_web_reaches_every_job_and_its_fingerprint(
    tmp_path: Path, sample_repo: Path
) -> None:
    batch_path = tmp_path / "batch.yaml"
    batch_path.write_text("defaults: {repo: repo}\ntasks:\n  - {id: t1, requirements: r}\n")
    batch = load_batch_file(batch_path)
    [plain] = batch_jobs(prepare_tasks(batch, batch.tasks, None, lambda _: None), None)
    [web] = batch_jobs(
        prepare_tasks(batch, batch.tasks, None, lambda _: None, ("127.0.0.1",)), None
    )
    assert not plain.payload.web and web.payload.web.entries == ("127.0.0.1",)
    # A granted job can read more than its ungranted run did: it is another job.
    assert web.fingerprint != plain.fingerprint
