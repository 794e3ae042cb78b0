"""Amazon Bedrock's InvokeModel: `POST /model/{modelId}/invoke` and `/invoke-with-response-stream`.

One path, many bodies: InvokeModel carries each model family's own request and response (the
AWS user guide's "Inference request parameters and response fields for foundation models"), and
its stream wraps each of the family's own stream events in a `chunk` (base64 under `bytes`). So
this module reads no body itself: it says which dialect reads an exchange, or why none
does.

The model id says the family: plain (`amazon.nova-pro-v1:0`), URL-encoded (`%3A`), behind a
cross-region profile (`us.`, `eu.`, `apac.`, `global.`, ...) or inside an ARN that names a
model (`foundation-model/...`, `inference-profile/...`, `custom-model/{base model}/...`). An
application inference profile, a provisioned or an imported model names none: there the
request body's own shape says (a Messages body carries `anthropic_version`; a Converse-shaped
body has content blocks keyed by kind, `toolConfig` or `inferenceConfig`; a Chat Completions
body has `messages` of roles and text or typed parts).

What each family's InvokeModel body is, as AWS documents it, and how it is read:
- Anthropic Claude: a Messages body (`anthropic_version`), read by the Messages dialect. Claude
  2.x and Instant also take the legacy Text Completions body (`prompt` as `\\n\\nHuman: ...`,
  `max_tokens_to_sample`; answered with `completion` and `stop_reason`): no tools, and no
  Messages turn, so it is not read (reading it as Messages would call every stream cut short).
- Amazon Nova (Micro, Lite, Pro, Premier, Nova 2): the Converse shape ("the Invoke API supports
  the same features as the Converse API"), its stream's chunks each one Converse stream event
  (`{"contentBlockDelta": {...}}`): read by the Converse dialect. Nova Canvas, Reel and Sonic,
  and the embeddings, are media and vectors, with no tool calls on InvokeModel.
- OpenAI gpt-oss: a Chat Completions body and response ("In an InvokeModel or OpenAI Chat
  Completions request, include the fields in the request body"), read by the Chat dialect, its
  stream's chunks each a `chat.completion.chunk`.
- AI21 Jamba: a Chat Completions-shaped body (`messages`) answered by `choices` with `message`
  or, streamed, `delta` and `finish_reason`: read by the Chat dialect.
- Mistral AI: chat bodies (`messages`, `tools` as Chat declares them) answered unstreamed with
  `choices[].message.tool_calls` and `stop_reason`, read by the Chat dialect; what their stream
  sends AWS does not document, so a chat stream is not read rather than misread. Text
  completion bodies (`prompt`) have no tool calls.
- Not read, each said with why: Titan Text (`inputText`), Cohere Command (`prompt`) and Command
  R (tool calls in Cohere's own chat shape, without call ids), Meta Llama and DeepSeek-R1
  (a `prompt` and its generation: tools, if any, are text inside the prompt), AI21 Jurassic-2,
  embeddings, rerankers, and image and video models.
- Any other id is read by its body's shape as an application profile's is.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from typing import Any
from urllib.parse import unquote

from ..shapes import as_dict, as_list, as_str
from ..turn import APIS, Api
from .base import Reading, SharedPath

Said = Api | str  # the dialect that reads a body, or why none does
Read = Callable[[Mapping[str, Any] | None, bool], Said]  # (request body, streamed) -> Said

# The model id is one path segment, its `:` and an ARN's `/` percent-encoded (botocore quotes
# it); an ARN sent with its slash unencoded is taken whole.
_PATH = re.compile(
    r"/model/(?P<model>arn(?::|%3A)[^?]+?|[^/]+)/(?P<operation>invoke|invoke-with-response-stream)$",
    re.IGNORECASE,
)
# Cross-region inference profiles put a geography before the model id.
_REGION = re.compile(r"^(?:us|us-gov|eu|apac|ap|jp|au|ca|global)\.", re.IGNORECASE)
# ARN resources that name a model (a base model's id comes first), and those that do not.
_ARN = re.compile(
    r"^arn:aws[\w-]*:bedrock:[^:]*:[^:]*:"
    r"(?:foundation-model|inference-profile|custom-model|default-prompt-router|prompt-router)"
    r"/(?P<model>[^/]+)"
)

ON = "on InvokeModel"
TEXT_COMPLETIONS = (
    f"Anthropic Text Completions {ON} (prompt and completion): no tools, and no Messages turn"
)
NO_SHAPE = f"{ON}, a model id that names no family and a body of no shape tooltap reads"
_NO_CALLS = "no tool calls"


def model_id(path: str) -> str | None:
    """The model id (or profile, or ARN) an InvokeModel path names, decoded. Pure."""
    found = _PATH.search(path)
    if found is None:
        return None
    model = found["model"]
    for _ in range(3):  # some clients encode the id twice
        decoded = unquote(model)
        if decoded == model:
            break
        model = decoded
    return model


def family_id(model: str) -> str:
    """The foundation model id behind a model id, a cross-region profile or an ARN that names
    one; "" for an ARN that names none (application profiles, provisioned, imported). Pure."""
    if model.lower().startswith("arn:"):
        found = _ARN.match(model)
        if found is None:
            return ""
        model = found["model"]
    return _REGION.sub("", model).lower()


def recognise(method: str, path: str) -> bool:
    """POST /model/{modelId}/invoke and /invoke-with-response-stream. Pure."""
    return method.upper() == "POST" and _PATH.search(path) is not None


# --- the body's own shape ----------------------------------------------------------------------

_CONVERSE_BLOCKS = frozenset(
    {"text", "image", "video", "audio", "document", "toolUse", "toolResult",
     "reasoningContent", "cachePoint", "guardContent"}
)  # fmt: skip


def _contents(request: Mapping[str, Any]) -> list[Any]:
    return [as_dict(m).get("content") for m in as_list(request.get("messages"))]


def _converse_shaped(request: Mapping[str, Any]) -> bool:
    """Nova's body: content blocks keyed by their kind (no `type`), or Converse's own fields."""
    if request.get("schemaVersion") == "messages-v1" or any(
        key in request for key in ("toolConfig", "inferenceConfig")
    ):
        return True
    blocks = [as_dict(b) for content in _contents(request) for b in as_list(content)]
    return bool(blocks) and all("type" not in b and set(b) & _CONVERSE_BLOCKS for b in blocks)


def _chat_shaped(request: Mapping[str, Any]) -> bool:
    """A Chat Completions body: messages of roles, each content text or typed parts."""
    contents = _contents(request)
    return bool(contents) and all(
        content is None
        or isinstance(content, str)
        or all("type" in as_dict(part) for part in as_list(content))
        for content in contents
    )


def by_shape(request: Mapping[str, Any] | None) -> Said:
    """The dialect a body's own shape is, or why it is read by none. Pure."""
    if request is None:
        return NO_SHAPE
    if "anthropic_version" in request:
        return "messages"
    if "messages" not in request and "prompt" in request:
        if "max_tokens_to_sample" in request or "\n\nHuman:" in as_str(request.get("prompt")):
            return TEXT_COMPLETIONS
        return f"a text completion body {ON} (prompt): no tool calls"
    if _converse_shaped(request):
        return "converse"
    if _chat_shaped(request):
        return "chat"
    if "inputText" in request:
        return f"Amazon Titan Text {ON} (inputText): {_NO_CALLS}"
    if "message" in request:
        return f"Cohere Command R {ON}: tool calls in Cohere's own chat shape, not read"
    return NO_SHAPE


# --- the families ------------------------------------------------------------------------------


def _anthropic(request: Mapping[str, Any] | None, streamed: bool) -> Said:
    """Messages, unless the body is the legacy Text Completions one."""
    if request is not None and "messages" not in request and "prompt" in request:
        return TEXT_COMPLETIONS
    return "messages"


def _mistral(request: Mapping[str, Any] | None, streamed: bool) -> Said:
    """A chat body answered whole is Chat's shape; its stream and text completions are not."""
    if request is not None and "messages" not in request:
        return f"Mistral AI text completion {ON} (prompt): {_NO_CALLS}"
    if streamed:
        return f"Mistral AI chat stream {ON}: its chunks' shape is not documented, not read"
    return "chat"


def _says(said: Said) -> Read:
    """A family read one way whatever its body."""
    return lambda request, streamed: said


# First match wins: (the foundation model ids, as a prefix pattern; how their body is read).
FAMILIES: tuple[tuple[re.Pattern[str], Read], ...] = tuple(
    (re.compile(pattern), read)
    for pattern, read in (
        (r"anthropic\.", _anthropic),
        (
            r"amazon\.nova-(?:canvas|reel|sonic)",
            _says(f"Amazon Nova media models {ON}: {_NO_CALLS}"),
        ),
        (r"amazon\.nova-.*embed", _says(f"embeddings {ON}: {_NO_CALLS}")),
        (r"amazon\.nova-", _says("converse")),
        (r"amazon\.titan-(?:text|tg1)", _says(f"Amazon Titan Text {ON} (inputText): {_NO_CALLS}")),
        (r"openai\.", _says("chat")),
        (r"ai21\.jamba", _says("chat")),
        (r"ai21\.", _says(f"AI21 Jurassic-2 {ON} (prompt): {_NO_CALLS}")),
        (r"mistral\.", _mistral),
        (
            r"cohere\.command-r",
            _says(f"Cohere Command R {ON}: tool calls in Cohere's own chat shape, not read"),
        ),
        (r"cohere\.command", _says(f"Cohere Command {ON} (prompt): {_NO_CALLS}")),
        (
            r"meta\.llama",
            _says(f"Meta Llama {ON} (prompt and generation): {_NO_CALLS} outside the prompt text"),
        ),
        (
            r"deepseek\.r1",
            _says(f"DeepSeek-R1 {ON} (prompt and generation): {_NO_CALLS} outside the prompt text"),
        ),
        (r"[\w-]+\.[\w-]*(?:embed|marengo)", _says(f"embeddings {ON}: {_NO_CALLS}")),
        (r"[\w-]+\.[\w-]*rerank", _says(f"reranking {ON}: {_NO_CALLS}")),
        (
            r"(?:amazon\.titan-image|stability\.|luma\.)",
            _says(f"image and video models {ON}: {_NO_CALLS}"),
        ),
    )
)


def reading(path: str, request: Mapping[str, Any] | None) -> Reading:
    """Who reads an InvokeModel exchange: the family its model id names, else its body's
    shape. Without the body, what the id alone says (nothing for an id naming no family). Pure."""
    model = model_id(path)
    if model is None:
        return Reading(why=NO_SHAPE)
    streamed = path.endswith("-stream")
    named = family_id(model)
    read = next((read for pattern, read in FAMILIES if named and pattern.match(named)), None)
    if read is None and request is None:
        return Reading(model=model)  # the body will say
    said = read(request, streamed) if read is not None else by_shape(request)
    if said in APIS:
        return Reading(api=said, model=model)
    return Reading(model=model, why=said)


SHARED = SharedPath(recognise=recognise, reading=reading)
