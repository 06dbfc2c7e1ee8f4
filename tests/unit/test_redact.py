"""What still looks like a credential is replaced before planrun writes a model's text."""

from __future__ import annotations

import json

import pytest
import yaml

from sandbox_runner.redact import redact, redact_data

GITHUB = "ghp_0123456789abcdefghijABCDEFGHIJ012345"


@pytest.mark.parametrize(
    ("written", "kept", "kind"),
    [
        (f"token: {GITHUB}.", "token: ", "github-token"),
        ("gho_0123456789abcdefghijABCDEFGHIJ012345", "", "github-token"),
        ("github_pat_11ABCDEFG0123456789_abcdefghijklmnopqrstuvwxyz", "", "github-token"),
        ("\textraheader = AUTHORIZATION: basic eC1hY2Nlc3M6Z2hzX3g=", "basic ", "authorization"),
        ("-H 'Authorization: Bearer abc.def-ghi'", "Bearer ", "authorization"),
        ("ANTHROPIC_API_KEY=sk-ant-api03-AbCdEf_0123456789", "KEY=", "anthropic-key"),
        ("aws_access_key_id = AKIAIOSFODNN7EXAMPLE", "= ", "aws-access-key"),
        ("glpat-0123456789abcdefghij", "", "gitlab-token"),
        ("xoxb-1234567890-abcdefghij", "", "slack-token"),
        ("https://user:hunter2@example.com/r.git", "https://user:", "url-password"),
        ("https://gitlab.com/api/v4?private_token=s3cr3t&page=2", "private_token=", "url-token"),
        ("https://h/cb#x?access_token=s3cr3t", "access_token=", "url-token"),
        ("https://h/file?token=s3cr3t", "?token=", "url-token"),
    ],
)
def test_each_kind_of_credential_is_replaced_and_its_context_kept(
    written: str, kept: str, kind: str
) -> None:
    redacted = redact(written)
    assert f"[REDACTED:{kind}]" in redacted
    assert kept in redacted
    for secret in (GITHUB, "eC1hY2Nlc3M6Z2hzX3g=", "hunter2", "s3cr3t", "AKIAIOSFODNN7EXAMPLE"):
        assert secret not in redacted
    assert redact(redacted) == redacted


@pytest.mark.parametrize(
    "text",
    [
        "the bearer of bad news",
        "GitHub tokens start with ghp_ and are 40 characters long",
        "git clone https://github.com/org/repo.git and git@github.com:org/repo.git",
        "Authorization: see the docs",
        "https://example.com/search?q=token",
    ],
)
def test_ordinary_text_is_left_alone(text: str) -> None:
    assert redact(text) == text


def test_data_stays_valid_json_and_yaml_after_redaction() -> None:
    data = {"reason": f"push failed: {GITHUB}", "list": [f'"{GITHUB}"\n\\'], "n": 3}
    redacted = redact_data(data)
    assert GITHUB not in json.dumps(redacted)
    assert json.loads(json.dumps(redacted)) == redacted
    assert yaml.safe_load(yaml.safe_dump(redacted)) == redacted
    assert redacted["n"] == 3 and redacted["reason"].startswith("push failed: [REDACTED")


@pytest.mark.parametrize(
    "secret",
    [
        "npm_" + "a1" * 18,
        "pypi-" + "A" * 60,
        "AIza" + "B" * 35,
        "-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXk\n-----END OPENSSH PRIVATE KEY-----",
        "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.c2lnbmF0dXJlMTIz",
        "sk-proj-" + "x" * 40,
        "sk_live_" + "x" * 24,
        "hf_" + "x" * 34,
        "x-api-key: abcdefgh12345",
        "PRIVATE-TOKEN: abcdefghijk",
        "https://ghp_" + "A" * 36 + "@github.com/x",
        "https://" + "0123456789abcdef" * 2 + "@example.com/x.git",
        "\\nghp_" + "A" * 36,
        "https://hooks.slack.com/services/T000/B000/XXXXXXXXXXXXXXXXXXXX",
        "aws_secret_access_key = " + "A" * 40,
        "glrt-" + "a" * 20,
    ],
)
def test_more_credential_kinds_are_redacted_once(secret: str) -> None:
    redacted = redact(secret)
    assert "[REDACTED:" in redacted and redact(redacted) == redacted
