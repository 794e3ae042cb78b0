"""The Prometheus sink: exact counter values for a verdict, on a fresh registry per test."""

from prometheus_client import generate_latest

from tooltap.addon.sinks.metrics import Metrics
from tooltap.core import Verdict

CALL = {"call_id": "c", "name": "f", "type": "function_call", "arguments_raw": "{}"}


def value(metrics, name, **labels):
    return metrics.registry.get_sample_value(name, labels)


def test_a_strict_void_turn_counts_its_state_calls_and_unguaranteed_arguments(metrics):
    bad = CALL | {"parse_error": {"type": "JSONDecodeError", "message": "eof"}}
    verdict = Verdict(
        api="chat",
        outcome="inspected",
        model="gpt-4o",
        state="strict-void",
        format_state="free-text",
        calls=[CALL, bad, CALL],
        duplicates={"f": 3},
        loop_errors=[{"rule": "orphan-result", "ids": ["x"], "where": "messages.3", "repair": "r"}],
        tool_results=[{"call_id": "y", "where": "messages.2", "outcome": "error"}],
    )
    metrics.record(verdict, 0.002)
    labels = {"api": "chat", "model": "gpt-4o"}
    assert value(metrics, "tooltap_turns_total", **labels, state="strict-void") == 1
    assert value(metrics, "tooltap_turns_total", **labels, state="strict-at-risk") == 0
    assert value(metrics, "tooltap_formats_total", **labels, state="free-text") == 1
    assert value(metrics, "tooltap_tool_calls_total", **labels) == 3
    assert value(metrics, "tooltap_unguaranteed_arguments_total", **labels) == 3
    assert value(metrics, "tooltap_argument_errors_total", **labels, kind="parse") == 1
    assert value(metrics, "tooltap_argument_errors_total", **labels, kind="schema") == 0
    assert value(metrics, "tooltap_duplicate_calls_total", **labels) == 1
    assert value(metrics, "tooltap_loop_errors_total", api="chat", rule="orphan-result") == 1
    assert value(metrics, "tooltap_tool_results_total", api="chat", outcome="error") == 1
    assert value(metrics, "tooltap_flows_total", api="chat", outcome="inspected") == 1
    assert value(metrics, "tooltap_calls_per_turn_count", api="chat") == 1
    assert value(metrics, "tooltap_calls_per_turn_sum", api="chat") == 3
    assert value(metrics, "tooltap_inspect_seconds_count", api="chat") == 1


def test_a_verdict_that_is_not_a_turn_counts_its_flow_and_nothing_else(metrics):
    metrics.record(Verdict(api="responses", outcome="inspected", reason="queued"), 0.001)
    metrics.record(
        Verdict(
            api="messages",
            outcome="inspected",
            rejected={"status": 400, "type": "t", "message": "m"},
        ),
        0.001,
    )
    assert value(metrics, "tooltap_flows_total", api="responses", outcome="inspected") == 1
    assert value(metrics, "tooltap_rejected_requests_total", api="messages", status="400") == 1
    assert value(metrics, "tooltap_calls_per_turn_count", api="responses") is None


def test_a_sessions_own_findings_count_as_findings_and_no_flow(metrics):
    for code in ("input_audio_buffer_commit_empty", "input_audio_buffer_commit_empty", "x"):
        metrics.record(
            Verdict(
                api="realtime",
                outcome="inspected",
                scope="session",
                session_errors=[{"type": code, "message": "m"}],
            ),
            0.001,
        )
    metrics.record(
        Verdict(
            api="realtime",
            outcome="inspected",
            scope="session",
            loop_errors=[{"rule": "unanswered-call", "ids": ["c"], "where": "w", "repair": "r"}],
        ),
        0.001,
    )
    assert value(metrics, "tooltap_flows_total", api="realtime", outcome="inspected") == 0
    assert value(metrics, "tooltap_inspect_seconds_count", api="realtime") is None
    assert (
        value(
            metrics,
            "tooltap_session_errors_total",
            api="realtime",
            type="input_audio_buffer_commit_empty",
        )
        == 2
    )
    assert value(metrics, "tooltap_session_errors_total", api="realtime", type="x") == 1
    assert value(metrics, "tooltap_loop_errors_total", api="realtime", rule="unanswered-call") == 1


def test_session_error_codes_past_the_label_budget_count_as_other(metrics):
    for number in range(52):
        metrics.record(
            Verdict(
                api="realtime",
                outcome="inspected",
                scope="session",
                session_errors=[{"type": f"code_{number}", "message": "m"}],
            ),
            0,
        )
    assert value(metrics, "tooltap_session_errors_total", api="realtime", type="code_49") == 1
    assert value(metrics, "tooltap_session_errors_total", api="realtime", type="other") == 2


def test_models_past_the_label_budget_count_as_other_and_start_at_zero():
    metrics = Metrics(model_labels=1)
    for model in ("first", "second", "third"):
        metrics.record(Verdict(api="chat", outcome="inspected", model=model, state="no-tools"), 0)
    assert value(metrics, "tooltap_turns_total", api="chat", model="first", state="no-tools") == 1
    assert value(metrics, "tooltap_turns_total", api="chat", model="other", state="no-tools") == 2
    assert (
        value(metrics, "tooltap_turns_total", api="chat", model="other", state="strict-void") == 0
    )
    assert (
        value(metrics, "tooltap_turns_total", api="chat", model="second", state="no-tools") is None
    )


def test_known_series_exist_at_zero_and_no_created_series_is_exposed(metrics):
    assert value(metrics, "tooltap_flows_total", api="messages", outcome="dropped") == 0
    assert value(metrics, "tooltap_internal_errors_total", where="tap") == 0
    metrics.flow("chat", "dropped", 4)
    exposed = generate_latest(metrics.registry).decode()
    assert 'tooltap_flows_total{api="chat",outcome="dropped"} 4.0' in exposed
    assert "_created" not in exposed


def test_hosted_calls_count_as_calls_and_argument_errors_but_not_in_the_turns_calls(metrics):
    hosted = {"type": "mcp_call", "arguments_raw": "{}", "hosted": True, "server": "s"}
    bad = hosted | {
        "call_id": "mcp_2",
        "name": "g",
        "schema_errors": [{"path": "$.n", "message": '"x" is not of type "integer"'}],
    }
    verdict = Verdict(
        api="responses",
        outcome="inspected",
        model="o4-mini",
        state="strict-void",
        calls=[CALL, CALL, hosted | {"call_id": "mcp_1", "name": "g"}, bad],
        tool_results=[{"call_id": "mcp_1", "where": "output.2", "outcome": "error"}],
    )
    metrics.record(verdict, 0.002)
    labels = {"api": "responses", "model": "o4-mini"}
    assert value(metrics, "tooltap_tool_calls_total", **labels) == 4
    assert value(metrics, "tooltap_argument_errors_total", **labels, kind="schema") == 1
    assert value(metrics, "tooltap_tool_results_total", api="responses", outcome="error") == 1
    # The turn's own figures are its client calls: two, both unguaranteed.
    assert value(metrics, "tooltap_calls_per_turn_sum", api="responses") == 2
    assert value(metrics, "tooltap_unguaranteed_arguments_total", **labels) == 2


def test_a_turns_time_tokens_and_tool_waits_are_observed_by_api_and_model(metrics):
    wait = {"call_id": "c", "name": "f", "waited_ms": 2500.0, "issued_at": 1.0, "answered_at": 3.5}
    verdict = Verdict(
        api="messages",
        outcome="inspected",
        model="claude-haiku-4-5",
        state="no-strict-declared",
        duration_ms=1800.0,
        first_token_ms=420.0,
        usage={"input_tokens": 2510, "output_tokens": 7, "cached_input_tokens": 2000},
        tool_times=[wait],
    )
    metrics.record(verdict, 0.001)
    labels = {"api": "messages", "model": "claude-haiku-4-5"}
    assert value(metrics, "tooltap_model_duration_seconds_count", **labels) == 1
    assert value(metrics, "tooltap_model_duration_seconds_sum", **labels) == 1.8
    assert value(metrics, "tooltap_first_token_seconds_bucket", **labels, le="0.5") == 1
    assert value(metrics, "tooltap_first_token_seconds_bucket", **labels, le="0.25") == 0
    assert value(metrics, "tooltap_tokens_total", **labels, type="input") == 2510
    assert value(metrics, "tooltap_tokens_total", **labels, type="cached_input") == 2000
    assert value(metrics, "tooltap_tokens_total", **labels, type="reasoning") is None  # unsaid
    assert value(metrics, "tooltap_tool_wait_seconds_sum", api="messages") == 2.5
    # A turn without times (a JSONL recording) observes nothing: no zeros for unknown.
    metrics.record(verdict.model_copy(update={"duration_ms": None, "first_token_ms": None}), 0)
    assert value(metrics, "tooltap_model_duration_seconds_count", **labels) == 1
    assert value(metrics, "tooltap_serial_batches_total", api="messages") == 0
    assert value(metrics, "tooltap_overdue_calls_total", api="messages") == 0


def test_the_endpoint_serves_the_registry_quietly_and_closing_it_frees_its_port(capfd):
    import socket
    import threading
    import urllib.request

    metrics = Metrics()
    port = metrics.serve("127.0.0.1", 0)
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as response:
        assert response.status == 200
        assert b"tooltap_flows_total" in response.read()
    metrics.close()
    # Its thread has ended, and the port is free at once for a new listener (which, as every
    # server does, reuses the address: the scrape's connection may still be in TIME_WAIT).
    assert not [t for t in threading.enumerate() if t.name == "tooltap: /metrics"]
    with socket.socket() as again:
        again.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        again.bind(("127.0.0.1", port))
        again.listen()
    assert capfd.readouterr().err == ""  # no access line per scrape
