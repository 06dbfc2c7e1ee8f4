"""The web tools' schemas, as Claude Code names and shapes them (offered only with a web
grant: web_grant.py)."""

from __future__ import annotations

from sandbox_runner.tools.output import MAX_RESULT_CHARS
from sandbox_runner.tools.schema_parts import string, tool

WEB_FETCH = tool(
    "WebFetch",
    "Fetches a web page and returns its content as Markdown (HTML converted; text and JSON "
    "as they are), headed by the prompt you gave, to read with that question in mind. Only "
    "hosts the user granted can be fetched, over http or https; a redirect to another host "
    "is not followed: the result names its target, which you may fetch with a new call if "
    f"it is granted. Results are cut at {MAX_RESULT_CHARS} characters. Use it to read "
    "library documentation, an API reference or an issue; it is read-only.",
    {
        "url": string("The URL to fetch content from (http or https)."),
        "prompt": string("What you want to find out from the page."),
    },
    "url",
    "prompt",
)

WEB_SEARCH = tool(
    "WebSearch",
    "Searches the web and returns the results (titles, URLs and what they say), limited to "
    "the hosts the user granted. Use it to find current documentation or known issues, "
    "then WebFetch a result to read it. It is read-only.",
    {
        "query": string("The search query to use (at least 2 characters)."),
        "allowed_domains": {
            "type": "array",
            "items": {"type": "string"},
            "description": "Only include search results from these domains.",
        },
        "blocked_domains": {
            "type": "array",
            "items": {"type": "string"},
            "description": "Never include search results from these domains.",
        },
    },
    "query",
)
