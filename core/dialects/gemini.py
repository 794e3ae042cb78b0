"""Google Gemini: `models/{model}:generateContent` and `:streamGenerateContent`, on the Gemini
API (generativelanguage.googleapis.com) and on Vertex AI (`.../publishers/google/models/...`).

The body names no model (the path does); a stream is SSE whose every event is a whole
GenerateContentResponse, or, without `?alt=sse`, one JSON array sent piece by piece.

What Google documents, and what is read from it:
- No tool declares strict. The function-calling modes ANY and VALIDATED "ensure function schema
  adherence": under them every callable declaration is read as strict; under AUTO (the default)
  none is. Google says nothing of parallel calls under those modes and offers no switch to turn
  them off, so a fan-out never voids the guarantee here (a finding Google does not document
  would be a false one). NONE is "equivalent to sending a request without any function
  declarations".
- A call's `args` is an object, never text: its raw arguments are its compact JSON, re-written
  here, so they always parse. They are validated against `parametersJsonSchema` as sent, or
  against `parameters` (Google's OpenAPI subset) turned into JSON Schema.
- A call with no `id` (Gemini 2.x, often) is named by its place among the turn's calls,
  `functionCall[i]`; in the loop, by its name, as Gemini pairs it.
- The loop as Gemini refuses it: the functionResponse parts of the contents right after a call
  content answer its calls, by id where both carry one, else by name in order ("the number of
  function response parts is equal to the number of function call parts"); responses that do
  not follow a call content answer nothing ("function response turn comes immediately after a
  function call turn"). Consecutive contents of one role are one turn, as the API reads them. A
  call followed by text and no response at all was accepted in recordings (gemini-2.0-flash):
  not reported. Gemini 3 refuses a replayed step of the current turn whose first functionCall
  part has lost its thoughtSignature.
- Field names are read in both spellings the API takes (camelCase and snake_case), and enums as
  names or as integers (`$alt=json;enum-encoding=int`).
"""

from __future__ import annotations

import functools
import itertools
import re
from collections.abc import Iterator, Mapping
from typing import Any
from urllib.parse import unquote

from ..arguments import unnamed_call
from ..assembly import StreamAssembler
from ..jsontext import dumps, loads
from ..loop import Checker, LoopReport, error_payload
from ..records import Limits
from ..schema import SEED_LIMITS
from ..shapes import as_dict, as_int, as_list, as_str
from ..turn import Tool, ToolCall, Turn, placeholder, plus, tokens
from .base import Dialect, Prior, fanout_repairs, text_of

_PATH = re.compile(
    r"/(?:(?:models|tunedModels)/(?P<model>[^/:]+)|endpoints/(?P<endpoint>[^/:]+))"
    r":(?P<operation>generateContent|streamGenerateContent)$"
)
_GEMINI_3 = re.compile(r"(?:^|/)gemini-3(?:[.-]|$)")
# Enums sent as integers (GAPIC clients' enum-encoding=int): only these values are sure.
_MODES = {1: "AUTO", 2: "ANY", 3: "NONE"}
_FINISH = {1: "STOP", 2: "MAX_TOKENS"}
_TYPES = {1: "string", 2: "number", 3: "integer", 4: "boolean", 5: "array", 6: "object", 7: "null"}


@functools.cache  # the names are the code's own: a bounded set
def _snake(name: str) -> str:
    return re.sub(r"(?<!^)([A-Z])", r"_\1", name).lower()


def field(value: Any, name: str) -> Any:
    """A field under its camelCase name or its snake_case one (the API reads both). Pure."""
    if not isinstance(value, dict):
        return None
    return value[name] if name in value else value.get(_snake(name))


def model_in_path(path: str) -> str | None:
    """The model (or endpoint) the path names. Pure."""
    found = _PATH.search(path)
    if found is None or ("/publishers/" in path and "/publishers/google/" not in path):
        return None
    return unquote(found["model"] or found["endpoint"])


def recognise(method: str, path: str) -> bool:
    """POST .../models/{model}:generateContent and :streamGenerateContent. Pure."""
    return method.upper() == "POST" and model_in_path(path) is not None


def streams(path: str) -> bool:
    """Does the path ask for a stream (whatever its content type says)? Pure."""
    return path.endswith(":streamGenerateContent")


# --- the schema: Google's OpenAPI subset as JSON Schema ------------------------------------------

# Schema's fields on the Gemini API; Vertex AI's add additionalProperties, ref and defs.
SCHEMA_FIELDS = frozenset(
    {
        "type", "format", "title", "description", "nullable", "enum", "items", "minItems",
        "maxItems", "properties", "required", "minProperties", "maxProperties", "minLength",
        "maxLength", "pattern", "example", "anyOf", "propertyOrdering", "default", "minimum",
        "maximum",
    }
)  # fmt: skip
VERTEX_FIELDS = SCHEMA_FIELDS | {"additionalProperties", "ref", "defs"}
_DROPPED = {"nullable", "propertyOrdering", "example"}  # said otherwise, or not a constraint


def _camel(name: str) -> str:
    head, *rest = name.split("_")
    return head + "".join(word.title() for word in rest)


def to_json_schema(node: Any) -> Any:
    """Google's Schema (upper-case or integer types, `nullable`, snake_case fields) as the JSON
    Schema it means. Pure; what is not a schema object is kept as it is."""
    if not isinstance(node, Mapping):
        return node
    out = dict(
        _converted(_camel(key) if "_" in key else key, value)
        for key, value in node.items()
        if (_camel(key) if "_" in key else key) not in _DROPPED
    )
    if field(node, "nullable") is True and isinstance(out.get("type"), str):
        out["type"] = [out["type"], "null"]
    return out


def _converted(name: str, value: Any) -> tuple[str, Any]:
    """One field of a Schema as JSON Schema says it."""
    if name == "type":
        kind = _TYPES.get(value, value) if isinstance(value, int) else value
        return name, kind.lower() if isinstance(kind, str) else kind
    if name == "properties":
        return name, {k: to_json_schema(v) for k, v in as_dict(value).items()}
    if name in ("items", "additionalProperties"):
        return name, to_json_schema(value)
    if name == "anyOf":
        return name, [to_json_schema(v) for v in as_list(value)]
    if name == "defs":
        return "$defs", {k: to_json_schema(v) for k, v in as_dict(value).items()}
    if name == "ref" and isinstance(value, str):  # Vertex's `ref` points into its `defs`
        return "$ref", value.replace("#/defs/", "#/$defs/", 1)
    return name, value


def schema_blockers(node: Any, fields: frozenset[str], path: str = "$") -> list[str]:
    """The keys of a Schema that are none of its fields: the API refuses them ("Invalid JSON
    payload received. Unknown name ..."). Pure."""
    if not isinstance(node, Mapping):
        return []
    found = [
        f"{path}: {key} is not a field of Gemini's Schema (JSON Schema goes in "
        "parametersJsonSchema)"
        for key in node
        if (_camel(key) if "_" in key else key) not in fields
    ]
    for key, value in node.items():
        name = _camel(key) if "_" in key else key
        if name == "properties":
            for prop, sub in as_dict(value).items():
                found += schema_blockers(sub, fields, f"{path}.{prop}")
        elif name in ("items", "additionalProperties"):
            found += schema_blockers(value, fields, f"{path}.{name}")
        elif name == "anyOf":
            for i, sub in enumerate(as_list(value)):
                found += schema_blockers(sub, fields, f"{path}.anyOf[{i}]")
    return found


# --- the turn --------------------------------------------------------------------------------


def _tool_entries(request: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    tools = field(request, "tools")
    return [as_dict(t) for t in (tools if isinstance(tools, list) else [tools]) if t]


def _declarations(request: Mapping[str, Any]) -> Iterator[Mapping[str, Any]]:
    for tool in _tool_entries(request):
        yield from map(as_dict, as_list(field(tool, "functionDeclarations")))


def _mode(request: Mapping[str, Any]) -> tuple[str, list[str] | None]:
    """functionCallingConfig: the mode, and the names it leaves callable. Unset, it is AUTO,
    or VALIDATED beside built-in tools or a structured output ("Default mode for tool
    combination")."""
    config = field(field(request, "toolConfig"), "functionCallingConfig")
    mode = field(config, "mode")
    mode = _MODES.get(mode, "") if isinstance(mode, int) else as_str(mode).upper()
    names = [as_str(n) for n in as_list(field(config, "allowedFunctionNames")) if as_str(n)]
    if mode == "NONE":
        return mode, []
    if not mode:
        built_in = any(
            set(map(_camel, t)) - {"functionDeclarations"} for t in _tool_entries(request)
        )
        mode = "VALIDATED" if built_in or _output_format(request).get("schema") else "AUTO"
    return mode, names if names and mode in ("ANY", "VALIDATED") else None


def _tools(request: Mapping[str, Any], strict: bool) -> list[Tool]:
    out = []
    for declaration in _declarations(request):
        name = as_str(declaration.get("name")).strip()
        if not name:
            continue
        as_json = field(declaration, "parametersJsonSchema")
        parameters = as_json if as_json is not None else field(declaration, "parameters")
        out.append(
            Tool(
                name=name,
                strict=strict,
                parameters=parameters if as_json is not None else to_json_schema(parameters),
                description=field(declaration, "description"),
            )
        )
    return out


def _output_format(request: Mapping[str, Any]) -> dict[str, Any]:
    """responseMimeType with responseJsonSchema or responseSchema: constrained decoding."""
    config = field(request, "generationConfig")
    if as_str(field(config, "responseMimeType")) not in ("application/json", "text/x.enum"):
        return {}
    as_json = field(config, "responseJsonSchema")
    schema = as_json if as_json is not None else to_json_schema(field(config, "responseSchema"))
    if schema is None:
        return {"type": "json_object"}
    return {"type": "json_schema", "schema": schema, "strict": True}


def _parts(response: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    """The first candidate's parts: the one a client acts on."""
    candidate = as_dict(next(iter(as_list(field(response, "candidates"))), {}))
    return [as_dict(p) for p in as_list(field(field(candidate, "content"), "parts"))]


def _kind(part: Mapping[str, Any]) -> str:
    if field(part, "thought") is True:
        return "thought"
    return next((_camel(k) for k in part if k not in _PART_META), "")


_PART_META = {"thought", "thoughtSignature", "thought_signature", "partMetadata",
              "part_metadata", "videoMetadata", "video_metadata"}  # fmt: skip


def read_turn(request: Mapping[str, Any], response: Mapping[str, Any]) -> Turn:
    mode, names = _mode(request)
    calls: list[ToolCall] = []
    types: list[str] = []
    for part in _parts(response):
        kind = _kind(part)
        if kind == "text" and not as_str(part.get("text")):
            continue  # an empty text part that only carries a signature
        types.append(kind)
        call = as_dict(field(part, "functionCall"))
        name = as_str(call.get("name")).strip()
        if "args" not in call and field(call, "partialArgs") is not None:
            call = {**call, "args": partial_args(field(call, "partialArgs"))}  # sent whole
        if name:
            calls.append(
                ToolCall(
                    call_id=as_str(call.get("id")) or placeholder("functionCall", len(calls)),
                    name=name,
                    type="function_call",
                    arguments_raw=dumps(call["args"]) if "args" in call else "",
                    arguments_missing="args" not in call,
                )
            )
    return Turn(
        api="gemini",
        model=as_str(field(response, "modelVersion")) or as_str(request.get("model")) or None,
        response_id=as_str(field(response, "responseId")) or None,
        tools=[] if mode == "NONE" else _tools(request, strict=mode in ("ANY", "VALIDATED")),
        output_format=_output_format(request),
        calls=calls,
        output_types=types,
        callable_names=names,
    )


def usage(response: Mapping[str, Any]) -> dict[str, int]:
    """usageMetadata: the prompt (cached content included), the candidates and the thoughts,
    which Gemini counts apart from them. Pure."""
    counted = as_dict(field(response, "usageMetadata"))
    thoughts = field(counted, "thoughtsTokenCount")
    return tokens(
        field(counted, "promptTokenCount"),
        plus(field(counted, "candidatesTokenCount"), thoughts),
        field(counted, "cachedContentTokenCount"),
        thoughts,
    )


def finish_reasons(response: Mapping[str, Any]) -> list[str]:
    """Each candidate's finishReason, by name. Pure."""
    out = []
    for candidate in map(as_dict, as_list(field(response, "candidates"))):
        reason = field(candidate, "finishReason")
        if isinstance(reason, int) and not isinstance(reason, bool):
            out.append(_FINISH.get(reason, str(reason)))
        elif as_str(reason):
            out.append(as_str(reason))
    return out


# --- the stream --------------------------------------------------------------------------------


class Assembler(StreamAssembler):
    """Stream chunks, each a whole GenerateContentResponse: the parts of each candidate are
    concatenated in order (a call arrives whole, in one chunk), consecutive plain text parts
    joined; the last chunk's finishReason ends the stream, and its usage and ids are kept.

    Vertex AI's streamed arguments (`streamFunctionCallArguments`) are put together as
    StreamedCalls says, into the object the same call holds unstreamed.
    """

    def __init__(self) -> None:
        super().__init__()
        self.candidates: dict[int, dict[str, Any]] = {}
        self.top: dict[str, Any] = {}
        self._streamed: dict[int, StreamedCalls] = {}  # per candidate

    def event(self, event: Mapping[str, Any]) -> None:
        if "error" in event:
            self.error(event)
            return
        for key in ("usageMetadata", "modelVersion", "responseId", "promptFeedback"):
            if field(event, key) is not None:
                self.top[key] = field(event, key)
        for candidate in map(as_dict, as_list(field(event, "candidates"))):
            index = as_int(candidate.get("index"))
            held = self.candidates.setdefault(index, {"content": {"role": "model", "parts": []}})
            streamed = self._streamed.setdefault(index, StreamedCalls())
            for part in map(as_dict, as_list(field(field(candidate, "content"), "parts"))):
                if not streamed.take(held["content"]["parts"], part):
                    _add(held["content"]["parts"], part)
                self.said |= any(field(part, k) for k in ("text", "functionCall", "partialArgs"))
            reason = field(candidate, "finishReason")
            if reason is not None:
                held["finishReason"] = reason
                self.done = True

    def result(self) -> dict[str, Any]:
        candidates = [{"index": index, **held} for index, held in sorted(self.candidates.items())]
        return {"candidates": candidates, **self.top}


def _add(parts: list[dict[str, Any]], part: Mapping[str, Any]) -> None:
    """A part in order; consecutive plain text parts joined."""
    if set(part) == {"text"} and parts and set(parts[-1]) == {"text"}:
        parts[-1] = {"text": as_str(parts[-1]["text"]) + as_str(part["text"])}
    else:
        parts.append(dict(part))


_STREAMING = {"willContinue", "will_continue", "partialArgs", "partial_args"}


class StreamedCalls:
    """Calls whose arguments stream (Vertex AI's `streamFunctionCallArguments`), part by part.

    A call opens with a part that names it: with `willContinue` (more parts follow), or with
    all of its `partialArgs` at once and no `willContinue`. Each `partialArgs` piece sets a
    value (stringValue, numberValue, boolValue, nullValue) at its JSON path; a string whose
    piece says `willContinue` goes on in the next piece at that path. A part without
    `willContinue` closes the call (often an empty `functionCall: {}`); a part naming another
    call closes it too. Pieces in a nameless part after a call closed are that call's (split
    over parts that said no `willContinue`).
    """

    def __init__(self) -> None:
        self.open: dict[str, Any] | None = None  # the call whose arguments are still coming
        self.last: dict[str, Any] | None = None  # the last call put together this way
        self.continued: set[str] = set()  # JSON paths whose string goes on

    def take(self, parts: list[dict[str, Any]], part: Mapping[str, Any]) -> bool:
        """A part carrying a piece of a streamed call: True when it was taken."""
        call = field(part, "functionCall")
        if not isinstance(call, Mapping) or "args" in call:
            return False
        going_on = field(call, "willContinue") is True
        pieces = [as_dict(p) for p in as_list(field(call, "partialArgs"))]
        name = as_str(call.get("name"))
        if self.open is not None and name and name != self.open.get("name"):
            self.open = None  # a new call began before the last one said it ended
        if self.open is None:
            if name and (going_on or pieces):
                self.open = {k: v for k, v in call.items() if k not in _STREAMING} | {"args": {}}
                self.last, self.continued = self.open, set()
                parts.append({**part, "functionCall": self.open})
            elif not name and pieces and self.last is not None:
                self.open = self.last
            else:
                return False
        for piece in pieces:
            put_partial(self.open["args"], piece, self.continued)
        if not going_on:
            self.open = None
        return True


def partial_args(pieces: Any) -> dict[str, Any]:
    """The arguments object a call's `partialArgs` spell, all given at once. Pure."""
    args: dict[str, Any] = {}
    continued: set[str] = set()
    for piece in map(as_dict, as_list(pieces)):
        put_partial(args, piece, continued)
    return args


_VALUES = ("stringValue", "numberValue", "boolValue", "nullValue")
# RFC 9535 steps as the API writes them: .name, [index], ['name'] or ["name"].
_STEP = re.compile(
    r"\.(?P<name>[^.\[\]]+)|\[\s*(?P<index>\d+)\s*\]"
    r"|\[\s*(?P<quoted>'(?:[^'\\]|\\.)*'|\"(?:[^\"\\]|\\.)*\")\s*\]"
)


def json_path(path: str) -> list[str | int] | None:
    """The steps of a JSON path ($.a.b[0]['c d']); None for one that is not of that form. Pure."""
    if not path.startswith("$"):
        return None
    steps: list[str | int] = []
    at = 1
    while at < len(path):
        found = _STEP.match(path, at)
        if found is None:
            return None
        if found["name"] is not None:
            steps.append(found["name"])
        elif found["index"] is not None:
            steps.append(int(found["index"]))
        else:
            name = _unquote(found["quoted"])
            if name is None:
                return None
            steps.append(name)
        at = found.end()
    return steps or None


def _unquote(quoted: str) -> str | None:
    """A quoted name of a JSON path: JSON's escapes, and `\\'` in single quotes. Pure."""
    body = quoted[1:-1]
    if quoted[0] == "'":
        body = re.sub(r"\\'|\\.|\"", lambda m: {"\\'": "'", '"': '\\"'}.get(m[0], m[0]), body)
    value, error = loads(f'"{body}"')
    return value if error is None and isinstance(value, str) else None


def put_partial(args: dict[str, Any], piece: Mapping[str, Any], continued: set[str]) -> None:
    """One partialArg: its value set at its JSON path in args, a string continued where the
    last piece at that path said willContinue. Pure but for args and continued."""
    path = as_str(field(piece, "jsonPath"))
    steps = json_path(path)
    kind = next((key for key in _VALUES if key in piece or _snake(key) in piece), None)
    if steps is None or kind is None:
        return
    value = None if kind == "nullValue" else field(piece, kind)
    holder: Any = args
    for step, following in itertools.pairwise(steps):
        holder = _child(holder, step, [] if isinstance(following, int) else {})
    current = _child(holder, steps[-1], None)
    if path in continued and isinstance(current, str) and isinstance(value, str):
        value = current + value
    _put(holder, steps[-1], value)
    if field(piece, "willContinue") is True:
        continued.add(path)
    else:
        continued.discard(path)


def _child(holder: Any, step: str | int, empty: Any) -> Any:
    """holder[step], set to `empty` where nothing is yet; None where holder cannot hold it."""
    if isinstance(step, int) and isinstance(holder, list):
        holder.extend([None] * (step + 1 - len(holder)))
        if holder[step] is None:
            holder[step] = empty
        return holder[step]
    if isinstance(step, str) and isinstance(holder, dict):
        return holder.setdefault(step, empty)
    return None


def _put(holder: Any, step: str | int, value: Any) -> None:
    if isinstance(step, int) and isinstance(holder, list):
        holder.extend([None] * (step + 1 - len(holder)))
        holder[step] = value
    elif isinstance(step, str) and isinstance(holder, dict):
        holder[step] = value


# --- the loop --------------------------------------------------------------------------------


def _role(content: Mapping[str, Any]) -> str:
    return "model" if as_str(content.get("role")) == "model" else "user"  # `function` is a user


Stretch = tuple[str, int, list[tuple[int, int, Mapping[str, Any]]]]


def _turns(contents: list[Mapping[str, Any]]) -> list[Stretch]:
    """Consecutive contents of one role as one turn, as the API reads them: (role, the index of
    its first content, [(content, part, part body)])."""
    turns: list[Stretch] = []
    for index, content in enumerate(contents):
        role = _role(content)
        parts = [(index, j, as_dict(p)) for j, p in enumerate(as_list(content.get("parts")))]
        if turns and turns[-1][0] == role:
            turns[-1][2].extend(parts)
        else:
            turns.append((role, index, parts))
    return turns


def _where(index: int, part: int) -> str:
    return f"contents.{index}.parts.{part}"


def _signature_errors(turns: list[Stretch], model: str, check: Checker) -> None:
    """Gemini 3: the first functionCall part of each model step of the current turn (after the
    user's last own message) must carry its thoughtSignature. A step is read as a model turn,
    consecutive model contents together: a client that splits parallel calls over contents
    (pydantic-ai does) keeps one signature for them, on the first."""
    if not _GEMINI_3.search(model):
        return
    current = [
        i for i, (role, _, parts) in enumerate(turns)
        if role == "user" and any(field(p, "functionResponse") is None for _, _, p in parts)
    ]  # fmt: skip
    for role, _, parts in turns[(current[-1] + 1 if current else 0) :]:
        first = next(((i, j, p) for i, j, p in parts if field(p, "functionCall")), None)
        if role == "model" and first and not field(first[2], "thoughtSignature"):
            call = as_dict(field(first[2], "functionCall"))
            name = as_str(call.get("id")) or as_str(call.get("name"))
            check.error("missing-thought-signature", [name], first[0], _where(first[0], first[1]))


def check_loop(request: Mapping[str, Any], prior: Prior = None) -> LoopReport:
    """The tool loop of a generateContent request, as Gemini refuses it. Pure."""
    contents = [as_dict(c) for c in as_list(field(request, "contents"))]
    turns = _turns(contents)
    newest = next((first for role, first, _ in reversed(turns) if role == "model"), 0)
    check = Checker("id", "contents", newest)
    calls: list[Called] | None = None  # the calls of the turn before
    for role, first, parts in turns:
        if role == "model":
            calls = [
                (as_str(call.get("id")), as_str(call.get("name")), first, call.get("args"))
                for _, _, part in parts
                if (call := as_dict(field(part, "functionCall")))
            ] or None
            continue
        answers = [
            (index, j, as_dict(field(part, "functionResponse")))
            for index, j, part in parts
            if field(part, "functionResponse") is not None
        ]
        if answers:
            _answer(check, calls or [], answers)
        calls = None  # a call followed by no response at all: accepted, not reported
    _signature_errors(turns, as_str(request.get("model")), check)
    return check.report


Called = tuple[str, str, int, Any]  # a call in the history: (id, name, its turn, its args)


def _answer(check: Checker, calls: list[Called], answers: list[tuple[int, int, Any]]) -> None:
    """Responses against the calls of the turn right before: by id where both sides carry one,
    else the first open call of the same name."""
    open_calls = list(calls)
    answered: list[Called] = []
    for index, j, response in answers:
        answer_id, name = as_str(response.get("id")), as_str(response.get("name"))
        where = _where(index, j)
        named = answer_id or name
        by_id = [c for c in open_calls if answer_id and c[0] == answer_id]
        matched = by_id or [c for c in open_calls if c[1] == name and not (answer_id and c[0])]
        said = field(response, "response")
        # A call with no id is known by its name and arguments, to time its answer by.
        unnamed = unnamed_call(name, matched[0][3]) if matched and not matched[0][0] else None
        check.result(named, index, error_payload(dumps(said)), where, said, unnamed=unnamed)
        if matched:
            open_calls.remove(matched[0])
            answered.append(matched[0])
        elif any((answer_id and c[0] == answer_id) or (not answer_id and c[1] == name)
                 for c in answered):  # fmt: skip
            check.error("duplicate-result", [named], index, where)
        else:
            check.error("orphan-result", [named], index, where)
    by_turn: dict[int, list[str]] = {}
    for call_id, name, index, _ in open_calls:
        by_turn.setdefault(index, []).append(call_id or name)
    for index, ids in sorted(by_turn.items()):
        check.error("unanswered-call", ids, index)


# --- what the API refuses, and the repairs -------------------------------------------------------


def request_blockers(request: Mapping[str, Any], path: str) -> list[str]:
    """Keys of a `parameters` or `responseSchema` Schema that are none of its fields, on the
    API the path names (Vertex AI's Schema has three more). Pure."""
    fields = VERTEX_FIELDS if "/projects/" in path or "/publishers/" in path else SCHEMA_FIELDS
    found = []
    for declaration in _declarations(request):
        parameters = field(declaration, "parameters")
        found += [
            f"tool {as_str(declaration.get('name'))}: {line}"
            for line in schema_blockers(parameters, fields)
        ]
    config = field(request, "generationConfig")
    found += [
        f"format: {line}" for line in schema_blockers(field(config, "responseSchema"), fields)
    ]
    return found


def blockers(value: Any, limits: Limits = SEED_LIMITS, *, tool: bool = True) -> list[str]:
    """No per-tool subset keeps strict from holding: the modes hold for any schema the API
    takes. Pure."""
    return []


def format_repairs(
    response: Mapping[str, Any], state: Any, loose: list[tuple[str, Any]], limits: Limits
) -> list[str]:
    """The repair for an output-format state, in Gemini's terms. Pure."""
    if state == "advisory-tools":
        return [
            "set functionCallingConfig.mode to VALIDATED (the default beside a structured "
            "output): under AUTO the tool arguments are held to no schema."
        ]
    if state == "no-schema":
        return [
            "give responseJsonSchema beside responseMimeType application/json: JSON mode "
            "alone holds the output to no schema."
        ]
    return []


def instructions(request: Mapping[str, Any]) -> str:
    """systemInstruction's parts' text. Pure."""
    return text_of(field(field(request, "systemInstruction"), "parts"))


DIALECT = Dialect.from_names(
    globals(),
    api="gemini",
    state_repairs=fanout_repairs(
        "set functionCallingConfig.mode to VALIDATED (or ANY), under which Google says the "
        "calls adhere to their schemas."
    ),
    parallel_voids_strict=False,
)
