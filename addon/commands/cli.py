"""The `tooltap` command: run, web, audit, demo, script-path."""

from __future__ import annotations

import argparse
import importlib.util
import sys

from ..audit.arguments import add_arguments as audit_arguments
from ..options import OPTIONS
from .run import SCRIPT, _run, _web, health_address, host_port

# What `tooltap demo` imports beyond the base install: the official SDKs it drives, and the
# WebSocket library of its loopback upstream and of the SDKs' socket transport.
DEMO_EXTRA = (
    "openai", "anthropic", "boto3", "google.genai", "websockets", "mcp", "ollama", "cohere",
)  # fmt: skip


def parser() -> argparse.ArgumentParser:
    top = argparse.ArgumentParser(
        prog="tooltap",
        description="Inspect LLM tool-calling traffic live: a passive mitmproxy addon.",
    )
    sub = top.add_subparsers(dest="command", required=True)

    run = sub.add_parser(
        "run",
        help="run the proxy (reverse to https://api.openai.com on 127.0.0.1:8080 by default)",
        description="Run mitmdump with the tooltap addon. Arguments after -- go to mitmdump.",
    )
    proxy_arguments(run)
    web = sub.add_parser(
        "web",
        help="the proxy in mitmweb: each flow's verdict in a 'tooltap' view, findings marked",
        description="Run mitmweb with the tooltap addon: the same options as `tooltap run`. "
        "Flows with findings are marked and commented; the tooltap view shows each verdict. "
        "Arguments after -- go to mitmweb.",
    )
    proxy_arguments(web)
    web.add_argument(
        "--web",
        type=lambda t: host_port(t, "--web"),
        default=("127.0.0.1", 9466),
        metavar="HOST:PORT",
        help="where the web UI listens (default 127.0.0.1:9466, clear of the listeners' "
        "8080, 8081, ...; it asks for a token or password)",
    )
    web.add_argument("-r", "--read", metavar="FLOWS", help="load a flow file (mitmdump -w) first")

    sub.add_parser("script-path", help="print the path to pass to `mitmdump -s` or `mitmweb -s`")

    audit_arguments(
        sub.add_parser(
            "audit", help="the same rules offline: stored responses, flow/HAR/JSONL files"
        )
    )
    demo = sub.add_parser(
        "demo",
        help="everything on bundled traffic: no key, no network (needs the [demo] extra)",
    )
    demo.add_argument(
        "--serve",
        action="store_true",
        help="keep the upstream and the proxy running afterwards, for your own client",
    )
    demo.add_argument(
        "--web",
        action="store_true",
        help="run the proxy as `tooltap web` and keep it up: the demo's flows in mitmweb",
    )
    return top


def proxy_arguments(run: argparse.ArgumentParser) -> None:
    """The options `tooltap run` and `tooltap web` share."""
    run.add_argument(
        "--upstream",
        action="append",
        metavar="openai|anthropic|gemini|ollama|cohere|URL|mcp:URL",
        help="reverse-proxy target; repeat for more, each on the next port; mcp:URL is an MCP "
        "server (Streamable HTTP), its JSON-RPC read as MCP",
    )
    run.add_argument(
        "--regular",
        action="store_true",
        help="explicit HTTP(S) proxy mode (clients set HTTPS_PROXY)",
    )
    run.add_argument(
        "--listen",
        type=lambda t: host_port(t, "--listen"),
        default=("127.0.0.1", 8080),
        metavar="HOST:PORT",
        help="where the proxy listens (default 127.0.0.1:8080)",
    )
    run.add_argument(
        "--metrics",
        type=lambda t: host_port(t, "--metrics"),
        default=("127.0.0.1", 9464),
        metavar="HOST:PORT",
        help="the /metrics endpoint (default 127.0.0.1:9464; keep it private)",
    )
    run.add_argument(
        "--health",
        type=health_address,
        default=("127.0.0.1", 9465),
        metavar="HOST:PORT|off",
        help="where the proxy itself answers /livez and /readyz, up while its inspector "
        "restarts: point probes here (default 127.0.0.1:9465; --set tooltap_health)",
    )
    for option in OPTIONS:
        if option.flag is not None:
            run.add_argument(
                option.flag,
                choices=option.choices,
                type=int if option.type is int else str,
                metavar=option.metavar or ("N" if option.type is int else None),
                help=f"{option.help} Default: {option.default or 'off'} (--set {option.name}).",
            )
    run.add_argument("--confdir", default="~/.mitmproxy", help=argparse.SUPPRESS)


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    extra: list[str] = []
    if "--" in argv:
        cut = argv.index("--")
        argv, extra = argv[:cut], argv[cut + 1 :]
    args = parser().parse_args(argv)
    if args.command == "script-path":
        print(SCRIPT)
        return 0
    if args.command in ("run", "web"):
        for item in extra:
            if item.startswith("confdir="):
                args.confdir = item.split("=", 1)[1]
        return _run(args, extra) if args.command == "run" else _web(args, extra)
    if args.command == "audit":
        from ..audit.command import main as audit  # noqa: PLC0415

        return audit(args)
    missing = [name for name in DEMO_EXTRA if importlib.util.find_spec(name) is None]
    if missing:
        print(
            f"tooltap demo needs {', '.join(missing)}: pip install 'tooltap[demo]'",
            file=sys.stderr,
        )
        return 2
    from .demo import main as demo  # noqa: PLC0415 - only the demo needs its extra

    return demo(args)


if __name__ == "__main__":
    sys.exit(main())
