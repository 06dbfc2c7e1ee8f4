"""Before the first model call: does the API take this key, and does it know this model?

One free request, `GET /v1/models/{id}` (no tokens, nothing billed), answers both: a 401
is a bad key, a `not_found_error` naming the model is an unknown model. Anything else
(a timeout, an overload, a compatible endpoint without the route) is no verdict: the
run goes on, and its own calls report what goes wrong.

The check is no Model's business, but it must reach the API the way a model call would
(the same key, token, profile and ANTHROPIC_BASE_URL): its client comes from the same
sdk_client.make_client, and only the SDK's error classes are read here.
"""

from __future__ import annotations

import difflib
import os
from dataclasses import dataclass

import anthropic

from sandbox_runner.catalog import MODEL_ALIASES
from sandbox_runner.model.sdk_client import error_object, has_credentials, make_client
from sandbox_runner.safe_text import one_line

ACCESS_CHECK_SECONDS = 10.0
"""How long the check waits for the API; a slower answer is no verdict."""
_LISTED_MODELS = 100


@dataclass(frozen=True)
class AccessProblem:
    """Why every model call would fail, said in one line (what to do included, but for
    how to choose another model, which the caller knows: `--model`, `/model`)."""

    message: str
    model_at_fault: bool = False
    """The model is unknown: the caller adds how to set another one."""
    suggestion: str | None = None
    """The known model id closest to the one asked for."""


def check_access(model_id: str, *, timeout: float = ACCESS_CHECK_SECONDS) -> AccessProblem | None:
    """Ask the API about MODEL_ID with this machine's credentials; None when it answers,
    or when it cannot be asked (no verdict)."""
    try:
        client = make_client(timeout=timeout)
    except anthropic.CredentialsError as error:
        return AccessProblem(f"the Anthropic credentials cannot be loaded: {one_line(error)}")
    with client:
        if not has_credentials(client):
            return AccessProblem(
                "ANTHROPIC_API_KEY is not set: export it (or ANTHROPIC_AUTH_TOKEN; "
                "ANTHROPIC_BASE_URL for a compatible endpoint)"
            )
        try:
            client.models.retrieve(model_id)
        except anthropic.AuthenticationError:
            variable = "ANTHROPIC_API_KEY" if client.api_key else "ANTHROPIC_AUTH_TOKEN"
            if not (client.api_key or client.auth_token):
                variable = "the credentials of ANTHROPIC_PROFILE"
            return AccessProblem(f"the API key was rejected (401){_where()}: check {variable}")
        except anthropic.PermissionDeniedError as error:
            reason = one_line(_api_message(error) or "permission denied")
            return AccessProblem(f"the API key may not use model {model_id!r} (403: {reason})")
        except anthropic.NotFoundError as error:
            return _unknown_model(client, model_id, error)
        except anthropic.APITimeoutError:
            return None
        except anthropic.APIConnectionError as error:
            url = client.base_url
            return AccessProblem(
                f"cannot reach the Anthropic API at {url} ({_cause(error)}): check the "
                "network, or ANTHROPIC_BASE_URL"
            )
        except anthropic.APIError:
            return None  # an overload, a 5xx, a proxy's answer: no verdict
    return None


def _unknown_model(
    client: anthropic.Anthropic, model_id: str, error: anthropic.NotFoundError
) -> AccessProblem | None:
    """A `not_found_error` about the model; None for a 404 of a route the endpoint lacks."""
    message = _api_message(error)
    if _error_type(error) != "not_found_error" or message is None:
        return None
    # The API says "model: ID"; a route the endpoint lacks names its path, ID and all.
    names_model = model_id in message and f"/{model_id}" not in message
    if not (message.startswith("model:") or names_model):
        return None
    suggestion = _closest(model_id, [m for m in _known_models(client) if m != model_id])
    guess = f": did you mean {suggestion}?" if suggestion else ""
    said = "" if message.startswith("model:") else f" ({one_line(message)})"
    return AccessProblem(
        f"the model {model_id!r} does not exist (404){said}{guess}",
        model_at_fault=True,
        suggestion=suggestion,
    )


def _known_models(client: anthropic.Anthropic) -> list[str]:
    """The model ids the API lists (the built-in aliases' ids when it lists none)."""
    try:
        listed = [model.id for model in client.models.list(limit=_LISTED_MODELS).data]
    except (anthropic.APIError, AttributeError, TypeError, ValueError):
        listed = []
    return listed or sorted(set(MODEL_ALIASES.values()))


def _closest(model_id: str, candidates: list[str]) -> str | None:
    """The candidate most like MODEL_ID, as the terminal may show it (the endpoint's text)."""
    matches = difflib.get_close_matches(model_id, candidates, n=1, cutoff=0.6)
    return one_line(matches[0]) if matches else None


def _error_type(error: anthropic.APIStatusError) -> str | None:
    kind = (error_object(error) or {}).get("type")
    return kind if isinstance(kind, str) else None


def _api_message(error: anthropic.APIStatusError) -> str | None:
    message = (error_object(error) or {}).get("message")
    return message.strip() if isinstance(message, str) else None


def _cause(error: anthropic.APIConnectionError) -> str:
    cause = error.__cause__
    return one_line(cause)[:120] if cause is not None else "no answer"


def _where() -> str:
    base_url = os.environ.get("ANTHROPIC_BASE_URL")
    return f" by {base_url}" if base_url else ""
