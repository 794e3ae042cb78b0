"""The documentation is tested like code: its links resolve, and its reference lists exactly
what the code has (options and their flags, metrics, log events, finding names, states)."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

from tooltap.addon.options import OPTIONS
from tooltap.addon.sinks.metrics import Metrics
from tooltap.core import parallel, schema
from tooltap.core.findings import NAMES

ROOT = Path(__file__).parents[2]
DOCS = ROOT / "docs"
PAGES = [
    ROOT / "README.md",
    *sorted(DOCS.glob("*.md")),
    *(ROOT / folder / "README.md" for folder in ("deploy", "bench", "grafana")),
]
LINK = re.compile(r"\]\(([^)\s]+)\)")


def slug(heading: str) -> str:
    """A heading's anchor, as GitHub makes it."""
    text = re.sub(r"[^\w\- ]", "", heading.strip().lower())
    return text.replace(" ", "-")


def anchors(page: Path) -> set[str]:
    text = re.sub(r"```.*?```", "", page.read_text(encoding="utf-8"), flags=re.S)
    return {slug(line.lstrip("#")) for line in text.splitlines() if line.startswith("#")}


def table(page: Path, heading: str) -> list[list[str]]:
    """The rows (cells) of the first table under a heading."""
    section = page.read_text(encoding="utf-8").split(heading, 1)[1]
    rows = [line for line in section.splitlines() if line.startswith("|")]
    cells = [[c.strip() for c in row.strip("|").split("|")] for row in rows]
    return [row for row in cells[2:] if row]  # past the header and its rule


def names(cell: str, prefix: str) -> set[str]:
    return set(re.findall(rf"`({prefix}[a-z_]+)`", cell))


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_relative_link_resolves_to_a_file_and_its_anchor(page):
    for target in LINK.findall(page.read_text(encoding="utf-8")):
        if target.startswith(("http://", "https://", "mailto:")):
            continue
        path, _, anchor = target.partition("#")
        resolved = (page.parent / path).resolve() if path else page
        assert resolved.exists(), f"{page.name}: {target}"
        if anchor and resolved.suffix == ".md":
            assert anchor in anchors(resolved), f"{page.name}: {target}"


def test_the_options_table_lists_every_option_and_its_flag_and_nothing_else():
    rows = table(DOCS / "running.md", "## Options")
    listed = {name for row in rows for name in names(row[0], "tooltap_")}
    assert listed == {option.name for option in OPTIONS}
    for option in OPTIONS:
        (row,) = [row for row in rows if f"`{option.name}`" in row[0]]
        assert (option.flag is None) or f"`{option.flag}`" in row[0], option.name


def test_the_metrics_table_lists_every_metric_tooltap_exports_and_nothing_else():
    # prometheus_client names a counter's family without its _total.
    exported = {family.name for family in Metrics().registry.collect()}
    rows = table(DOCS / "reference.md", "## Metrics")
    listed = {name for row in rows for name in names(row[0], "tooltap_")}
    assert {n.removesuffix("_total") for n in listed} == exported


def log_events() -> set[str]:
    """The event names the log sink emits: the first argument of each log.<level>(...) call."""
    tree = ast.parse((ROOT / "addon" / "sinks" / "log.py").read_text(encoding="utf-8"))
    found = set()
    for node in ast.walk(tree):
        if not (isinstance(node, ast.Call) and node.args):
            continue
        # log.info(...), or (log.warning if bad else log.info)(...)
        funcs = (
            [node.func.body, node.func.orelse] if isinstance(node.func, ast.IfExp) else [node.func]
        )
        levels = {f.attr for f in funcs if isinstance(f, ast.Attribute)}
        if levels & {"info", "warning", "error"} and isinstance(node.args[0], ast.Constant):
            found.add(node.args[0].value)
    return found


def test_the_log_reference_names_every_event_the_log_sink_emits():
    events = log_events()
    assert {"turn", "tool_call", "loop_error", "session_error"} <= events
    text = (DOCS / "reference.md").read_text(encoding="utf-8")
    assert {event for event in events if f"`{event}`" not in text} == set()


def test_the_audit_page_names_every_finding_fail_on_takes():
    text = (DOCS / "audit.md").read_text(encoding="utf-8")
    assert {name for name in NAMES if f"`{name}`" not in text} == set()


def test_every_state_and_format_state_is_explained():
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    apis = (DOCS / "apis.md").read_text(encoding="utf-8")
    assert {s for s in parallel.STATES if f"| `{s}` |" not in readme} == set()
    assert {s for s in schema.STATES if f"`{s}`" not in apis} == set()


def defined_tests(path: Path) -> set[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    return {
        node.name
        for node in ast.walk(tree)
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef)
        and node.name.startswith("test_")
    }


def test_every_test_the_promises_page_names_exists():
    text = (DOCS / "promises.md").read_text(encoding="utf-8")
    named = re.findall(r"`(tests/[\w/]+\.py)(?:::(\w+))?`", text)
    assert len(named) > 30
    missing = [
        f"{path}::{name}" if name else path
        for path, name in named
        if not (ROOT / path).exists() or (name and name not in defined_tests(ROOT / path))
    ]
    assert missing == []


def test_the_apis_page_names_the_module_each_api_is_read_in():
    from tooltap.core.dialects import DIALECTS

    text = (ROOT / "docs" / "apis.md").read_text()
    section = text.split("## Where each API is read", 1)[1].split("\n## ", 1)[0]
    rows = dict(re.findall(r"^\| `(\w+)` \| `(core/dialects/\w+\.py)`", section, re.MULTILINE))
    assert set(rows) == set(DIALECTS)
    for api, module in rows.items():
        assert (ROOT / module).is_file() and DIALECTS[api].read_turn.__module__.endswith(
            Path(module).stem
        ), api
    for beside in re.findall(r"`(\w+\.py)`: ", section):
        assert (ROOT / "core" / "dialects" / beside).is_file(), beside


def test_the_pytest_pages_example_runs_as_pasted_and_its_options_are_the_plugins(pytester):
    text = (DOCS / "pytest.md").read_text(encoding="utf-8")
    example = text.split("## A test", 1)[1].split("```python\n", 1)[1].split("```", 1)[0]
    assert len([line for line in example.splitlines() if line.strip()]) == 10
    pytester.makepyfile(test_example=example)
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider", "--tooltap", timeout=120)
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines(["1 exchange(s) read in 1 test(s); 0 finding(s)"])
    # Every property and option the page names is one the plugin has, and the reverse.
    plugin = (ROOT / "addon" / "testing" / "plugin.py").read_text(encoding="utf-8")
    named = set(re.findall(r"`(tooltap_[a-z_]+)`", text)) - {"tooltap_max_body"}
    assert named == set(re.findall(r'"(tooltap_[a-z_]+)"', plugin))
