"""What still looks like a credential, replaced before planrun writes text a model or a
repository produced (transcripts, plans, reports): `[REDACTED:<kind>]` in its place."""

from __future__ import annotations

import functools
import re
from typing import Any

__all__ = ["redact", "redact_data"]

# Each pattern keeps what it matched around the group `secret` and replaces that group, so
# a reader still sees which header or URL held a credential; the text it leaves redacts to
# itself again.
_START = r"(?:(?<![A-Za-z0-9])|(?<=\\[nrt]))"
"""Where a prefixed token may start: not inside a word (`\nghp_...` in escaped text too)."""

_PATTERNS: tuple[tuple[str, re.Pattern[str]], ...] = (
    (
        "private-key",
        re.compile(
            r"-----BEGIN [A-Z ]*PRIVATE KEY-----"
            r"(?P<secret>[\s\S]+?)-----END [A-Z ]*PRIVATE KEY-----"
        ),
    ),
    (
        "github-token",
        re.compile(_START + r"(?P<secret>gh[pousr]_[A-Za-z0-9]{20,}|github_pat_\w{20,})"),
    ),
    ("anthropic-key", re.compile(_START + r"(?P<secret>sk-ant-[\w-]{10,})")),
    ("openai-key", re.compile(_START + r"(?P<secret>sk-(?:proj-|svcacct-)?[A-Za-z0-9_-]{32,})")),
    ("stripe-key", re.compile(_START + r"(?P<secret>[sr]k_(?:live|test)_[A-Za-z0-9]{16,})")),
    ("aws-access-key", re.compile(_START + r"(?P<secret>(?:AKIA|ASIA)[A-Z0-9]{16})\b")),
    (
        "aws-secret-key",
        re.compile(r"(?i)aws_?secret_?access_?key\W{1,4}(?P<secret>[A-Za-z0-9/+=]{40})"),
    ),
    ("gitlab-token", re.compile(_START + r"(?P<secret>gl(?:pat|rt|dt|cbt|ptt|ft|imt)-[\w-]{20,})")),
    ("slack-token", re.compile(_START + r"(?P<secret>xox[abeoprs]-[A-Za-z0-9-]{10,})")),
    (
        "webhook",
        re.compile(
            r"(?i)https://(?:hooks\.slack\.com/services|discord(?:app)?\.com/api/webhooks)/"
            r"(?P<secret>[\w/-]{16,})"
        ),
    ),
    ("npm-token", re.compile(_START + r"(?P<secret>npm_[A-Za-z0-9]{36})")),
    ("pypi-token", re.compile(_START + r"(?P<secret>pypi-[A-Za-z0-9_-]{50,})")),
    ("google-api-key", re.compile(_START + r"(?P<secret>AIza[0-9A-Za-z_-]{35})")),
    ("huggingface-token", re.compile(_START + r"(?P<secret>hf_[A-Za-z0-9]{30,})")),
    (
        "jwt",
        re.compile(_START + r"(?P<secret>eyJ[\w-]{10,}\.eyJ[\w-]{10,}\.[\w-]{10,})"),
    ),
    (
        "authorization",
        re.compile(
            r"(?i)\b(?:authorization\s*:\s*(?:basic|bearer|token)\s+|bearer\s+(?=[\w.~+/=-]{16}))"
            r"(?P<secret>(?!\[REDACTED)[\w.~+/=-]+)"
        ),
    ),
    (
        "api-key-header",
        re.compile(
            r"(?i)\b(?:x-api-key|private-token|x-auth-token)\s*:\s*(?P<secret>[\w.~+/=-]{8,})"
        ),
    ),
    (
        "url-password",
        re.compile(r"(?i)\b[a-z][a-z0-9+.-]*://[^/\s:@\"'\\\[]*:(?P<secret>[^/\s\"'\\\[]+)@"),
    ),
    (
        "url-token",
        re.compile(r"(?i)\b[a-z][a-z0-9+.-]*://(?P<secret>[A-Za-z0-9_-]{20,})@"),
    ),
    (
        "url-token",
        re.compile(
            r"(?i)[?&](?:\w*token|api_?key|client_secret|password|sig)=(?P<secret>[^&#\s\"'\\]+)"
        ),
    ),
)


def redact(text: str) -> str:
    """text with every credential it seems to hold replaced by `[REDACTED:<kind>]`: GitHub,
    GitLab, Slack, npm, PyPI, Hugging Face, Anthropic, OpenAI, Stripe and Google keys and
    tokens, AWS access key ids and secret keys, private key blocks, JWTs, Slack and Discord
    webhooks, `x-api-key`/`PRIVATE-TOKEN` headers, `Authorization:` header values
    (basic, bearer or token, as actions/checkout's `extraheader` holds), the password in a
    URL's user information (or a token standing alone there), and `?private_token=`,
    `access_token=`, `token=` (and other `*token`, `api_key`, `password`) query values."""
    for kind, pattern in _PATTERNS:
        text = pattern.sub(functools.partial(_replaced, kind=kind), text)
    return text


def _replaced(match: re.Match[str], kind: str) -> str:
    start, end = match.span("secret")
    whole = match.group(0)
    offset = match.start()
    return whole[: start - offset] + f"[REDACTED:{kind}]" + whole[end - offset :]


def redact_data(value: Any) -> Any:
    """value with redact applied to every string in it (dict values, list and tuple items),
    for data written as JSON or YAML: the replacement never breaks its syntax."""
    if isinstance(value, str):
        return redact(value)
    if isinstance(value, dict):
        return {key: redact_data(item) for key, item in value.items()}
    if isinstance(value, list):
        return [redact_data(item) for item in value]
    if isinstance(value, tuple):
        return tuple(redact_data(item) for item in value)
    return value
