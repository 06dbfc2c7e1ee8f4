"""Estimated USD cost of model calls, from a small table of Claude list prices."""

from __future__ import annotations

from dataclasses import dataclass

from sandbox_runner.types import Usage

PRICES_AS_OF = "2026-01"
"""When the table below was last checked against Anthropic's published list prices."""

_PER_TOKEN = 1 / 1_000_000


@dataclass(frozen=True)
class Price:
    """List prices in USD per million tokens."""

    input: float
    output: float
    cache_write: float
    """Writing to the prompt cache with the 5-minute lifetime, the one planrun uses."""
    cache_read: float


# List prices as of PRICES_AS_OF, matched by the longest prefix of the model id. A cost
# computed from them is an estimate, not a bill: it ignores batch and priority discounts,
# long-context surcharges, 1-hour cache writes and negotiated rates, and the table ages.
# Opus 4.5 and later cost a third of Opus 4.0/4.1, so the older ids are listed explicitly.
_OPUS_4_0 = Price(15.0, 75.0, 18.75, 1.50)
_OPUS_4_5 = Price(5.0, 25.0, 6.25, 0.50)
_SONNET = Price(3.0, 15.0, 3.75, 0.30)
PRICES: dict[str, Price] = {
    "claude-opus-4-0": _OPUS_4_0,
    "claude-opus-4-1": _OPUS_4_0,
    "claude-opus-4-2025": _OPUS_4_0,  # claude-opus-4-20250514, the dated id of Opus 4.0
    "claude-opus-4": _OPUS_4_5,
    "claude-sonnet-4": _SONNET,
    "claude-3-7-sonnet": _SONNET,
    "claude-haiku-4": Price(1.0, 5.0, 1.25, 0.10),
    "claude-3-5-haiku": Price(0.80, 4.0, 1.0, 0.08),
}


def price_for(model: str) -> Price | None:
    """The list price of a model id, or None when no prefix in the table matches it."""
    model_id = model.strip().lower()
    prefixes = [prefix for prefix in PRICES if model_id.startswith(prefix)]
    return PRICES[max(prefixes, key=len)] if prefixes else None


def estimate_cost(model: str, usage: Usage) -> float | None:
    """Estimate what `usage` of `model` costs at list price, in USD.

    Args:
        model: the model id the calls went to, e.g. "claude-sonnet-4-5-20250929".
        usage: the tokens used.

    Returns:
        The estimated cost, or None for a model the table does not know (a replayed
        "scripted" model, a third-party endpoint).
    """
    price = price_for(model)
    if price is None:
        return None
    return _PER_TOKEN * (
        usage.input_tokens * price.input
        + usage.output_tokens * price.output
        + usage.cache_creation_input_tokens * price.cache_write
        + usage.cache_read_input_tokens * price.cache_read
    )
