"""What a dialect states about itself, so that the rules never need to know which one it is.

A dialect is one API's way of speaking: how its requests are recognised, how its bodies become
a Turn, how its stream is reassembled, how its tool loop is read, its strict subset and its
repairs. The defaults are OpenAI's, the rules tooltap began with; a dialect gives what differs.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from .. import parallel, schema
from ..arguments import ValidatorCache
from ..assembly import StreamAssembler
from ..loop import LoopReport
from ..records import Limits
from ..schema import SEED_LIMITS
from ..served import Served, ToolServer
from ..shapes import as_dict, as_list
from ..sockets import SocketReading
from ..turn import Api, Tool, Turn, tokens


def openai_blockers(value: Any, limits: Limits = SEED_LIMITS, *, tool: bool = True) -> list[str]:
    """OpenAI Structured Outputs' subset (tooltap.core.schema's rules): what keeps strict from
    holding. Pure."""
    return schema.schema_blockers(value, limits=limits) + schema.limit_problems(value, limits)


def openai_format_repairs(
    response: Mapping[str, Any], state: Any, loose: list[tuple[str, Any]], limits: Limits
) -> list[str]:
    """OpenAI's repair for an output-format state. Pure."""
    return schema.repair_lines(response, state, limits)


def fanout_repairs(way: str) -> Callable[[Any], list[str]]:
    """OpenAI's state repairs, where the provider documents no conflict between strict and
    parallel calls: a fan-out without strict is told this API's way to hold calls to their
    schemas. Pure."""

    def repairs(state: Any) -> list[str]:
        if state == "fanout-no-strict":
            return [
                "no schema guarantee was in place to lose. Validate tool arguments in your own "
                f"handler, or {way}"
            ]
        return parallel.repair_lines(state)

    return repairs


def advisory_tools_repairs(
    first: str, tool_blockers: Callable[[Any], list[str]]
) -> Callable[..., list[str]]:
    """The repairs of an advisory-tools format: make every tool strict (first), and for each
    loose tool (name, schema) what its provider's subset refuses in it. Pure."""

    def repairs(
        response: Mapping[str, Any], state: Any, loose: list[tuple[str, Any]], limits: Limits
    ) -> list[str]:
        if state != "advisory-tools":
            return []
        lines = [first]
        for name, parameters in loose:
            found = tool_blockers(parameters)
            if found:
                lines.append(f"strict: true on tool {name} needs these fixed first:")
                lines.extend(f"  {line}" for line in found)
        return lines

    return repairs


ARGUMENT_REPAIR = (
    "answer {calls} with an error result bound to the same call id rather than dropping the "
    "call, and keep the raw arguments for the post-mortem: a call left unanswered fails the "
    "next request."
)


def text_of(content: Any) -> str:
    """A message's text: a string, or its parts' text, a line each. Pure."""
    if isinstance(content, str):
        return content
    return "\n".join(
        text for part in as_list(content) if isinstance(text := as_dict(part).get("text"), str)
    )


def role_text(messages: Any, roles: tuple[str, ...] = ("system", "developer")) -> str:
    """The text of the messages with these roles, in order. Pure."""
    return "\n".join(
        text_of(message.get("content"))
        for message in as_list(messages)
        if isinstance(message, dict) and message.get("role") in roles
    )


def no_instructions(request: Mapping[str, Any]) -> str:
    return ""


def openai_usage(response: Mapping[str, Any]) -> dict[str, int]:
    """The usage OpenAI's APIs state, in the Responses spelling (input_tokens and their
    `_details`; the Realtime API's `_token_details`) or the Chat one (prompt_tokens,
    completion_tokens and their `_details`). Pure."""
    usage = response.get("usage")
    if not isinstance(usage, dict) or not usage:  # most turns of a stream, every error body
        return {}
    input_details = as_dict(
        usage.get("input_tokens_details", usage.get("input_token_details"))
        or usage.get("prompt_tokens_details")
    )
    output_details = as_dict(
        usage.get("output_tokens_details", usage.get("output_token_details"))
        or usage.get("completion_tokens_details")
    )
    return tokens(
        usage.get("input_tokens", usage.get("prompt_tokens")),
        usage.get("output_tokens", usage.get("completion_tokens")),
        input_details.get("cached_tokens"),
        output_details.get("reasoning_tokens"),
    )


Prior = Mapping[str, Sequence[str]] | None  # response id -> the calls it left open
# A tool server's reading: (request body, response body or assembled stream, the session so
# far, validators, the session's id) -> what the exchange said.
Serve = Callable[[Any, Any, ToolServer | None, ValidatorCache | None, str | None], Served]


@dataclass(frozen=True)
class Reading:
    """Who reads an exchange on a path several dialects share: a dialect, with the model the
    path names; or none, and why (said, and counted as not read). Neither: the path alone does
    not say, and the request body will."""

    api: Api | None = None
    model: str | None = None
    why: str | None = None


@dataclass(frozen=True)
class SharedPath:
    """A path that serves several dialects' bodies (Bedrock's InvokeModel serves each model
    family's own): the model it names, else the request body's own shape, says which dialect
    reads an exchange there, or why none does. Both fields are pure."""

    recognise: Callable[[str, str], bool]  # (method, path)
    # (path, the request body parsed, or None when not known yet) -> who reads it. Without a
    # body, what the path alone says; the proxy follows every exchange on such a path.
    reading: Callable[[str, Mapping[str, Any] | None], Reading]


@dataclass(frozen=True)
class Dialect:
    """One API's reading. Every field is pure."""

    api: Api
    recognise: Callable[[str, str], bool]  # (method, path): does an HTTP request speak it
    read_turn: Callable[[Mapping[str, Any], Mapping[str, Any]], Turn]
    assembler: Callable[[], StreamAssembler]
    check_loop: Callable[[Mapping[str, Any], Prior], LoopReport]
    finish_reasons: Callable[[Mapping[str, Any]], list[str]]
    blockers: Callable[..., list[str]] = openai_blockers
    state_repairs: Callable[[Any], list[str]] = parallel.repair_lines
    format_repairs: Callable[..., list[str]] = openai_format_repairs
    parallel_voids_strict: bool = True  # only OpenAI documents that parallel calls void strict
    argument_repair: str = ARGUMENT_REPAIR  # for calls with bad arguments ({calls}: their ids)
    socket: SocketReading | None = None  # how it is read off a WebSocket, if it speaks over one
    model_in_path: Callable[[str], str | None] | None = None  # where the body names none
    # A body that is not a turn yet (a background response), read later: (method, request,
    # status, stream read whole or not) -> whether to wait for it.
    unfinished: Callable[[str, Any, str | None, bool, bool], bool] | None = None
    # A path that asks for a stream whatever the content type (Gemini's JSON array stream).
    streams: Callable[[str], bool] | None = None
    # Its streams' framing where the content type does not name it: "ndjson" (Ollama's, which
    # ollama.com sends as application/json).
    framing: Literal["ndjson"] | None = None
    # Why a rejected request was refused, read from the request and its path, where the API
    # refuses schemas whatever strict says (Gemini's Schema fields); else from strict tools.
    request_blockers: Callable[[Mapping[str, Any], str], list[str]] | None = None
    # (method, request body): does a request no path names speak it (MCP, on any path)? Read
    # where no host list says (audit); the proxy asks only of hosts it is told about.
    recognise_body: Callable[[str, bytes], bool] | None = None
    # A tool server's protocol (MCP), not a model's: its exchanges are no turns.
    serve: Serve | None = None
    # The request's instructions to the model (system and developer text): what tells one
    # agent of an application from another, whose tools of one name may differ.
    instructions: Callable[[Mapping[str, Any]], str] = no_instructions
    # The tokens the response counts (tooltap.core.turn.tokens), as the API states them.
    usage: Callable[[Mapping[str, Any]], dict[str, int]] = openai_usage
    # Where the response restates the request's tools and its Turn reads them from there (the
    # Responses echo): the tools the request itself declared, the definitions the model read.
    declared_tools: Callable[[Mapping[str, Any]], list[Tool]] | None = None

    @classmethod
    def from_names(cls, names: Mapping[str, Any], **given: Any) -> Dialect:
        """A dialect read from its module's own names, as the module states it: a function named
        after a field (recognise, read_turn, check_loop, finish_reasons, instructions,
        blockers, ...) is that field, and the class Assembler is its assembler. `given` says
        the rest (api, settings, what it takes from another module) and wins over a name."""
        fields = {f.name for f in dataclasses.fields(cls)}
        found = {k: v for k, v in names.items() if k in fields and callable(v)}
        if "Assembler" in names:
            found["assembler"] = names["Assembler"]
        return cls(**(found | given))
