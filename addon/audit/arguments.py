"""`tooltap audit`'s arguments, apart from the command: `tooltap run` builds the same parser,
and must not import what an audit reads with (its SDKs, vcrpy, httpx) to start."""

from __future__ import annotations

import argparse

FORMATS_OUT = ("text", "json", "junit", "github")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--responses", metavar="FILE", help="a text file of stored response ids, one per line"
    )
    parser.add_argument(
        "--response-id",
        action="append",
        default=[],
        metavar="ID",
        help="a stored response id; repeatable",
    )
    parser.add_argument(
        "-r",
        "--read",
        action="append",
        default=[],
        metavar="FILE",
        help="a mitmproxy flow file (mitmdump -w) or a HAR file; repeatable",
    )
    parser.add_argument(
        "--har", action="append", default=[], metavar="FILE", help="a HAR file; repeatable"
    )
    parser.add_argument(
        "--jsonl",
        action="append",
        default=[],
        metavar="FILE",
        help="a JSONL file of exchanges {method, url, request_body, status, response_headers, response_body}",
    )
    parser.add_argument(
        "--cassettes",
        action="extend",
        nargs="+",
        default=[],
        metavar="PATH",
        help="VCR cassettes (vcrpy, pytest-recording): files, or folders read recursively",
    )
    parser.add_argument(
        "--show-all", action="store_true", help="also print turns that are correctly configured"
    )
    parser.add_argument(
        "--format",
        choices=FORMATS_OUT,
        default="text",
        help="text (default), json (JSON lines), junit (JUnit XML) or github (workflow commands)",
    )
    parser.add_argument(
        "--fail-on",
        default="default",
        metavar="FINDINGS",
        help="the findings that fail the audit, comma-separated: states (strict-void, "
        "strict-at-risk, fanout-no-strict), loop rules, argument-parse, argument-schema, rejected, "
        "advisory-schema, ... `default` is every finding but strict-at-risk and fanout-no-strict",
    )
    parser.add_argument(
        "--max-exposure",
        metavar="RATE",
        help="fail when the exposure rate (strict-void over at-risk turns) is above this: 0.1 or 10%%",
    )
    parser.add_argument(
        "--baseline",
        metavar="FILE",
        help="fail only on findings this baseline does not already hold",
    )
    parser.add_argument(
        "--write-baseline",
        metavar="FILE",
        help="write every finding --fail-on names to this baseline (and judge against it)",
    )
    parser.add_argument(
        "--tools-lock",
        metavar="FILE",
        help="the approved tool definitions: a recorded definition that differs from its entry, "
        "or a tool a source in the lock does not hold, is a tool-changed",
    )
    parser.add_argument(
        "--write-tools-lock",
        metavar="FILE",
        help="write the tool definitions the recordings carried to this tools lock",
    )
