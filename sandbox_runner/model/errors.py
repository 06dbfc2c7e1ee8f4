"""Errors of the model layer: API failures, context overflows and bad cassettes."""

from __future__ import annotations

import json
import re
from pathlib import Path

from sandbox_runner.errors import PlanrunError

# What a user is told, and what to do about it, for errors that a retry cannot fix.
FAIL_AT_ONCE = {
    400: ("the Anthropic API rejected the request", ""),
    401: ("the API key was rejected", "check ANTHROPIC_API_KEY"),
    403: ("the API key is not allowed to make this request", ""),
    404: ("the model or endpoint was not found", "check the model name and ANTHROPIC_BASE_URL"),
}
_PROMPT_TOO_LONG = re.compile(r"prompt is too long:\s*(\d+)\s*tokens\s*>\s*(\d+)")


class ModelError(PlanrunError):
    """The model could not answer; `status` is the HTTP status when there was one."""

    def __init__(self, message: str, *, status: int | None = None, attempts: int = 1) -> None:
        self.status = status
        self.attempts = attempts
        super().__init__(message)


class ModelAPIError(ModelError):
    """The Messages API refused the request or kept failing until retries ran out."""

    def __init__(
        self,
        summary: str,
        *,
        status: int | None = None,
        error_type: str | None = None,
        api_message: str | None = None,
        attempts: int = 1,
        hint: str = "",
    ) -> None:
        self.summary = summary
        self.error_type = error_type
        self.api_message = api_message
        detail = " ".join(part for part in (str(status or ""), error_type or "") if part)
        if api_message:
            detail = f"{detail}: {api_message}" if detail else api_message
        # Keep the message to one line whatever the API put in its error text.
        detail = " ".join(detail.split())
        message = summary + (f" ({detail})" if detail else "")
        if attempts > 1:
            message += f", gave up after {attempts} attempts"
        if hint:
            message += f"; {hint}"
        super().__init__(message, status=status, attempts=attempts)


class MalformedAnswerError(ModelAPIError):
    """The model itself kept answering with something that cannot be read (tool input
    that is not JSON): the conversation, not the API, is at fault."""


class ModelRefusal(ModelError):
    """The API stopped the model's answer as a refusal (stop_reason `refusal`), with the
    policy category and the explanation it gave, when it gave them."""

    def __init__(self, category: str | None, explanation: str | None) -> None:
        self.category = category
        self.explanation = explanation
        about = f" (category {category})" if category else ""
        why = f": {' '.join(explanation.split())}" if explanation else ""
        super().__init__(f"the API stopped the model's answer as a refusal{about}{why}")

    @classmethod
    def of(cls, stop_details: dict[str, object] | None) -> ModelRefusal:
        """The refusal an answer's stop_details describe (None or partial: what there is)."""
        details = stop_details or {}
        category, explanation = details.get("category"), details.get("explanation")
        return cls(
            category if isinstance(category, str) else None,
            explanation if isinstance(explanation, str) else None,
        )


def unreadable_response(error: Exception) -> ModelAPIError:
    """The error for an answer that is not JSON, or not shaped like a Messages API response."""
    if isinstance(error, json.JSONDecodeError):
        what = f"is not valid JSON ({error.msg} at line {error.lineno}, column {error.colno})"
    else:
        detail = " ".join(str(error).split())[:200]
        what = f"is not a Messages API response ({type(error).__name__}: {detail})"
    return ModelAPIError(
        f"the API's answer {what}",
        hint="check that ANTHROPIC_BASE_URL names an Anthropic-compatible endpoint",
    )


class ContextBudgetError(ModelError):
    """The request does not fit in the model's context window."""

    def __init__(self, input_tokens: int | None, limit: int | None) -> None:
        self.input_tokens = input_tokens
        self.limit = limit
        size = f": {input_tokens} input tokens > {limit} allowed" if input_tokens and limit else ""
        super().__init__(
            f"the request is too large for the model's context window{size}; "
            "shorten the system prompt, the task or the attached files",
            status=400,
        )


def api_status_error(
    status: int, error_type: str | None, api_message: str | None, attempts: int
) -> ModelError:
    """The error for an HTTP error of the API (or an error event in a stream, after its
    200) that is not retried: a request too large for the context window, or the API's
    refusal or failure, with what to do about it."""
    too_long = _PROMPT_TOO_LONG.search(api_message or "")
    if status == 400 and too_long:
        return ContextBudgetError(int(too_long.group(1)), int(too_long.group(2)))
    if status == 400 and "too long" in (api_message or ""):
        return ContextBudgetError(None, None)
    summary, hint = FAIL_AT_ONCE.get(status, ("the Anthropic API failed", ""))
    return ModelAPIError(
        summary,
        # An error event inside a stream arrives after a 200, which would mislead.
        status=status if status >= 400 else None,
        error_type=error_type,
        api_message=api_message,
        attempts=attempts,
        hint=hint,
    )


class CassetteError(ModelError):
    """A recorded conversation is missing, malformed, exhausted or no longer lines up."""

    def __init__(
        self,
        path: Path,
        problem: str,
        *,
        line: int | None = None,
        exchange: int | None = None,
    ) -> None:
        self.path = path
        self.problem = problem
        self.line = line
        self.exchange = exchange
        where = f" line {line}" if line is not None else ""
        where += f" exchange {exchange}" if exchange is not None else ""
        # "cassette x.jsonl has no more responses" reads as a sentence; a located
        # problem reads better after a colon.
        separator = ": " if where else " "
        super().__init__(f"cassette {path}{where}{separator}{problem}")
