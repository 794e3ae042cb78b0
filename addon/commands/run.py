"""`tooltap run`: mitmdump with the tooltap addon, its own log on stderr."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any, NoReturn
from urllib.parse import urlsplit

from ..handover.budget import exit_at_once, map_large_allocations
from ..options import OPTIONS
from ..options import host_port as parse_host_port

UPSTREAMS = {
    "openai": "https://api.openai.com",
    "anthropic": "https://api.anthropic.com",
    "gemini": "https://generativelanguage.googleapis.com",
    "ollama": "http://localhost:11434",  # the user's own Ollama, only when named
    "cohere": "https://api.cohere.com",
}
SCRIPT = Path(__file__).with_name("script.py")
WEB_COLUMNS = ("tls", "icon", "path", "method", "status", "comment", "size", "time")


def host_port(text: str, option: str) -> tuple[str, int]:
    try:
        return parse_host_port(text, option)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from exc


def health_address(text: str) -> tuple[str, int] | None:
    """--health HOST:PORT, or off."""
    return None if text == "off" else host_port(text, "--health")


def _address(host: str, port: int) -> str:
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


ANY_HOST = ("", "0.0.0.0", "::")  # noqa: S104 - compared with, never bound


def _no_shared_ports(ports: dict[str, tuple[str, int]]) -> None:
    """Two of tooltap's servers on one address: say which, before mitmproxy fails on it."""
    seen: list[tuple[str, str, int]] = []
    for what, (host, port) in ports.items():
        for other, other_host, other_port in seen:
            same_host = host == other_host or host in ANY_HOST or other_host in ANY_HOST
            if port and port == other_port and same_host:
                raise SystemExit(f"tooltap: {what} and {other} both want port {port}")
        seen.append((what, host, port))


def _client_hint(upstream: str, url: str) -> str:
    if upstream == "openai":
        return f"OPENAI_BASE_URL={url}/v1"
    if upstream == "anthropic":
        return f"ANTHROPIC_BASE_URL={url}"
    if upstream == "gemini":
        return f"GOOGLE_GEMINI_BASE_URL={url}"
    if upstream == "ollama":
        return f"OLLAMA_HOST={url}"
    if upstream == "cohere":
        return f"CO_API_URL={url}"
    if upstream.startswith("mcp:"):
        return f"MCP server URL {url}{urlsplit(upstream[4:]).path}"
    return f"base URL {url} (forwarded to {upstream})"


def mitmdump_args(
    args: argparse.Namespace, extra: list[str], web: tuple[str, int] | None = None
) -> tuple[list[str], list[str]]:
    """The mitmdump command line for `tooltap run` (mitmweb's for `tooltap web`, which
    listens there), and the lines that tell the user where to point."""
    host, port = args.listen
    metrics_host, metrics_port = args.metrics
    health = getattr(args, "health", None)
    scheme = "https" if getattr(args, "tls_cert", None) else "http"
    argv = ["--listen-host", host]
    hints = []
    ports = {"--metrics": args.metrics}
    if health is not None:
        ports["--health"] = health
    if web is not None:
        ports["--web"] = web
    if args.regular:
        if args.upstream:
            raise SystemExit("tooltap run: --regular and --upstream exclude each other")
        if scheme == "https":
            raise SystemExit(
                "tooltap run: --tls-cert is for reverse mode; in regular mode mitmproxy makes "
                "each host's certificate from its own CA"
            )
        argv += ["--mode", f"regular@{port}"]
        hints.append(
            f"regular proxy on {host}:{port}: set HTTPS_PROXY=http://{host}:{port} and trust "
            f"{args.confdir}/mitmproxy-ca-cert.pem (SSL_CERT_FILE, REQUESTS_CA_BUNDLE or "
            "NODE_EXTRA_CA_CERTS); the CA is created on first start"
        )
    if port == 0 and len(args.upstream or ()) > 1:
        # mitmproxy refuses two servers on the same address, ":0" included.
        raise SystemExit(
            "tooltap run: with several --upstream, --listen needs a port (each upstream takes the next one)"
        )
    mcp_hosts: list[str] = []
    for index, upstream in enumerate(args.upstream or ["openai"]):
        if args.regular:
            break
        target = UPSTREAMS.get(upstream, upstream.removeprefix("mcp:"))
        if not target.startswith(("http://", "https://")):
            raise SystemExit(
                "tooltap run: --upstream wants openai, anthropic, gemini, ollama, cohere, a URL "
                f"or mcp:URL, not {upstream!r}"
            )
        if upstream.startswith("mcp:"):
            # mitmproxy forwards to the URL's origin; the path stays the client's.
            parts = urlsplit(target)
            default_port = 443 if parts.scheme == "https" else 80
            mcp_hosts.append(f"{parts.hostname}:{parts.port or default_port}")
            target = f"{parts.scheme}://{parts.netloc}"
        listen = port + index if port else 0
        ports[f"--upstream {upstream}"] = (host, listen)
        argv += ["--mode", f"reverse:{target}@{listen}"]
        url = f"{scheme}://{_address(host, listen)}"
        hints.append(f"reverse proxy to {target} on {host}:{listen}: {_client_hint(upstream, url)}")
    if args.regular:
        ports["--regular"] = args.listen
    _no_shared_ports(ports)
    argv += ["-s", str(SCRIPT)]
    settings: dict[str, Any] = {
        "tooltap_metrics_host": metrics_host,
        "tooltap_metrics_port": metrics_port,
        "tooltap_health": _address(*health) if health is not None else None,
    }
    if web is None:
        settings["flow_detail"] = 0  # mitmdump's own flow lines would mix into the JSON on stdout
    else:
        # The web UI shows streamed bodies, and the verdicts beside them are read from them.
        settings |= {"web_host": web[0], "web_port": web[1], "store_streamed_bodies": "true"}
        if getattr(args, "read", None):
            argv += ["--rfile", args.read]
    for option in OPTIONS:
        if option.flag is not None:
            settings[option.name] = getattr(args, option.flag.lstrip("-").replace("-", "_"))
    # mitmdump refuses an option set twice: what the user passes after -- wins.
    theirs = {item.partition("=")[0] for item in extra if "=" in item}
    for name, value in settings.items():
        if value is not None and name not in theirs:
            argv += ["--set", f"{name}={value}"]
    if mcp_hosts and "tooltap_mcp_hosts" not in theirs:
        argv += [f"--set=tooltap_mcp_hosts={host}" for host in mcp_hosts]
    if web is not None and "web_columns" not in theirs:
        # mitmweb's columns, and the comment that names each flow's findings.
        argv += [f"--set=web_columns={column}" for column in WEB_COLUMNS]
    hints.append(
        f"metrics at http://{metrics_host}:{metrics_port}/metrics; JSON log lines on stdout"
    )
    if health is not None:
        hints.append(f"health at http://{_address(*health)}/livez and /readyz")
    return argv + extra, hints


def run_mitmweb(argv: list[str]) -> int:
    """mitmweb, in this process, its own log on stderr; it prints the web UI's address there."""
    from mitmproxy.addons import termlog  # noqa: PLC0415
    from mitmproxy.tools import cmdline, main  # noqa: PLC0415
    from mitmproxy.tools.web.master import WebMaster  # noqa: PLC0415

    class Master(WebMaster):
        def __init__(self, options: Any) -> None:
            super().__init__(options, with_termlog=False)
            self.addons.add(termlog.TermLog(out=sys.stderr))

    main.run(Master, cmdline.mitmweb, argv, None)
    return 0


def run_mitmdump(argv: list[str]) -> int:
    """mitmdump, in this process, with its own log on stderr so stdout holds only tooltap's events."""
    from mitmproxy.addons import termlog  # noqa: PLC0415 - mitmproxy is heavy; only `run` needs it
    from mitmproxy.tools import cmdline, main  # noqa: PLC0415
    from mitmproxy.tools.dump import DumpMaster  # noqa: PLC0415

    class Master(DumpMaster):
        def __init__(self, options: Any) -> None:
            super().__init__(options, with_termlog=False)
            self._termlog_addon = termlog.TermLog(out=sys.stderr)
            self.addons.add(self._termlog_addon)

    def extra(parsed: Any) -> dict[str, str]:
        if parsed.filter_args:
            expression = " ".join(parsed.filter_args)
            return {
                "save_stream_filter": expression,
                "readfile_filter": expression,
                "dumper_filter": expression,
            }
        return {}

    # This process is tooltap's: a burst of large bodies goes back to the system when freed.
    map_large_allocations()
    main.run(Master, cmdline.mitmdump, argv, extra)
    return 0


def _run(args: argparse.Namespace, extra: list[str]) -> NoReturn:
    argv, hints = mitmdump_args(args, extra)
    for hint in hints:
        print(f"tooltap: {hint}", file=sys.stderr)
    exit_at_once(run_mitmdump(argv))


def _web(args: argparse.Namespace, extra: list[str]) -> NoReturn:
    argv, hints = mitmdump_args(args, extra, web=args.web)
    for hint in hints:
        print(f"tooltap: {hint}", file=sys.stderr)
    print(
        f"tooltap: the web UI at http://{args.web[0]}:{args.web[1]}/ (mitmweb prints the address "
        "with its login token below; set web_password to choose one)",
        file=sys.stderr,
    )
    exit_at_once(run_mitmweb(argv))
