"""When a failed Messages API call is tried again, and after how long: the statuses and
error types worth another attempt, the server's retry-after, and backoff with jitter."""

from __future__ import annotations

import email.utils
import random
import time
from collections.abc import Mapping

RETRY_STATUSES = frozenset({429, 500, 502, 503, 504, 529})
# A stream that fails after its 200 carries the error type only.
RETRY_ERROR_TYPES = frozenset({"rate_limit_error", "api_error", "overloaded_error"})
OVERLOAD_STATUSES = frozenset({500, 502, 503, 504, 529})
OVERLOAD_ERROR_TYPES = frozenset({"api_error", "overloaded_error"})
MAX_RETRY_WAIT = 60.0
FIRST_RETRY_WAIT = 1.0
"""Backoff after a dropped connection or a 429 without retry-after: 1, 2, 4 ... 60 s."""
FIRST_OVERLOAD_WAIT = 5.0
"""Backoff after a 529 or 5xx: 5, 10, 20, 40, 60, 60 s, about three minutes in all, as an
overload of the API typically lasts a minute or two."""


def retryable(status: int, error_type: str | None) -> bool:
    """Whether an API error of STATUS (and ERROR_TYPE, from its body) is worth a retry."""
    return status in RETRY_STATUSES or error_type in RETRY_ERROR_TYPES


def overloaded(status: int, error_type: str | None) -> bool:
    """A 529 or 5xx (or such an error inside a stream): the API, not the request, is at fault."""
    return status in OVERLOAD_STATUSES or error_type in OVERLOAD_ERROR_TYPES


def retry_wait(attempt: int, *, retry_after: float | None = None, overload: bool = False) -> float:
    """Seconds before the next attempt: the server's retry-after, else backoff with jitter."""
    if retry_after is not None:
        return min(retry_after, MAX_RETRY_WAIT)
    first = FIRST_OVERLOAD_WAIT if overload else FIRST_RETRY_WAIT
    backoff = min(first * 2.0 ** (attempt - 1), MAX_RETRY_WAIT)
    # Jitter spreads out parallel subagents that all hit the same overload.
    return backoff * random.uniform(0.75, 1.0)


def overload_schedule(retries: int) -> list[float]:
    """The waits between attempts during an overload, before jitter (for docs/configuration.md)."""
    return [min(FIRST_OVERLOAD_WAIT * 2.0**n, MAX_RETRY_WAIT) for n in range(retries)]


def parse_retry_after(headers: Mapping[str, str]) -> float | None:
    """The wait a retry-after-ms or retry-after header asks for (seconds or an HTTP date)."""
    try:
        if "retry-after-ms" in headers:
            return max(0.0, float(headers["retry-after-ms"]) / 1000)
        value = headers.get("retry-after")
        if value is None:
            return None
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(headers.get("retry-after", ""))
    except (TypeError, ValueError):
        return None
    return max(0.0, when.timestamp() - time.time())
