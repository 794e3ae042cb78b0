"""Model APIs tooltap knows of and does not read, by path: an exchange on one of them is said
as what it is, and that it is not read. A path that is none of these is said as one tooltap does
not read, never as one that calls no tools: nothing here knows that it does not.
"""

from __future__ import annotations

import re

NOT_READ = "not an endpoint tooltap reads"
_NO_CALLS = "it makes no tool calls, and is not read"
_CALLS = "it calls tools, and tooltap does not read it"
_UNREAD_TURNS = "the turns it holds are not read here"

# (a path's end, what is there): the first that matches says it. The paths the dialects read
# (a POST to …/chat/completions, …/v2/chat, …/messages, …) never reach this list.
KNOWN: tuple[tuple[re.Pattern[str], str], ...] = tuple(
    (re.compile(pattern), said)
    for pattern, said in (
        (r"/v1/chat$", f"Cohere's v1 chat (/v1/chat): {_CALLS} (its v2 chat, /v2/chat, is read)"),
        (r"/v[12]/embed$", f"Cohere's embed (embeddings): {_NO_CALLS}"),
        (r"/v[12]/rerank$", f"Cohere's rerank: {_NO_CALLS}"),
        (r"/v1/(?:generate|summarize|classify|tokenize|detokenize)$", f"Cohere's v1 API: {_NO_CALLS}"),
        (r"/threads(?:/.*)?$", f"OpenAI's Assistants API (threads and runs): {_CALLS}"),
        (r"/embeddings$", f"embeddings (OpenAI's API and those compatible with it): {_NO_CALLS}"),
        (r"/chat/completions(?:/.*)?$", f"stored Chat Completions, read back: {_UNREAD_TURNS}"),
        (r"/completions$", f"legacy text completions (/completions): {_NO_CALLS}"),
        (r"/v1/complete$", f"Anthropic's legacy Text Completions (/v1/complete): {_NO_CALLS}"),
        (r"/messages/count_tokens$", f"Anthropic's token count: {_NO_CALLS}"),
        (r"/messages/batches(?:/.*)?$", f"Anthropic's Message Batches: {_UNREAD_TURNS}"),
        (r"/batches(?:/.*)?$", f"a batch API (/batches): {_UNREAD_TURNS}"),
        (r":(?:countTokens|embedContent|batchEmbedContents)$", f"Gemini's token count or embeddings: {_NO_CALLS}"),
        (r"/models(?:/[^/:]+)?$", f"a model list or a model's details: {_NO_CALLS}"),
        (r"/moderations$", f"OpenAI's moderations: {_NO_CALLS}"),
        (r"/audio/.+$", f"OpenAI's audio API: {_NO_CALLS}"),
        (r"/images/.+$", f"OpenAI's images API: {_NO_CALLS}"),
        (r"/(?:files|uploads)(?:/.*)?$", f"OpenAI's files and uploads: {_NO_CALLS}"),
        (r"/(?:fine_tuning|vector_stores)(?:/.*)?$", f"OpenAI's fine-tuning or vector stores: {_NO_CALLS}"),
    )
)  # fmt: skip


def unread_reason(path: str) -> str:
    """Why an exchange on this path is not read: the API it is, or that it is none tooltap
    reads. Pure."""
    return next((said for pattern, said in KNOWN if pattern.search(path)), NOT_READ)
