"""Where a turn's calls ran: a model's calls linked to MCP tools/call runs by the names runtimes
give tools, by arguments as a normalised subset, inside the wait, unambiguously; and a batch that
ran one call after another (the last start not before the first completion), said only when
every start and end was seen."""

from __future__ import annotations

import json

import pytest

from tooltap.core.timing import (
    Issued,
    Run,
    arguments_match,
    call_names,
    link,
    name_matches,
    serial,
)

T0 = 1_764_480_000.0
CITY = {"city": "Paris", "units": "c"}


def issued(call_id: str, name: str = "get_weather", arguments: dict | None = None) -> Issued:
    return Issued(call_id, name, json.dumps(arguments or CITY), T0, T0 + 10)


def run(key: str, start: float, end: float, tool: str = "get_weather", **more) -> Run:
    return Run(key, tool, more.pop("arguments", CITY), T0 + start, T0 + end, "weather 1.0", **more)


@pytest.mark.parametrize(
    "model_name",
    [
        "get_weather",  # most runtimes: the tool's own name
        "mcp__weather__get_weather",  # Claude Code
        "mcp_weather__get_weather",  # the OpenAI Agents SDK, include_server_in_tool_names
        "weather_get_weather",  # pydantic-ai's prefix, LangGraph's server, Google ADK
    ],
)
def test_a_tool_is_known_under_each_runtimes_name_for_it(model_name):
    assert name_matches(model_name, "get_weather")


def test_names_runtimes_rewrite_are_matched_as_they_rewrite_them():
    assert name_matches("get_forecastv2", "get-forecast.v2")  # smolagents: - to _, . dropped
    assert name_matches("get-forecast.v2", "get-forecast.v2")
    assert name_matches("mcp__srv__get-forecast_v2", "get-forecast.v2")  # Claude Code: . to _
    assert name_matches("crm_create_lead", "Create Lead")  # CrewAI: lowercased snake case
    assert not name_matches("get_weathers", "get_weather")
    assert not name_matches("weather", "get_weather")


def test_arguments_match_as_a_normalised_subset_either_way():
    assert arguments_match({"city": "Paris", "units": None}, {"city": "Paris"})  # nulls dropped
    assert arguments_match({"city": "Paris"}, {"city": "Paris", "units": "c"})  # defaults filled
    assert arguments_match({"city": "Paris", "extra": 1}, {"city": "Paris"})  # filtered
    assert arguments_match({"q": {"a": {}}}, {"q": {}})
    assert not arguments_match({"city": "Paris"}, {"city": "Rome"})
    assert not arguments_match({"cities": ["Paris", "Rome"]}, {"cities": ["Rome", "Paris"]})


def test_each_call_links_to_its_own_run_by_name_and_arguments():
    batch = [issued("a", arguments={"city": "Paris"}), issued("b", arguments={"city": "Rome"})]
    runs = [
        run("r1", 1, 2, arguments={"city": "Rome"}),
        run("r2", 1, 3, arguments={"city": "Paris"}),
    ]
    assert {c: r.key for c, r in link(batch, runs).items()} == {"a": "r2", "b": "r1"}


def test_a_run_outside_the_calls_wait_or_of_another_tool_is_no_link():
    batch = [issued("a")]
    assert link(batch, [run("before", -1, 2)]) == {}  # began before the issuing request
    assert link(batch, [run("after", 1, 11)]) == {}  # ended after the answer arrived
    assert link(batch, [run("other", 1, 2, tool="get_time")]) == {}


def test_two_runs_that_could_be_one_calls_are_no_link_but_identical_calls_take_one_each():
    assert link([issued("a")], [run("r1", 1, 2), run("r2", 1, 3)]) == {}  # which one? none
    linked = link([issued("a"), issued("b")], [run("r1", 1, 2), run("r2", 3, 4)])
    assert sorted(r.key for r in linked.values()) == ["r1", "r2"]  # a multiset: k calls, k runs


def test_claude_codes_meta_names_the_models_call_outright():
    runs = [run("r1", 1, 2, model_call="toolu_b"), run("r2", 1, 2, model_call="toolu_a")]
    linked = link([issued("toolu_a"), issued("toolu_b")], runs)
    assert {c: r.key for c, r in linked.items()} == {"toolu_a": "r2", "toolu_b": "r1"}


def test_a_batch_whose_last_call_started_after_the_first_ended_ran_in_series():
    runs = {"a": run("r1", 1, 2), "b": run("r2", 2.5, 4), "c": run("r3", 4.5, 5)}
    error = serial(["a", "b", "c"], runs, "here")
    assert error is not None and (error.rule, error.ids) == ("serial-execution", ["a", "b", "c"])
    assert "the batch took 4000 ms" in error.repair and "about 1500 ms" in error.repair


def test_a_batch_that_overlapped_at_one_moment_ran_together():
    runs = {"a": run("r1", 1, 3), "b": run("r2", 1.5, 2), "c": run("r3", 1.8, 4)}
    assert serial(["a", "b", "c"], runs, "here") is None
    # One call started only once another had completed: in series, though two overlapped.
    assert serial(["a", "b", "c"], runs | {"c": run("r3", 2.5, 4)}, "here") is not None


def test_nothing_is_said_of_a_batch_with_one_run_unseen_or_of_a_single_call():
    runs = {"a": run("r1", 1, 2), "b": run("r2", 3, 4)}
    assert serial(["a", "b", "c"], runs, "here") is None
    assert serial(["a"], runs, "here") is None


MCP = "http://127.0.0.1:8000/mcp"


def test_the_repair_names_the_cause_it_can_see():
    one = {"a": run("r1", 1, 2, session="s1", endpoint=MCP),
           "b": run("r2", 3, 4, session="s1", endpoint=MCP)}  # fmt: skip
    error = serial(["a", "b"], one, "here")
    assert error is not None and "over one MCP session: if your runtime" in error.repair
    claude = {"a": run("r1", 1, 2, model_call="a"), "b": run("r2", 3, 4, model_call="b")}
    error = serial(["a", "b"], claude, "here")
    assert error is not None and "readOnlyHint" in error.repair


def test_one_client_is_named_as_the_cause_only_where_it_could_be():
    # The protocol's stateless version (2026-07-28) names no session: one server endpoint is
    # all that is seen, and the OpenAI Agents SDK's one client sent its batch there in series.
    stateless = {"a": run("r1", 1, 2, endpoint=MCP), "b": run("r2", 3, 4, endpoint=MCP)}
    error = serial(["a", "b"], stateless, "here")
    assert error is not None
    assert "to one MCP server, in no session: if your runtime starts" in error.repair
    assert "MCPServerStreamableHttp" in error.repair
    # A session per call (LangGraph's adapters), or two servers: no one client sent them all.
    apart = {"a": run("r1", 1, 2, session="s1", endpoint=MCP),
             "b": run("r2", 3, 4, session="s2", endpoint=MCP)}  # fmt: skip
    elsewhere = {"a": run("r1", 1, 2, endpoint=MCP),
                 "b": run("r2", 3, 4, endpoint="http://127.0.0.1:9000/mcp")}  # fmt: skip
    unknown = {"a": run("r1", 1, 2), "b": run("r2", 3, 4)}  # where they went was not kept
    for runs in (apart, elsewhere, unknown):
        error = serial(["a", "b"], runs, "here")
        assert error is not None and "MCP client" not in error.repair
        assert error.repair.endswith("each waited for the one before it.")


def test_the_repair_reads_as_sentences():
    error = serial(["a", "b"], {"a": run("r1", 1, 2), "b": run("r2", 3, 5)}, "here")
    assert error is not None
    assert error.repair.startswith("the batch took 4000 ms; run together it would have taken "
                                   "about 2000 ms (its longest call). Run a batch's")  # fmt: skip


# Each dialect's history, holding the answered call as its client sends it back (WIRE.md).
HISTORIES = {
    "chat": {"messages": [{"role": "assistant", "tool_calls": [
        {"id": "c1", "type": "function", "function": {"name": "get_weather", "arguments": "{}"}}]},
        {"role": "tool", "tool_call_id": "c1", "name": "not_this", "content": "ok"}]},
    "chat custom": {"messages": [{"role": "assistant", "tool_calls": [
        {"id": "c1", "type": "custom", "custom": {"name": "get_weather", "input": "x"}}]}]},
    "responses": {"input": [
        {"type": "function_call", "id": "fc_1", "call_id": "c1", "name": "get_weather"},
        {"type": "function_call_output", "call_id": "c1", "output": "ok"}]},
    "messages": {"messages": [{"role": "assistant", "content": [
        {"type": "tool_use", "id": "c1", "name": "get_weather", "input": {}}]},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "c1"}]}]},
    "gemini": {"contents": [{"role": "model", "parts": [
        {"functionCall": {"id": "c1", "name": "get_weather", "args": {}}}]},
        {"role": "user", "parts": [
            {"functionResponse": {"id": "c1", "name": "get_weather", "response": {}}}]}]},
    "converse": {"messages": [{"role": "assistant", "content": [
        {"toolUse": {"toolUseId": "c1", "name": "get_weather", "input": {}}}]},
        {"role": "user", "content": [{"toolResult": {"toolUseId": "c1", "content": []}}]}]},
}  # fmt: skip


@pytest.mark.parametrize("dialect", sorted(HISTORIES))
def test_a_request_history_names_the_calls_it_answers(dialect):
    assert call_names(HISTORIES[dialect], ["c1", "c9"]) == {"c1": "get_weather"}


def test_an_id_that_goes_with_two_names_is_named_by_neither():
    history = {"input": [
        {"type": "function_call", "call_id": "c1", "name": "get_weather"},
        {"type": "function_call", "call_id": "c1", "name": "get_time"},
        {"type": "function_call", "call_id": "c2", "name": "get_time"},
    ]}  # fmt: skip
    assert call_names(history, ["c1", "c2"]) == {"c2": "get_time"}


@pytest.mark.parametrize("request_value", [None, "c1", [], {"id": "c1"}, {"id": "c1", "name": 3},
                                           {"id": "c1", "function": {"name": "  "}}])  # fmt: skip
def test_a_history_without_the_calls_name_names_nothing(request_value):
    assert call_names(request_value, ["c1"]) == {}
