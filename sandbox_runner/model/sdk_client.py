"""The anthropic SDK's client, made one way for every caller, and what its errors say.

A model call (anthropic_model.py), the access check before a run (access.py) and the
warm-up all reach the API through make_client: the same key, token, profile and
ANTHROPIC_BASE_URL, and no retries of the SDK's own (planrun's are logged, capped and
reported). Only the model package imports `anthropic` (tests/unit/test_layers.py).
"""

from __future__ import annotations

from typing import Any

import anthropic
import httpx2  # the SDK's own HTTP library

CONNECT_SECONDS = 10.0
"""Longest wait for a connection, whatever the request's own timeout."""


def make_client(
    *,
    timeout: float,
    api_key: str | None = None,
    base_url: str | None = None,
    http_client: httpx2.Client | None = None,
) -> anthropic.Anthropic:
    """An SDK client with no retries of its own, waiting TIMEOUT seconds for an answer.

    Args:
        api_key: the API key; by default the SDK reads ANTHROPIC_API_KEY (or a token
            or profile).
        base_url: the API's URL; by default ANTHROPIC_BASE_URL or the public API.
        http_client: the SDK's HTTP client (a warm-up answers in memory).

    Raises:
        anthropic.CredentialsError: a broken ANTHROPIC_PROFILE or config directory.
    """
    return anthropic.Anthropic(
        api_key=api_key,
        base_url=base_url,
        max_retries=0,
        timeout=anthropic.Timeout(timeout, connect=min(timeout, CONNECT_SECONDS)),
        http_client=http_client,
    )


def has_credentials(client: anthropic.Anthropic) -> bool:
    """Whether CLIENT found an API key, a token or a profile."""
    return bool(client.api_key or client.auth_token or client.credentials)


def credentials_found() -> bool:
    """Whether the SDK finds an API key, a token or a profile here, as a model call would
    (nothing is sent, and nothing of the credentials is returned)."""
    try:
        client = make_client(timeout=CONNECT_SECONDS)
    except anthropic.AnthropicError:
        return False
    with client:
        return has_credentials(client)


def error_object(error: anthropic.APIStatusError) -> dict[str, Any] | None:
    """The `error` object of the API's error JSON (`{"type": ..., "message": ...}`);
    None when the body is something else (a proxy's page, no body)."""
    body = error.body
    details = body.get("error") if isinstance(body, dict) else None
    return details if isinstance(details, dict) else None
