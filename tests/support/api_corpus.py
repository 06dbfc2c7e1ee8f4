"""The recorded Messages API answers of tests/corpus/api, as the fake Messages API serves
them: a JSON Message (`*.json`), server-sent events as the API sent them (`*.sse`), or one
event's JSON a line (`*.chunks.txt`, the AI SDK's fixture format), turned into events."""

from __future__ import annotations

import json
from pathlib import Path

from tests.support.fake_messages_api import Raw, raw

CORPUS = Path(__file__).resolve().parent.parent / "corpus" / "api"


def corpus_files() -> list[str]:
    """The names of the recorded answers."""
    return sorted(path.name for path in CORPUS.iterdir() if path.name != "SOURCES.md")


def streamed(name: str) -> bool:
    """Whether the answer is a stream of events (served to a streaming request)."""
    return not name.endswith(".json")


def answer(name: str) -> Raw:
    """The recorded answer NAME as the fake Messages API sends it."""
    text = (CORPUS / name).read_text(encoding="utf-8")
    if name.endswith(".json"):
        return raw(text)
    if name.endswith(".chunks.txt"):
        events = [json.loads(line) for line in text.splitlines() if line.strip()]
        text = "".join(f"event: {event['type']}\ndata: {json.dumps(event)}\n\n" for event in events)
    return raw(text, content_type="text/event-stream; charset=utf-8")
