"""A plan as a file: Markdown with its metadata as YAML front matter."""

from __future__ import annotations

from typing import Any

import yaml

from sandbox_runner.redact import redact, redact_data

FRONT_MATTER_FENCE = "---"


def render_document(metadata: dict[str, Any], plan_text: str) -> str:
    """The plan file: YAML front matter, then the plan's Markdown as the model wrote it;
    what looks like a credential is redacted in both."""
    header = yaml.safe_dump(redact_data(metadata), sort_keys=False, allow_unicode=True, width=100)
    return f"{FRONT_MATTER_FENCE}\n{header}{FRONT_MATTER_FENCE}\n\n{document_body(plan_text)}"


def document_body(plan_text: str) -> str:
    """What the plan file of plan_text holds below its front matter, as split_document gives
    it back; what looks like a credential is redacted."""
    return redact(strip_front_matter(plan_text).strip()) + "\n"


def split_document(text: str) -> tuple[dict[str, Any], str]:
    """Front matter (empty when absent or invalid) and the Markdown body of a plan file."""
    if not text.startswith(FRONT_MATTER_FENCE + "\n"):
        return {}, text
    end = text.find(f"\n{FRONT_MATTER_FENCE}\n", len(FRONT_MATTER_FENCE))
    if end < 0:
        return {}, text
    try:
        metadata = yaml.safe_load(text[len(FRONT_MATTER_FENCE) + 1 : end])
    except yaml.YAMLError:
        return {}, text
    body = text[end + len(FRONT_MATTER_FENCE) + 2 :]
    return (metadata if isinstance(metadata, dict) else {}), body.lstrip("\n")


def strip_front_matter(text: str) -> str:
    """The Markdown body, without any front matter the model may have added itself."""
    return split_document(text)[1]
