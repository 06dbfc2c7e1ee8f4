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
_PATTERNS: tuple[tuple[str, re.Pattern[str]], ...] = (
    ("github-token", re.compile(r"\b(?P<secret>gh[pousr]_[A-Za-z0-9]{20,}|github_pat_\w{20,})")),
    ("anthropic-key", re.compile(r"\b(?P<secret>sk-ant-[\w-]{10,})")),
    ("aws-access-key", re.compile(r"\b(?P<secret>(?:AKIA|ASIA)[A-Z0-9]{16})\b")),
    ("gitlab-token", re.compile(r"\b(?P<secret>glpat-[\w-]{20,})")),
    ("slack-token", re.compile(r"\b(?P<secret>xox[abeoprs]-[A-Za-z0-9-]{10,})")),
    (
        "authorization",
        re.compile(
            r"(?i)\b(?:authorization\s*:\s*(?:basic|bearer|token)\s+|bearer\s+(?=[\w.~+/=-]{16}))"
            r"(?P<secret>[\w.~+/=-]+)"
        ),
    ),
    (
        "url-password",
        re.compile(r"(?i)\b[a-z][a-z0-9+.-]*://[^/\s:@\"'\\]*:(?P<secret>[^/\s@\"'\\]+)@"),
    ),
    (
        "url-token",
        re.compile(
            r"(?i)[?&](?:\w*token|api_?key|client_secret|password)=(?P<secret>[^&#\s\"'\\]+)"
        ),
    ),
)


def redact(text: str) -> str:
    """text with every credential it seems to hold replaced by `[REDACTED:<kind>]`: GitHub,
    GitLab, Slack and Anthropic tokens, AWS access key ids, `Authorization:` header values
    (basic, bearer or token, as actions/checkout's `extraheader` holds), the password in a
    URL's user information, and `?private_token=`, `access_token=`, `token=` (and other
    `*token`, `api_key`, `password`) query values."""
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
