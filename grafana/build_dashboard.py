"""Build grafana/dashboards/tooltap.json with Grafana's foundation SDK.

    python grafana/build_dashboard.py     # rewrite the JSON after editing this file

The JSON is committed (Grafana provisions it as is) and a test checks that it equals what
this script produces. grafana/README.md says why the SDK, and which version.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from grafana_foundation_sdk.builders import bargauge, prometheus, stat, timeseries
from grafana_foundation_sdk.builders import common as common_builders
from grafana_foundation_sdk.builders import dashboard as builders
from grafana_foundation_sdk.cog.encoder import JSONEncoder
from grafana_foundation_sdk.models import common
from grafana_foundation_sdk.models import dashboard as models
from grafana_foundation_sdk.models.prometheus import PromQueryFormat

OUTPUT = Path(__file__).parent / "dashboards" / "tooltap.json"

DATASOURCE = models.DataSourceRef(type_val="prometheus", uid="${datasource}")
# Panel filters; "All" means the regex .* so that new label values show up without a reload.
TURNS = 'api=~"$api", model=~"$model"'
API = 'api=~"$api"'
# The MCP row: tool servers only, and only while the API filter includes mcp.
MCP = 'api="mcp", api=~"$api"'
MCP_SERVERS = f'{MCP}, model=~"$model"'  # a tool server's name is in the model label
LAST = common_builders.ReduceDataOptions().calcs(["lastNotNull"]).values(False)


def query(expr: str, legend: str = "", ref: str = "A") -> prometheus.Dataquery:
    q = prometheus.Dataquery().expr(expr).ref_id(ref).datasource(DATASOURCE)
    return q.legend_format(legend) if legend else q


def thresholds(*steps: tuple[float | None, str]) -> builders.ThresholdsConfig:
    return (
        builders.ThresholdsConfig()
        .mode(models.ThresholdsMode.ABSOLUTE)
        .steps([models.Threshold(value=value, color=color) for value, color in steps])
    )


def series(
    title: str,
    description: str,
    targets: list[prometheus.Dataquery],
    *,
    unit: str = "ops",
    width: int = 8,
    stacked: bool = False,
) -> timeseries.Panel:
    panel = (
        timeseries.Panel()
        .title(title)
        .description(description)
        .datasource(DATASOURCE)
        .targets(targets)
        .unit(unit)
        .min(0)
        .height(8)
        .span(width)
        .fill_opacity(10)
        .legend(
            common_builders.VizLegendOptions()
            .show_legend(True)
            .placement(common.LegendPlacement.BOTTOM)
            .display_mode(common.LegendDisplayMode.LIST)
        )
    )
    if stacked:
        panel = panel.stacking(common_builders.StackingConfig().mode(common.StackingMode.NORMAL))
    return panel


def single(
    title: str, description: str, target: prometheus.Dataquery, unit: str, red_at: float
) -> stat.Panel:
    return (
        stat.Panel()
        .title(title)
        .description(description)
        .datasource(DATASOURCE)
        .with_target(target.instant())
        .unit(unit)
        .height(8)
        .span(4)
        .reduce_options(LAST)
        .graph_mode(common.BigValueGraphMode.NONE)
        .color_mode(common.BigValueColorMode.BACKGROUND)
        .thresholds(thresholds((None, "green"), (red_at, "red")))
    )


def variables() -> list[Any]:
    every = models.VariableOption(selected=True, text="All", value="$__all")

    def label(name: str, text: str, query_text: str, description: str) -> builders.QueryVariable:
        return (
            builders.QueryVariable(name)
            .label(text)
            .description(description)
            .datasource(DATASOURCE)
            .query(query_text)
            .refresh(models.VariableRefresh.ON_TIME_RANGE_CHANGED)
            .sort(models.VariableSort.ALPHABETICAL_ASC)
            .multi(True)
            .include_all(True)
            .all_value(".*")
            .current(every)
        )

    return [
        builders.DatasourceVariable("datasource")
        .label("Data source")
        .description("The Prometheus that scrapes tooltap.")
        .type("prometheus"),
        label(
            "api",
            "API",
            'label_values(tooltap_flows_total{api!="none"}, api)',
            "Which model API: responses (over HTTP or WebSocket), chat (Chat Completions),"
            " messages (Anthropic, on Bedrock and Vertex AI too), realtime (the Realtime API),"
            " converse (Bedrock Converse), gemini, gemini_live (the Gemini Live API), ollama"
            " (Ollama's own API), cohere (Cohere's v2 chat) or mcp (tool servers). All also counts"
            " the flows no API names (not read, or refused before any request).",
        ),
        label(
            "model",
            "Model",
            'label_values(tooltap_turns_total{api=~"$api"}, model)',
            "The model the response named; past the proxy's label limit, models show as other.",
        ),
    ]


def exposure_panels() -> list[Any]:
    return [
        single(
            "Exposure rate (5m)",
            "Of the turns that declared strict tools and allowed parallel calls, the share that"
            " actually made parallel calls. Parallel calls void strict mode, so those arguments"
            " were not guaranteed to match the schema. 0% is the goal; the alert fires above 5%."
            " Empty means no such traffic. All models and APIs (recording rule"
            " tooltap:exposure_rate:5m).",
            query("tooltap:exposure_rate:5m"),
            "percentunit",
            0.05,
        )
        .span(6)
        .no_value("no strict parallel traffic"),
        series(
            "Exposure rate by model",
            "The exposure rate over time, one line per model (recording rule"
            " tooltap:exposure_rate_by_model:5m; the model filter applies, the API filter does"
            " not). A line at 0 is a model that allows parallel calls with strict tools but has"
            " not made any yet: it is at risk, not safe.",
            [query('tooltap:exposure_rate_by_model:5m{model=~"$model"}', "{{model}}")],
            unit="percentunit",
            width=18,
        ).max(1),
        series(
            "Strict turns per second by state",
            "Turns by what happened to the strict guarantee. strict-void: strict tools, parallel"
            " calls allowed, and several calls made, so strict did not hold. strict-at-risk:"
            " the same settings with a single call, which can turn void on any request."
            " fanout-no-strict: parallel calls without strict tools, so nothing was promised."
            " Fix the first two with parallel_tool_calls: false.",
            [
                query(
                    f"sum by (state) (rate(tooltap_turns_total{{{TURNS},"
                    ' state=~"strict-void|strict-at-risk|fanout-no-strict"}[$__rate_interval]))',
                    "{{state}}",
                )
            ],
            width=12,
            stacked=True,
        ),
        series(
            "Argument objects without guarantee",
            "Tool-call argument objects returned in strict-void turns, per second: each one"
            " reached the application with strict declared but not enforced, so validate it"
            " before use.",
            [
                query(
                    "sum by (model) (rate(tooltap_unguaranteed_arguments_total"
                    f"{{{TURNS}}}[$__rate_interval]))",
                    "{{model}}",
                )
            ],
            width=12,
        ),
    ]


def call_panels() -> list[Any]:
    return [
        series(
            "Tool calls per second",
            "Tool calls the models returned, and turns that called the same tool name more"
            " than once (often a sign of a retry loop or a fan-out the app did not expect).",
            [
                query(
                    f"sum by (model) (rate(tooltap_tool_calls_total{{{TURNS}}}[$__rate_interval]))",
                    "calls {{model}}",
                ),
                query(
                    "sum by (model) (rate(tooltap_duplicate_calls_total"
                    f"{{{TURNS}}}[$__rate_interval]))",
                    "duplicate-name turns {{model}}",
                    "B",
                ),
            ],
        ),
        series(
            "Argument errors by kind",
            "Tool calls whose arguments failed, per second. parse: the arguments string is"
            " not valid JSON. schema: it parsed but does not match the tool's declared schema."
            " The tool_call log event carries the raw arguments and the exact error.",
            [
                query(
                    "sum by (kind) (rate(tooltap_argument_errors_total"
                    f"{{{TURNS}}}[$__rate_interval]))",
                    "{{kind}}",
                )
            ],
            stacked=True,
        ),
        bargauge.Panel()
        .title("Tool calls per turn")
        .description(
            "How many tool calls each inspected turn made, over the dashboard's time range."
            " Bars are buckets: 0 is a turn with no call, 1 a single call; more than 1 means"
            " parallel calls, which void strict mode on OpenAI."
        )
        .datasource(DATASOURCE)
        .with_target(
            query(
                f"sum by (le) (increase(tooltap_calls_per_turn_bucket{{{API}}}[$__range]))",
                "{{le}}",
            )
            .format(PromQueryFormat.HEATMAP)
            .instant()
        )
        .unit("short")
        .min(0)
        .height(8)
        .span(8)
        .reduce_options(LAST)
        .display_mode(common.BarGaugeDisplayMode.GRADIENT)
        .orientation(common.VizOrientation.HORIZONTAL),
    ]


def loop_panels() -> list[Any]:
    return [
        series(
            "Tool-loop errors by rule",
            "Mistakes in how the application answered tool calls, per second."
            " unanswered-call: a call got no result. orphan-result: a result for a call that"
            " does not exist. duplicate-result: a call answered twice. split-results and"
            " results-not-first (Anthropic): results must sit first in the single next user"
            " message. empty-result: a result with no content. unanswered-at-close (Realtime):"
            " the session closed while a tool ran, with no response after it, as at a hang-up."
            " missing-thought-signature (Gemini 3): a replayed call lost its signature.",
            [
                query(
                    f"sum by (rule) (rate(tooltap_loop_errors_total{{{API}}}[$__rate_interval]))",
                    "{{rule}}",
                )
            ],
            stacked=True,
        ),
        series(
            "Tool failures",
            "Tool results the application sent back flagged as errors (is_error, or an error"
            " payload), per second: the tool itself failed, which is different from the"
            " model sending bad arguments.",
            [
                query(
                    "sum by (api) (rate(tooltap_tool_results_total"
                    f'{{{API}, outcome="error"}}[$__rate_interval]))',
                    "{{api}}",
                )
            ],
        ),
        series(
            "Rejected requests",
            "Requests the model API refused with a 4xx, per second, by status. With strict"
            " tools or a strict output format, a 400 usually means the schema breaks the"
            " provider's strict rules; the request_rejected log event lists the blockers.",
            [
                query(
                    "sum by (api, status) (rate(tooltap_rejected_requests_total"
                    f"{{{API}}}[$__rate_interval]))",
                    "{{api}} {{status}}",
                )
            ],
        ),
        series(
            "Realtime session errors",
            "Errors a Realtime session sent that refused no request, per second, by code"
            " (input_audio_buffer_commit_empty is routine in voice sessions). A refused"
            " response.create or tool result counts as a rejected request instead.",
            [
                query(
                    "sum by (type) (rate(tooltap_session_errors_total"
                    f"{{{API}}}[$__rate_interval]))",
                    "{{type}}",
                )
            ],
        ),
        series(
            "Output-format states",
            "Turns per second by how the structured output was requested. enforced: a strict"
            " JSON schema the API guarantees. advisory-schema: a schema without strict, so"
            " the output may not match. advisory-tools: tools without strict. no-schema:"
            " JSON mode without a schema. free-text: plain text. unknown-format: not"
            " recognised.",
            [
                query(
                    f"sum by (state) (rate(tooltap_formats_total{{{TURNS}}}[$__rate_interval]))",
                    "{{state}}",
                )
            ],
            width=16,
            stacked=True,
        ),
    ]


def mcp_panels() -> list[Any]:
    pinned = (
        ' The row reads api="mcp" only, and is empty when the API filter leaves mcp out; a'
        " server's name is never a model, so keep the Model filter at All."
    )
    return [
        series(
            "MCP tool calls per second",
            "tools/call requests the application sent to MCP tool servers, per second, one line"
            " per server as its initialize answer named it (name and version)." + pinned,
            [
                query(
                    "sum by (model) (rate(tooltap_tool_calls_total"
                    f"{{{MCP_SERVERS}}}[$__rate_interval]))",
                    "{{model}}",
                )
            ],
        ),
        series(
            "MCP argument and result errors",
            "MCP tool calls that broke a schema the session listed, per second. parse: arguments"
            " that are not a JSON object. schema: arguments off the tool's inputSchema."
            " result_schema: a result whose structuredContent is off the tool's outputSchema"
            " (or missing); the SDKs' clients refuse such a result. The tool_call and"
            " tool_result log events carry the exact error.",
            [
                query(
                    "sum by (kind) (rate(tooltap_argument_errors_total"
                    f"{{{MCP_SERVERS}}}[$__rate_interval]))",
                    "{{kind}}",
                )
            ],
            stacked=True,
        ),
        series(
            "MCP tool failure share",
            "Of the tool results MCP servers returned, the share flagged isError: the tool ran"
            " and reported its own failure (a server also answers arguments it refuses this"
            " way). Empty when no result came back in the window.",
            [
                query(
                    "sum(rate(tooltap_tool_results_total"
                    f'{{{MCP}, outcome="error"}}[$__rate_interval])) / (sum(rate('
                    f"tooltap_tool_results_total{{{MCP}}}[$__rate_interval])) > 0)",
                    "failed results",
                )
            ],
            unit="percentunit",
        ).max(1),
        series(
            "MCP JSON-RPC rejections by code",
            "MCP requests a server refused with a JSON-RPC error, per second, by code: -32602"
            " invalid params (often an unknown tool), -32601 method not found, -32600 invalid"
            " request, -32603 internal error; a refusal before JSON-RPC shows its HTTP status."
            " The request_rejected log event names the server, the session and the message.",
            [
                query(
                    "sum by (status) (rate(tooltap_rejected_requests_total"
                    f"{{{MCP}}}[$__rate_interval]))",
                    "{{status}}",
                )
            ],
            width=12,
        ),
        series(
            "MCP unlisted-tool calls",
            "Calls, per second, to a tool the session's whole tools/list never named, on a"
            " server that said its list does not change: the application called a tool that"
            " does not exist there (a stale list, or another server's tool). The loop_error log"
            " event names the server and the session.",
            [
                query(
                    "sum(rate(tooltap_loop_errors_total"
                    f'{{{MCP}, rule="unlisted-tool"}}[$__rate_interval]))',
                    "unlisted-tool",
                )
            ],
            width=12,
        ),
    ]


def definition_panels() -> list[Any]:
    return [
        series(
            "Tool definitions changed",
            "Tool definitions that differ from their pin (the first one seen from the same"
            " source, or the tools lock), and tools that appeared in or disappeared from a"
            " server's list, per second, one line per MCP server (empty: an application's"
            " declared tools). Each change counts once, across replicas sharing pins. A change"
            " nobody approved is how a trusted server turns hostile: the tool_changed log event"
            " says which tool and what changed, by path.",
            [
                query(
                    "sum by (api, server) (rate(tooltap_tool_changes_total"
                    f"{{{API}}}[$__rate_interval]))",
                    "{{api}} {{server}}",
                )
            ],
            width=12,
        ),
        series(
            "Hidden text in definitions and results",
            "Runs of invisible characters (tag characters that spell text, zero-width and"
            " direction controls, smuggling variation selectors) where they do nothing visible,"
            " per second: in a tool's definition, or in a tool result. Visible text in any"
            " script never counts. The hidden_text log event says where and what the tag"
            " characters spell.",
            [
                query(
                    f"sum by (where) (rate(tooltap_hidden_text_total{{{API}}}[$__rate_interval]))",
                    "{{where}}",
                )
            ],
            width=12,
            stacked=True,
        ),
    ]


def health_panels() -> list[Any]:
    return [
        single(
            "Proxies up",
            "tooltap processes Prometheus can scrape right now (job tooltap). Each replica"
            " counts once; 0 means clients routed through the proxy cannot reach the API.",
            query('sum(up{job="tooltap"})'),
            "short",
            1,
        ).thresholds(thresholds((None, "red"), (1, "green"))),
        single(
            "Dropped flows",
            "Flows not inspected because the queue to the inspector was full (or the"
            " inspector was restarting), over the time range. The traffic itself passed"
            " unchanged. Raise tooltap_queue_size or add replicas.",
            query(f'sum(increase(tooltap_flows_total{{{API}, outcome="dropped"}}[$__range]))'),
            "short",
            1,
        ),
        single(
            "Internal errors",
            "Exceptions tooltap caught in its own code over the time range (traffic passed"
            " unchanged). Anything above 0: read the proxy's stderr for the traceback.",
            query("sum(increase(tooltap_internal_errors_total[$__range]))"),
            "short",
            1,
        ),
        single(
            "Inspector restarts",
            "Times a proxy restarted its inspection process because it died or stopped taking"
            " work (the most any replica reports). Traffic passed meanwhile; the proxy's log says"
            " why.",
            query("max(tooltap_inspector_restarts_total)"),
            "short",
            1,
        ),
        series(
            "Memory held for inspection",
            "Bytes each proxy holds only to inspect them (stream copies, bodies on their way to"
            " the inspector), now and at its most. tooltap_memory_budget caps both; when it is"
            " reached, exchanges are skipped, not held.",
            [
                query("max(tooltap_held_bytes)", "held now", "A"),
                query("max(tooltap_held_peak_bytes)", "held at most", "B"),
            ],
            unit="bytes",
            width=8,
        ),
        series(
            "Flows by outcome",
            "What became of each request/response pair on a watched host, per"
            " second. inspected: classified. skipped: body above tooltap_max_body, or"
            " tooltap_memory_budget full."
            " unparseable: not the expected JSON or stream. upstream_error: the API or network"
            " failed. client_gone: the client hung up before any answer. dropped: the"
            " inspection queue was full. not_read: no dialect reads its body (an API tooltap"
            " does not read, tool-calling or not, or a model family without tool calls; the"
            " log says which).",
            [
                query(
                    f"sum by (outcome) (rate(tooltap_flows_total{{{API}}}[$__rate_interval]))",
                    "{{outcome}}",
                )
            ],
            width=12,
            stacked=True,
        ),
        series(
            "WebSocket messages skipped",
            "WebSocket messages inspection needed and did not use, per second, by why: binary"
            " frames, the memory budget or the inspection queue full, unreadable JSON, a turn"
            " above tooltap_max_body, more lanes or waiting requests than a socket may hold. A"
            " turn that lost messages is counted as skipped, never misread. Audio, images and"
            " text deltas are never held, and are not counted here.",
            [
                query(
                    "sum by (reason) (rate(tooltap_websocket_messages_skipped_total"
                    f"{{{API}}}[$__rate_interval]))",
                    "{{reason}}",
                )
            ],
            width=12,
            stacked=True,
        ),
        series(
            "Trace spans",
            "OpenTelemetry spans per second (tooltap_otlp or OTEL_EXPORTER_OTLP_ENDPOINT), by"
            " outcome: exported to the collector, or dropped because it was down, slow or full."
            " Empty when trace export is off.",
            [
                query(
                    "sum by (outcome) (rate(tooltap_spans_total[$__rate_interval]))", "{{outcome}}"
                )
            ],
            width=12,
            stacked=True,
        ),
        series(
            "Inspection latency",
            "tooltap's own time per flow (parsing, rules, log and metrics), off the traffic"
            " path: percentiles over all replicas. Rising values with dropped flows mean the"
            " proxy needs more CPU or replicas.",
            [
                query(
                    f"histogram_quantile({q}, sum by (le) (rate(tooltap_inspect_seconds_bucket"
                    f"{{{API}}}[$__rate_interval])))",
                    f"p{round(q * 100)}",
                    ref,
                )
                for q, ref in ((0.5, "A"), (0.95, "B"), (0.99, "C"))
            ],
            unit="s",
            width=12,
        ),
        single(
            "Shared state misses",
            "Reads and writes of the replicas' shared state (tooltap_state, Redis) that did not"
            " reach it over the time range: Redis was slow (100 ms) or down, and the replica used"
            " its own memory for those exchanges. A follow-up another replica saw then goes"
            " unchecked, never falsely reported. 0 without tooltap_state.",
            query("sum(increase(tooltap_state_errors_total[$__range]))"),
            "short",
            1,
        ),
    ]


def build() -> dict[str, Any]:
    """The dashboard as JSON-ready data."""
    dashboard = (
        builders.Dashboard("tooltap: tool-calling traffic")
        .uid("tooltap")
        .description(
            "What tooltap sees in LLM tool-calling traffic: strict guarantees, arguments, the tool loop, and the proxy's health."
        )
        .tags(["tooltap", "llm"])
        .time("now-1h", "now")
        .refresh("30s")
        .tooltip(models.DashboardCursorSync.CROSSHAIR)
        .readonly()
    )
    for variable in variables():
        dashboard = dashboard.with_variable(variable)
    rows = [
        ("Strict guarantee", exposure_panels()),
        ("Tool calls", call_panels()),
        ("Tool loop, API and output format", loop_panels()),
        ("MCP tool servers", mcp_panels()),
        ("Tool definitions", definition_panels()),
        ("Proxy health", health_panels()),
    ]
    panel_id = 0
    for title, panels in rows:
        panel_id += 1
        dashboard = dashboard.with_row(builders.Row(title).id(panel_id))
        for panel in panels:
            panel_id += 1
            dashboard = dashboard.with_panel(panel.id(panel_id))
    data: dict[str, Any] = json.loads(json.dumps(dashboard.build(), cls=JSONEncoder))
    return data


def render() -> str:
    return json.dumps(build(), indent=2) + "\n"


if __name__ == "__main__":
    OUTPUT.write_text(render(), encoding="utf-8")
    print(f"wrote {OUTPUT}")
