"""Per-call argument diagnostics: raw text kept, then parse, then schema.

The raw arguments string is kept exactly as received. When it does not parse,
the parse error (type, message, position) is recorded beside the raw text;
when it parses, it is validated against the tool's declared JSON Schema and
every violation is reported with its path. Bad arguments are the second
failure layer: the request was accepted and the model still returned them.
"""

from __future__ import annotations

import hashlib
from collections import OrderedDict
from typing import Any

import jsonschema_rs
import orjson

from .built import builder
from .jsontext import loads
from .records import Call, ParseError, SchemaError
from .turn import Tool, ToolCall

MAX_SCHEMA_ERRORS = 20
# Some relays drop the key for a call without arguments (OpenRouter relaying Claude).
MISSING = ParseError(
    type="MissingArguments", message="the call has no arguments field at all, not even {}"
)

# The validator is Rust: a panic there surfaces as a BaseException, which is
# caught like any other failure; these are not.
_FATAL = (KeyboardInterrupt, SystemExit, GeneratorExit)


build_call = builder(Call)  # from values diagnose() typed itself (core/built.py)


def normalised(value: Any) -> Any:
    """Arguments as runtimes may forward them: nulls and empty objects dropped. Pure."""
    if isinstance(value, dict):
        kept = {k: normalised(v) for k, v in value.items() if v is not None}
        return {k: v for k, v in kept.items() if v != {}}
    if isinstance(value, list):
        return [normalised(v) for v in value]
    return value


def unnamed_call(name: str, arguments: Any) -> str:
    """What stands for a call whose API gave it no id, across the exchange that made it and
    the one that answers it: its tool and its arguments (parsed; a string is parsed first),
    normalised, as a digest. Two calls alike in both are one key: never told apart. Pure."""
    if isinstance(arguments, str):
        arguments, _ = loads(arguments or "{}")
    try:
        text = orjson.dumps(normalised(arguments), option=orjson.OPT_SORT_KEYS)
    except (TypeError, orjson.JSONEncodeError):
        text = b""
    digest = hashlib.sha256(name.encode("utf-8", "replace") + b"\0" + text).hexdigest()
    return f"unnamed:{digest[:32]}"


def _refuse_remote(uri: str) -> Any:
    # A tool schema's remote $ref is never fetched: core does no I/O.
    raise ValueError(f"remote $ref {uri} is not fetched")


def _path(parts: Any) -> str:
    path = "$"
    for part in parts:
        path += f"[{part}]" if isinstance(part, int) else f".{part}"
    return path


Compiled = Any  # jsonschema_rs.Validator, or a str saying why the schema is unusable
COMPILED_KEPT = 256  # schemas a ValidatorCache keeps compiled, the least recently used out


class ValidatorCache:
    """Compiled validators by schema, least recently used first out.

    The caller owns it (the proxy keeps one per worker), so core holds no
    global state; results are the same with or without it.
    """

    def __init__(self, size: int = COMPILED_KEPT) -> None:
        self._size = size
        self._compiled: OrderedDict[bytes, Compiled] = OrderedDict()

    def get(self, schema: Any) -> Compiled:
        try:
            key = orjson.dumps(schema, option=orjson.OPT_SORT_KEYS)
        except (TypeError, orjson.JSONEncodeError):
            return "the tool schema is not JSON-serialisable"
        compiled = self._compiled.get(key)
        if compiled is not None:
            self._compiled.move_to_end(key)
            return compiled
        compiled = compile_schema(schema)
        self._compiled[key] = compiled
        if len(self._compiled) > self._size:
            self._compiled.popitem(last=False)
        return compiled


def compile_schema(schema: Any) -> Compiled:
    """A validator for a tool schema, or why there is none. Pure, never raises."""
    try:
        return jsonschema_rs.validator_for(schema, retriever=_refuse_remote)
    except _FATAL:
        raise
    except BaseException as exc:  # noqa: BLE001 - any failure, even a Rust panic, means "invalid"
        first = str(exc).strip().splitlines()
        return "the declared schema is invalid: " + (first[0] if first else type(exc).__name__)


def diagnose(
    call: ToolCall, tool: Tool | None, cache: ValidatorCache | None = None, *, hosted: bool = False
) -> Call:
    """Parse and validate one call's arguments against its tool; hosted: the provider ran it.
    Pure."""
    parse_error: ParseError | None = None
    schema_errors: list[SchemaError] = []
    schema_problem: str | None = None
    if call.type == "custom_tool_call":
        pass  # free-form text (or a grammar), not JSON
    elif call.arguments_missing:
        parse_error = MISSING
    else:
        value, parse_error = loads(call.arguments_raw)
        if parse_error is None:
            schema = tool.parameters if tool is not None else None
            schema_errors, schema_problem = validate(value, schema, cache)
    return build_call(
        call_id=call.call_id,
        name=call.name,
        type=call.type,
        arguments_raw=call.arguments_raw,
        parse_error=parse_error,
        schema_errors=schema_errors,
        schema_problem=schema_problem,
        hosted=hosted,
        server=call.server,
    )


def validate(
    value: Any, schema: Any, cache: ValidatorCache | None = None
) -> tuple[list[SchemaError], str | None]:
    """Every way a value breaks a JSON Schema (at most MAX_SCHEMA_ERRORS, then a note), and why
    the schema could not be applied, if it could not. No schema (not an object or a boolean)
    checks nothing. Pure."""
    if not isinstance(schema, dict | bool):
        return [], None
    compiled = cache.get(schema) if cache is not None else compile_schema(schema)
    if isinstance(compiled, str):
        return [], compiled
    errors: list[SchemaError] = []
    try:
        if compiled.is_valid(value):  # most arguments: a third of the cost of listing no errors
            return errors, None
        for found in compiled.iter_errors(value):
            if len(errors) == MAX_SCHEMA_ERRORS:
                errors.append(
                    SchemaError(
                        path="$",
                        message=f"more than {MAX_SCHEMA_ERRORS} errors; the rest are not listed",
                    )
                )
                break
            errors.append(SchemaError(path=_path(found.instance_path), message=found.message))
    except _FATAL:
        raise
    except BaseException as exc:  # noqa: BLE001 - a validator that cannot run is a schema problem
        return errors, f"the declared schema could not be applied: {exc}"
    return errors, None
