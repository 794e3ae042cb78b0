"""Turn bench/out/*.json into markdown tables, the latency plot, and the README section."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

NOISY = 0.25  # as targets.Noise.NOISY (not imported: the report needs no psutil)
START, END = "<!-- results:start -->", "<!-- results:end -->"


def _load(out: Path, name: str) -> dict[str, Any] | None:
    path = out / f"{name}.json"
    return json.loads(path.read_text()) if path.exists() else None


def _table(header: list[str], rows: list[list[Any]]) -> str:
    def cell(v: Any) -> str:
        if isinstance(v, float):
            return f"{v:,.0f}" if abs(v) >= 1000 else f"{v:.3g}" if abs(v) < 10 else f"{v:.1f}"
        return str(v)

    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(cell(v) for v in row) + " |" for row in rows]
    return "\n".join(lines)


def _mark(ok: bool) -> str:
    return "met" if ok else "**missed**"


def json_section(data: dict[str, Any], targets: list[str]) -> str:
    parts = [
        f"### 1. JSON throughput and latency ({data['settings']['rounds']} interleaved rounds, medians)"
    ]
    for key, label in (("c1", "sequential (1 connection)"), ("c16", "concurrency 16")):
        block = data["summary"][key]
        rows = [
            [
                name,
                r["rps"],
                r["p50_ms"],
                r["p99_ms"],
                r["cpu_ms_per_req"],
                r.get("child_cpu_ms_per_req", 0.0),
                int(r["errors"]),
            ]
            for name, r in block["targets"].items()
        ]
        parts.append(
            f"**{label}**\n\n"
            + _table(
                [
                    "target",
                    "req/s",
                    "p50 ms",
                    "p99 ms",
                    "proxy CPU ms/req",
                    "+ inspector process CPU ms/req",
                    "errors",
                ],
                rows,
            )
        )
        ratio_rows = [
            [pair, r["rps"], r["p50_ms"], r["p99_ms"], r["cpu_ms_per_req"]]
            for pair, r in block["ratios"].items()
        ]
        parts.append(_table(["ratio", "req/s", "p50", "p99", "CPU/req"], ratio_rows))
        main = block["ratios"]["tooltap/mitmdump"]
        targets.append(
            f"JSON {label}: tooltap/mitmdump req/s {main['rps']:.2f} (>= 0.95: {_mark(main['rps'] >= 0.95)}),"
            f" p50 {main['p50_ms']:.2f} (<= 1.05: {_mark(main['p50_ms'] <= 1.05)})"
        )
    not_inspected = {
        name: r.get("not_inspected")
        for block in data["summary"].values()
        for name, r in block["targets"].items()
        if r.get("not_inspected") is not None
    }
    parts.append(
        f"Flows tooltap did not log a turn for: {not_inspected}; dropped (metric): {data['dropped']};"
        f" addon reloads during the run: {data.get('reloads')}; JSON log lines glued to"
        f" mitmproxy's own output on a shared stdout: {data.get('glued_log_lines')}."
    )
    cal = data["calibration"]
    cal_rows = []
    for kind in ("replay-server", "bench-upstream"):
        row: list[Any] = [kind]
        for target in ("direct", "mitmdump"):
            for c in (1, 16):
                row.append(cal[f"{kind}/{target}/c{c}"]["rps"])
        row.append(cal[f"{kind}/direct/c16"]["upstream_cpu_ms_per_req"])
        row.append(max(cal[k].get("noise", 0.0) for k in cal if k.startswith(kind)))
        cal_rows.append(row)
    parts.append(
        "**Upstream check** (is the upstream the bottleneck? req/s)\n\n"
        + _table(
            [
                "upstream",
                "direct c1",
                "direct c16",
                "mitmdump c1",
                "mitmdump c16",
                "upstream CPU ms/req",
                "others, cores (max)",
            ],
            cal_rows,
        )
    )
    return "\n\n".join(parts)


def stream_section(data: dict[str, Any], targets: list[str]) -> str:
    s = data["settings"]
    rows = [
        [
            name,
            f"{r['events_ok']}/{r['streams']}",
            r["delay_p50_ms"],
            r["delay_p99_ms"],
            r["added_p50_ms"],
            r["ttfe_p50_ms"],
            r["total_p50_ms"],
            int(r["late_events"]),
        ]
        for name, r in data["summary"].items()
    ]
    tooltap = data["summary"]["tooltap"]
    targets.append(
        f"Streaming: tooltap's per-event delay minus mitmdump's, median {tooltap['vs_mitmdump_p50_ms']:+.3f} ms"
        f" (within 0.2 ms: {_mark(abs(tooltap['vs_mitmdump_p50_ms']) <= 0.2)}); first event"
        f" {tooltap['ttfe_vs_mitmdump_ms']:+.2f} ms vs mitmdump, no late events:"
        f" {_mark(tooltap['late_events'] == 0 and tooltap['ttfe_vs_mitmdump_ms'] <= 1.0)}"
    )
    return (
        f"### 2. Streaming ({s['events']} SSE events {s['gap_ms']:.0f} ms apart, {s['rounds']} streams per target)\n\n"
        + _table(
            [
                "target",
                "all 50 events",
                "event delay p50 ms",
                "p99 ms",
                "added p50 ms (vs direct)",
                "first event ms",
                "whole stream ms",
                "events > 100 ms late",
            ],
            rows,
        )
        + f"\n\ntooltap logged {data['tooltap_turns_logged']} turns for the streams it carried (warm-up included)."
    )


def memory_section(data: dict[str, Any], targets: list[str]) -> str:
    s = data["settings"]
    rows = [
        [
            name,
            r["rss_start_mib"],
            r["rss_warm_mib"],
            r["rss_end_mib"],
            r["rss_max_mib"],
            r["growth_mib_per_10k_after_warmup"],
        ]
        for name, r in data["summary"].items()
    ]
    summary = data["summary"]
    base = summary["mitmdump"]["growth_mib_per_10k_after_warmup"]
    ours = {n: r["growth_mib_per_10k_after_warmup"] for n, r in summary.items() if n != "mitmdump"}
    flat = all(g <= max(1.0, base + 1.0) for g in ours.values())
    targets.append(
        "Memory: RSS growth after warm-up, MiB per 10k flows: "
        + ", ".join(f"{n} {g:.2f}" for n, g in ours.items())
        + f" (plain mitmdump: {base:.2f}); flat: {_mark(flat)}"
    )
    flows = ", ".join(f"{k} {int(v)}" for k, v in data["tooltap_flows"].items())
    return (
        f"### 3. Memory ({s['flows']:,} mixed flows at concurrency {s['concurrency']}, warm-up {s['warmup']:,})\n\n"
        + _table(
            ["process", "RSS start MiB", "after warm-up", "end", "max", "growth MiB / 10k flows"],
            rows,
        )
        + f"\n\ntooltap_flows_total: {flows}; internal errors: {int(data['tooltap_internal_errors'])};"
        f" addon reloads during the run: {data.get('tooltap_reloads')}."
    )


def core_section(data: dict[str, Any], targets: list[str]) -> str:
    rows = [
        [
            name,
            r["bytes"],
            r["calls"],
            r["inspect_us"],
            r["json_loads_us"],
            r["ratio_to_json_loads"],
        ]
        for name, r in data["cases"].items()
    ]
    medium = data["cases"]["medium"]["ratio_to_json_loads"]
    targets.append(
        f"Core: inspect / json.loads, medium case {medium:.2f} (<= 3: {_mark(medium <= 3)})"
    )
    sse = data["cases"]["medium-sse"]["ratio_to_json_loads"]
    targets.append(
        f"Core: inspect / json.loads, medium SSE case {sse:.2f} (<= 2: {_mark(sse <= 2)})"
    )
    scale_rows = []
    for point, step in zip(data["inspect_scaling"], [None, *data["inspect_growth"]], strict=False):
        scale_rows.append(
            [
                f"{point['scale']}x",
                point["bytes"],
                point["inspect_us"],
                point["ratio_to_json_loads"],
                f"{step['size_ratio']:.1f}x size -> {step['time_ratio']:.1f}x time" if step else "",
            ]
        )
    stream_rows = []
    for api in ("chat", "responses", "messages", "ollama"):
        if api not in data["streams"]:  # a run from before Ollama was read
            continue
        points = data["streams"][api]["per_event"]
        growth = data["streams"][api]["growth"]
        stream_rows.append(
            [
                api,
                *[p["mb_per_s"] for p in points],
                "; ".join(f"{g['size_ratio']:.1f}x -> {g['time_ratio']:.1f}x" for g in growth),
            ]
        )
    long_line = data["streams"]["chat-long-line-64B-chunks"]
    kib = data["streams"]["chat-1KiB-chunks"]
    ollama = data.get("framing", {}).get("ollama")
    ollama_line = (
        ""
        if ollama is None
        else f"\n\nA turn of three calls, {ollama['chat_sse']['bytes']:,} B as a Chat SSE stream"
        f" ({ollama['chat_sse']['events']} events) and {ollama['ollama_ndjson']['bytes']:,} B as an"
        f" Ollama NDJSON stream ({ollama['ollama_ndjson']['events']} lines), inspected side by side:"
        f" {ollama['chat_sse']['inspect_us']:.1f} µs and {ollama['ollama_ndjson']['inspect_us']:.1f}"
        f" µs ({ollama['ollama_to_chat']:.2f}x). One 2 MB argument object in one NDJSON line, fed in"
        f" 64-byte pieces: {data['streams']['ollama-long-line-64B-chunks']['mb_per_s']:.1f} MB/s."
    )
    return (
        "### 4. Core cost\n\n"
        + _table(
            ["exchange", "bytes (req + resp)", "calls", "inspect µs", "json.loads µs", "ratio"],
            rows,
        )
        + "\n\n**Growth with size** (history rounds and the file argument scaled together)\n\n"
        + _table(["scale", "bytes", "inspect µs", "ratio to json.loads", "step"], scale_rows)
        + "\n\n**StreamReader throughput**, one feed() per event, streams of 1x / 10x / 100x\n\n"
        + _table(["dialect", "1x MB/s", "10x MB/s", "100x MB/s", "size -> time"], stream_rows)
        + f"\n\nChat stream fed in 1 KiB pieces ({kib['bytes'] / 1e6:.1f} MB): {kib['mb_per_s']:.1f} MB/s."
        f" One 2 MB argument string fed in 64-byte pieces: {long_line['mb_per_s']:.1f} MB/s (no quadratic rebuild)."
        + ollama_line
    )


HEADER = ["size (request + response)", "exchanges", "of them SSE", "json.loads µs", "inspect",
          "Session.read", "with times", "calls timed", "first sight"]  # fmt: skip
COMPILED_HEADER = ["inspect, compiled", "Session.read, compiled", "with times, compiled"]
TIMED = "session_read_timed"  # Session.read of the exchanges given times (a run before has none)


def _worst(ratios: dict[str, float]) -> float:
    return max(ratios["inspect"], ratios["session_read"], ratios.get(TIMED, 0.0))


def _said(ratios: dict[str, float]) -> str:
    timed = f" (with times {ratios[TIMED]:.2f}x)" if TIMED in ratios else ""
    return f"inspect {ratios['inspect']:.2f}x, Session.read {ratios['session_read']:.2f}x{timed}"


def realworld_section(data: dict[str, Any], targets: list[str]) -> str:
    groups = data["groups"]
    # The same groups with the hot modules compiled, as the image builds them, where measured.
    built = (data.get("compiled") or {}).get("groups") or {}
    rows = [
        [
            name,
            g["exchanges"],
            g["streams"],
            g["us_per_exchange"]["json_loads"],
            g["ratio_to_json_loads"]["inspect"],
            g["ratio_to_json_loads"]["session_read"],
            g["ratio_to_json_loads"].get(TIMED, ""),
            g.get("tool_times", ""),
            g["ratio_to_json_loads"]["first_sight"],
            *(
                [built[name]["inspect"], built[name]["session_read"], built[name].get(TIMED, "")]
                if name in built
                else ([""] * 3 if built else [])
            ),
        ]
        for name, g in groups.items()
    ]
    for name, g in groups.items():
        bound = 1.5 if name == "large" else 3.0
        worst = _worst(g["ratio_to_json_loads"])
        line = (
            f"Real corpus, {name}: {_said(g['ratio_to_json_loads'])} json.loads"
            f" (<= {bound:g}: {_mark(worst <= bound)})"
        )
        if name in built:
            most = _worst(built[name])
            line += (
                "; compiled as the image builds it, on this interpreter:"
                f" {_said(built[name])} ({_mark(most <= bound)})"
            )
        targets.append(line)
    unmeasured = (data.get("compiled") or {}).get("why")
    compiled_note = (
        f" Compiled: not measured in this run ({unmeasured})." if unmeasured else
        " The last three columns: the same, with the modules setup.py lists compiled (the"
        " container image's build), measured after them in a child process."
        if built else ""
    )  # fmt: skip
    left = ", ".join(f"{why}: {n}" for why, n in data["left_out"].items())
    profile_lines = []
    for name, prof in data.get("profile", {}).items():
        top = [
            f"{t['function']} {t['share'] * 100:.0f}%"
            for t in prof["top_total"]
            if t["function"].startswith(("inspect (", "_read", "read_turn (tooltap/core/wire",
                                         "check_loop (tooltap/core/wire", "declared_in",
                                         "classify", "check (", "StreamReader.feed"))
        ][:9]  # fmt: skip
        profile_lines.append(f"- {name}: " + "; ".join(top))
    return (
        f"### 4b. Core cost on the real corpus ({', '.join(data['files'])}; the fastest of"
        f" {data['passes']} passes, thread CPU time)\n\n"
        + _table(HEADER + (COMPILED_HEADER if built else []), rows)
        + "\n\nWith times: Session.read of the same exchanges given the times the proxy records"
        " (the corpus keeps none), so that the calls later exchanges answer are timed; calls"
        " timed: those tool times in one pass."
        + f" Left out: {left}.{compiled_note} Where the worker's time goes (pyinstrument,"
        " Session.read, share of the total; bench/out/profile-<group>.txt):\n\n"
        + "\n".join(profile_lines)
    )


def throughput_section(data: dict[str, Any], targets: list[str]) -> str:
    summary = data["summary"]
    rows = [
        [label, *[f"{r:.3f}" for r in summary[load]["runs"]], summary[load]["median"],
         f"{summary[load]['min']:.3f}-{summary[load]['max']:.3f}"]
        for load, label in (("sequential", "sequential"), ("c16", "concurrency 16"))
    ]  # fmt: skip
    runs = len(summary["sequential"]["runs"])
    seq = summary["sequential"]["median"]
    targets.append(
        f"JSON throughput, {runs} runs: tooltap/mitmdump req/s sequential median {seq:.2f}"
        f" ({summary['sequential']['min']:.2f}-{summary['sequential']['max']:.2f};"
        f" >= 0.95: {_mark(seq >= 0.95)}), concurrency 16 median {summary['c16']['median']:.2f}"
        f" ({summary['c16']['min']:.2f}-{summary['c16']['max']:.2f})"
    )
    errors = sum(r["errors"] for r in data["runs"])
    missing = sum(r["not_inspected"] for r in data["runs"])
    return (
        f"### 1b. JSON throughput in {runs} runs (each: fresh processes,"
        f" {data['settings']['rounds']} rounds taking turns; a run's ratio is the median of its"
        " rounds' tooltap/mitmdump req/s)\n\n"
        + _table(["load", *[f"run {n + 1}" for n in range(runs)], "median", "spread"], rows)
        + f"\n\nErrors: {errors}; flows tooltap logged no turn for: {missing}."
    )


def profile_section(data: dict[str, Any]) -> str:
    st = data["stages_us"]
    rows = [[name, us] for name, us in st.items()]
    skip = ("run (bench", "<lambda> (bench", "_handle (", "handle (tooltap/addon", "[self]")
    top = [t for t in data["top_total"] if not t["function"].startswith(skip)][:14]
    top_rows = [[t["function"], f"{t['share'] * 100:.1f}%"] for t in top]
    return (
        "### 5. Worker profile (medium exchange, the addon's worker handler;"
        " pyinstrument, bench/out/profile.html)\n\n"
        + _table(["stage", "µs per flow"], rows)
        + "\n\n"
        + _table(["function (total time, share of the worker path)", "share"], top_rows)
    )


def stress_section(data: dict[str, Any]) -> str:
    lines = [
        "### Memory under stress (peak RSS of the proxy and its children, MiB)",
        "",
        f"Target: tooltap's peak at most the baseline's + the budget ({data['budget_mib']:.0f})"
        f" + {data['overhead_mib']} MiB (the inspector and fixed cost); {STRESS_AFTER}"
        " The proxy's and the inspector's own peaks are sampled apart (not at the same moment).",
        "",
        "| scenario | flows | tooltap peak | proxy / inspector peaks | baseline peak | over baseline | tooltap start / after | mitmdump after | intact | within target |",
        "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    for row in data["scenarios"].values():
        base = row.get("mitmdump-streaming") or row["mitmdump"]
        kind = "mitmdump streaming" if "mitmdump-streaming" in row else "mitmdump"
        tt = row["tooltap"]
        apart = f"{tt.get('proxy_peak_mib', '-')} / {tt.get('child_peak_mib', '-')}"
        lines.append(
            f"| {row['what']} | {row['count']} | {tt['peak_mib']} | {apart} |"
            f" {base['peak_mib']} ({kind}) |"
            f" {row['over_baseline_mib']} | {tt['start_mib']} / {tt['after_mib']} |"
            f" {row['mitmdump']['after_mib']} |"
            f" {tt['intact']}/{tt['intact'] + tt['broken']} | {'yes' if row['within_target'] else 'NO'} |"
        )
    h = data.get("handover")
    if h:
        lines += [
            "",
            f"Handing a record with a {h.get('body_mib', 6):g} MiB body to the inspector's pipe: then (pickled whole,"
            f" then joined to its length) {h['then_ms']} ms and {h['then_allocated_mib']} MiB"
            f" allocated; now (metadata pickled, the body written as it is) {h['now_ms']} ms and"
            f" {h['now_allocated_mib']} MiB.",
        ]
    costly = data.get("pathological")
    if costly:
        lines += [
            "",
            "| one pathological exchange | inspector CPU, ms | left unchecked |",
            "| --- | --- | --- |",
        ]
        lines += [
            f"| {name} | {row['cpu_ms']} | {'; '.join(row['unchecked']) or '-'} |"
            for name, row in costly.items()
        ]
    return "\n".join(lines) + "\n"


def websocket_section(data: dict[str, Any]) -> str:
    lines = [
        f"### WebSocket messages ({data['events']:,} small events per socket, one socket per run,"
        f" {data['rounds']} interleaved rounds, medians)",
        "",
        f"Delay: when the client had a message minus when the upstream sent it (paced: one every"
        f" {data['gap_ms']:g} ms). Per message: the burst's {data['events']:,} back to back, first"
        f" send to last receipt, divided by {data['events']:,}. tooltap inspected {data['turns_inspected']} of"
        f" {data['sockets_per_target']} turns.",
        "",
        "| turn | direct p50 / p99 | mitmdump p50 / p99 | tooltap p50 / p99 | tooltap added p50 / p99 |",
        "| --- | --- | --- | --- | --- |",
    ]
    for name, row in data["rows"].items():
        if not name.endswith("paced"):
            continue
        cells = [
            f"{row[t]['delay_p50_ms']} / {row[t]['delay_p99_ms']} ms"
            for t in ("direct", "mitmdump", "tooltap")
        ]
        lines.append(
            f"| {name} | {' | '.join(cells)} | {row['added_p50_ms']} / {row['added_p99_ms']} ms |"
        )
    lines += [
        "",
        "| turn | direct per message | mitmdump per message | tooltap per message | tooltap added |",
        "| --- | --- | --- | --- | --- |",
    ]
    for name, row in data["rows"].items():
        if not name.endswith("burst"):
            continue
        cells = [f"{row[t]['per_message_ms']} ms" for t in ("direct", "mitmdump", "tooltap")]
        lines.append(f"| {name} | {' | '.join(cells)} | {row['added_per_message_ms']} ms |")
    return "\n".join(lines) + "\n"


def live_section(data: dict[str, Any]) -> str:
    rows = data["rows"]
    lines = [
        f"### Gemini Live beside Realtime and a Chat stream ({data['rounds']} rounds of the same"
        " content a socket: two calls, their results, a ten-piece answer)",
        "",
        "Look: the proxy's tap on each socket message (on mitmproxy's event loop). Inspect: the"
        " inspector's session reader and inspect() on each turn, per turn.",
        "",
        "| API | messages | held | look µs/message | look µs/turn | inspect µs/turn |",
        "| --- | --- | --- | --- | --- | --- |",
    ]
    for api, row in rows.items():
        cells = [row["messages"], row.get("held", "-"), row.get("look_us_per_message", "-"),
                 row.get("look_us_per_turn", "-"), row["inspect_us_per_turn"]]  # fmt: skip
        lines.append(f"| {api} | " + " | ".join(str(c) for c in cells) + " |")
    lines += [
        "",
        f"Gemini Live against Realtime: {data['live_to_realtime']}x the inspector's cost per"
        f" turn, {data['look_live_to_realtime']}x the tap's; against the Chat stream:"
        f" {data['live_to_chat']}x.",
    ]
    return "\n".join(lines) + "\n"


def web_section(data: dict[str, Any]) -> str:
    rows = data["rows"]
    plan = data["settings"]
    lines = [
        f"### tooltap web beside mitmweb ({plan['requests']} sequential chat JSON turns per batch,"
        f" {plan['rounds']} interleaved rounds, medians)",
        "",
        "CPU: the proxy process; children: tooltap's inspector. Under mitmweb, tooltap also"
        " inspects each flow on a worker thread in the proxy process, for the marks, comments and"
        " the tooltap view.",
        "",
        "| proxy | p50 / p99 | CPU per request | children's CPU | inspected |",
        "| --- | --- | --- | --- | --- |",
    ]
    for name, row in rows.items():
        lines.append(
            f"| {name} | {row['p50_ms']:.3f} / {row['p99_ms']:.3f} ms |"
            f" {row['cpu_ms_per_req']:.2f} ms | {row['child_cpu_ms_per_req']:.2f} ms |"
            f" {row['inspected']} of {row['requests']} |"
        )

    def added(a: str, b: str, key: str) -> float:
        return float(rows[a][key] - rows[b][key])

    lines += [
        "",
        f"Added CPU per request in the proxy process: tooltap run over mitmdump"
        f" {added('tooltap run', 'mitmdump', 'cpu_ms_per_req'):+.2f} ms, tooltap web over mitmweb"
        f" {added('tooltap web', 'mitmweb', 'cpu_ms_per_req'):+.2f} ms, so the annotations under"
        " mitmweb (the second over the first)"
        f" {added('tooltap web', 'mitmweb', 'cpu_ms_per_req') - added('tooltap run', 'mitmdump', 'cpu_ms_per_req'):+.2f} ms."
        " The annotation work alone"
        f" (inspect, mask, store the verdict; in this process, {plan['annotations']:,} times):"
        f" {data['annotation_ms']:.3f} ms per flow.",
    ]
    return "\n".join(lines) + "\n"


def traces_section(data: dict[str, Any]) -> str:
    plan = data["settings"]
    spans = data["spans"]
    return (
        f"### Trace export (`traces`: the inspector on {plan['exchanges']:,} chat JSON turns per"
        f" batch, {plan['rounds']} interleaved rounds, medians)\n\n"
        "CPU of the inspector's process per exchange (inspect, log, metrics; with export on, the"
        " span and the OTLP/HTTP export to a collector stand-in in another process, flushed at"
        " the end of each batch).\n\n"
        "| export | CPU per exchange |\n| --- | --- |\n"
        f"| off | {data['off_ms']:.3f} ms |\n| on | {data['on_ms']:.3f} ms |\n\n"
        f"Export adds {data['added_ms']:.3f} ms per exchange ({data['ratio']:.2f}x);"
        f" {spans['exported']:,} spans exported, {spans['dropped']} dropped.\n"
    )


def definitions_section(data: dict[str, Any]) -> str:
    plan = data["settings"]
    rows = "".join(
        f"| {name} | {r['without_ms']:.3f} ms | {r['with_ms']:.3f} ms | {r['added_ms']:.3f} ms"
        f" ({r['ratio']:.2f}x) | {r['own_ms']:.3f} ms |\n"
        for name, r in data["exchanges"].items()
    )
    return (
        "### Tool definitions (`definitions`: fingerprints, hidden text and pins;"
        f" {plan['rounds']} interleaved rounds of {plan['exchanges']:,} exchanges, the fastest"
        " of each)\n\n"
        "CPU of the inspector per exchange (inspect, the pins, log, metrics), with the"
        " definitions read and without (the same code, their reading made a no-op), and the"
        " definitions' own work timed alone:\n\n"
        "| exchange | without | with | added | their own work |\n"
        "| --- | --- | --- | --- | --- |\n" + rows
    )


def timing_section(data: dict[str, Any]) -> str:
    rows = "".join(
        f"| {label} | {r['without_us']:.0f} us ({r['x_json_without']:.2f}x) |"
        f" {r['with_us']:.0f} us ({r['x_json_with']:.2f}x) | {r['ratio']:.3f}x |"
        f" {r['added_us_per_exchange']:.1f} us |\n"
        for label, r in (
            ("a streamed Chat turn (50 events, one piece each)", data["stream"]),
            ("an agent's loop (a turn, 3 MCP runs, the follow-up)", data["loop"]),
        )
    )
    said = data["said"]
    return (
        f"### What timing adds (`timing`: {data['settings']['rounds']} interleaved rounds, the"
        " fastest of each)\n\n"
        "The same work with the exchanges' times and without (in brackets: as a multiple of"
        " json.loads of the same bytes). For the stream, inspect; for the loop, the session's"
        " inspect of each exchange with its tool time (calls remembered, runs begun and ended,"
        " answers timed, linked and their batch judged).\n\n"
        "| case | without times | with times | ratio | added per exchange |\n"
        "| --- | --- | --- | --- | --- |\n" + rows + "\n"
        f"The timed runs said: first token {said['first_token_ms']} ms, {said['tool_times']}"
        f" calls timed, {said['linked_runs']} linked to their runs, {said['loop_errors']}.\n"
    )


def state_section(data: dict[str, Any]) -> str:
    plan = data["settings"]
    if "skipped" in data:
        return f"### Shared state in Redis (`state`)\n\nSkipped: {data['skipped']}.\n"
    cost, flows = data["inspector"], data["flows"]
    rows = [
        [name, r["requests"], r["errors"], r["inspected"], r["p50_ms"], r["p90_ms"], r["p99_ms"],
         r["p50_ratio"]]
        for name, r in flows.items()
    ]  # fmt: skip
    return (
        "### Shared state in Redis (`state`: a Responses chain, a turn leaving a call then its"
        f" follow-up with previous_response_id; {plan['rounds']} interleaved rounds, medians)\n\n"
        f"The inspector on {plan['exchanges']:,} exchanges per batch, in this process, with"
        " `tooltap_state` off (its own memory) and on (redis-server on loopback):\n\n"
        "| state | inspector CPU per exchange | inspector wall time per exchange |\n"
        "| --- | --- | --- |\n"
        f"| this process | {cost['local_ms']:.3f} ms | {cost['local_wall_ms']:.3f} ms |\n"
        f"| Redis | {cost['redis_ms']:.3f} ms | {cost['redis_wall_ms']:.3f} ms |\n\n"
        f"Redis adds {cost['added_cpu_ms']:.3f} ms of inspector CPU ({cost['ratio']:.2f}x) and"
        f" {cost['added_wall_ms']:.3f} ms of inspector time per exchange (its round trips), and"
        f" redis-server spends {cost['redis_server_cpu_ms']:.3f} ms; {cost['state_errors']}"
        " state errors.\n\n"
        f"The flow: {plan['flows']} sequential requests per batch through `tooltap run` with"
        " and without `--state`, the latency the client sees (the store is used after the"
        " flow, by the inspector process):\n\n"
        + _table(
            [
                "proxy",
                "requests",
                "errors",
                "inspected",
                "p50 ms",
                "p90 ms",
                "p99 ms",
                "p50 vs without",
            ],
            rows,
        )
    )


STRESS_AFTER = (
    "5 s after the burst, tooltap is back within the budget of where it started (or of plain"
    " mitmdump after the same burst, whichever is higher: mitmproxy keeps part of a burst of"
    " buffered bodies itself)."
)


def why_section(data: dict[str, Any]) -> str:
    parts = [
        "### 6. Where tooltap's cost came from (variants of the addon, bench/variants.py;"
        f" {data['settings']['rounds']} interleaved rounds, medians; measured on"
        f" {_code(data.get('meta', {}).get('machine', {}))}, when inspection ran in a thread)"
    ]
    for key, label in (("c1", "sequential"), ("c16", "concurrency 16")):
        rows = [
            [
                name,
                r["rps"],
                r["rps_ratio"],
                r["p50_ms"],
                r["p50_ratio"],
                r["cpu_ms_per_req"],
                r["child_cpu_ms_per_req"],
            ]
            for name, r in data["summary"][key].items()
        ]
        parts.append(
            f"**{label}**\n\n"
            + _table(
                [
                    "proxy",
                    "req/s",
                    "vs mitmdump",
                    "p50 ms",
                    "vs mitmdump",
                    "proxy CPU ms/req",
                    "worker process CPU ms/req",
                ],
                rows,
            )
        )
    return "\n\n".join(parts)


def plot(data: dict[str, Any], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 2, figsize=(11, 4.2), sharey=True)
    # (colour, line style, label); tooltap-thread only when the run had it
    styles = {
        "direct": ("tab:green", "-", "no proxy"),
        "mitmdump": ("tab:blue", "-", "mitmdump"),
        "tooltap": ("tab:red", "-", "tooltap"),
        "tooltap-thread": ("tab:gray", "--", "tooltap, inspector in a thread"),
    }
    for ax, concurrency in zip(axes, (1, 16), strict=True):
        for name, (colour, style, label) in styles.items():
            every = [
                b
                for b in data["batches"]
                if b["target"] == name and b["concurrency"] == concurrency
            ]
            # The batches the tables use: those not disturbed by other jobs.
            mine = [b for b in every if b.get("noise", 0.0) <= NOISY] or every
            values = sorted(v for b in mine for v in b["latencies_ms"])
            if not values:
                continue
            ys = [(i + 1) / len(values) for i in range(len(values))]
            p50 = values[len(values) // 2]
            ax.plot(values, ys, color=colour, linestyle=style, label=f"{label} (p50 {p50:.2f} ms)")
        ax.set_xscale("log")
        ax.set_xlabel("request latency, ms (log)")
        ax.set_title("sequential" if concurrency == 1 else f"concurrency {concurrency}")
        ax.grid(True, which="both", alpha=0.3)
        ax.legend(loc="lower right", fontsize=8)
    axes[0].set_ylabel("fraction of requests")
    fig.suptitle("~4 KB tool-calling JSON through a reverse proxy: latency CDF", fontsize=11)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def neighbour_section(data: dict[str, Any]) -> str:
    summary = data["summary"]
    rows = [
        [label, f"{summary[load]['tooltap']:.3f}", f"{summary[load]['beside']:.3f}",
         summary[load]["tooltap_cpu_ms"], summary[load]["beside_cpu_ms"]]
        for load, label in (("sequential", "sequential"), ("c16", "concurrency 16"))
    ]  # fmt: skip
    return (
        "### 7. Plain mitmdump beside a process doing the inspector's work"
        f" ({data['settings']['rounds']} rounds taking turns, medians; each ratio against"
        " plain mitmdump alone in the same round)\n\n"
        + _table(
            [
                "load",
                "tooltap",
                "mitmdump beside the neighbour",
                "inspector CPU ms/req",
                "neighbour CPU ms/req",
            ],
            rows,
        )
    )


def apart_section(data: dict[str, Any]) -> str:
    title = "### 8. The sequential gap taken apart, the proxy alone on a core"
    if data.get("skipped"):
        return f"{title}\n\nNot measured: {data['skipped']}.\n"
    summary = data["summary"]
    labels = {
        "mitmdump": "plain mitmdump",
        "idle": "tooltap, its flow hooks doing nothing",
        "stopped": "tooltap, its inspector stopped",
        "tooltap": "tooltap",
    }
    rows = [
        [labels[name], f"{row['ratio']:.3f}", row["proxy_user_ms"], row["proxy_system_ms"],
         row["inspector_cpu_ms"], f"{row['preempted_per_request']:.3f}"]
        for name, row in summary.items()
    ]  # fmt: skip
    header = [
        "variant",
        "req/s ratio",
        "proxy user CPU ms/req",
        "proxy system CPU ms/req",
        "inspector CPU ms/req",
        "proxy preempted per request",
    ]
    return (
        f"{title} ({data['settings']['rounds']} rounds of {data['settings']['requests']}"
        " requests on one connection, taking turns; medians; each ratio against plain mitmdump"
        " in the same round)\n\n" + _table(header, rows)
    )


def _code(machine: dict[str, Any]) -> str:
    code = machine.get("code", "working tree")
    return code if code.startswith("snapshot") else f"{code} at {machine.get('commit', '?')}"


def published(readme: str) -> list[str]:
    """The benchmarks whose results README.md shows: the names its "Runs:" line gives."""
    _, _, block = readme.partition(START)
    for line in block.partition(END)[0].splitlines():
        if line.startswith("Runs: "):
            return [run.split(" ", 1)[0] for run in line.removeprefix("Runs: ").split("; ")]
    return []


def write(out: Path, here: Path, readme: bool, replace_all: bool = True) -> str | None:
    """Write results.md from the results in `out`, and with `readme` README.md's results too.
    Without replace_all, README.md is left as it is when it shows a benchmark `out` holds no
    results of (a run of some of them, in a fresh checkout): why, returned."""
    targets: list[str] = []
    sections = []
    metas: dict[str, dict[str, Any]] = {}
    for name, render in (
        ("json", json_section),
        ("throughput", throughput_section),
        ("stream", stream_section),
        ("memory", memory_section),
        ("core", core_section),
        ("realworld", realworld_section),
    ):
        data = _load(out, name)
        if data is not None:
            metas[name] = data.get("meta", {})
            sections.append(render(data, targets))
    for name, render_plain in (
        ("profile", profile_section),
        ("websocket", websocket_section),
        ("live", live_section),
        ("web", web_section),
        ("traces", traces_section),
        ("state", state_section),
        ("definitions", definitions_section),
        ("timing", timing_section),
        ("stress", stress_section),
        ("why", why_section),
        ("neighbour", neighbour_section),
        ("apart", apart_section),
    ):
        data = _load(out, name)
        if data is not None:
            metas[name] = data.get("meta", {})
            sections.append(render_plain(data))
    head = ""
    if metas:
        m = next(iter(metas.values()))["machine"]
        runs = "; ".join(
            f"{name} {meta.get('started', '?')} ({meta.get('mode', '?')},"
            f" {_code(meta.get('machine', {}))})"
            for name, meta in metas.items()
        )
        head = (
            f"Machine: {m['cpu']}, {m['cores']} cores, {m['memory_gib']} GiB, {m['os']};"
            f" Python {m['python']}, mitmproxy {m['mitmproxy']}.\n\nRuns: {runs}.\n\n"
        )
    summary = "**Targets**\n\n" + "\n".join(f"- {t}" for t in targets)
    text = head + summary + "\n\n" + "\n\n".join(sections) + "\n"
    (out / "results.md").write_text(text)
    path = here / "README.md"
    current = path.read_text() if path.exists() else f"{START}\n{END}\n"
    lost = [name for name in published(current) if name not in metas]
    kept = None
    if readme and lost and not replace_all:
        readme = False
        kept = (
            f"bench/README.md keeps its results: {out} holds none of {', '.join(lost)}, which "
            "it shows. Run them too, or pass --readme to publish this run's alone."
        )
    json_data = _load(out, "json")
    if json_data is not None:
        plot(json_data, (here if readme else out) / "latency.png")
    if readme:
        before, _, rest = current.partition(START)
        _, _, after = rest.partition(END)
        path.write_text(before + START + "\n" + text + END + after)
    return kept
