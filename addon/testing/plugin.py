"""The pytest plugin: `pytest --tooltap` reads every exchange each test makes, with tooltap's rules.

Off unless asked for: `--tooltap` reports (a terminal summary, and each test's findings as
JUnit XML properties), `--tooltap=strict` also fails a test that caused a finding an audit
would fail on. The `tooltap` fixture gives a test its own exchanges (and watches that test even
without the option); `@pytest.mark.tooltap(allow=[...])` names findings a test accepts.

pytest loads this module through the `pytest11` entry point, and nothing else imports it: the
rest of tooltap never needs pytest. tooltap's rules are imported only once a test is watched.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING, Any

import pytest

if TYPE_CHECKING:
    from tooltap.core import Verdict

    from .watch import Ledger, Watch

PLUGIN = "tooltap-watch"
LEDGER = pytest.StashKey["Ledger"]()
CHECKED = pytest.StashKey[int]()  # exchanges already judged for strict mode
MARKER = "tooltap(allow=[...]): findings, by name, that this test accepts from tooltap"
# The JUnit XML properties (and report.user_properties) a watched test carries.
EXCHANGES, NOT_READ = "tooltap_exchanges", "tooltap_not_read"
FINDING, ALLOWED, ERROR = "tooltap_finding", "tooltap_allowed", "tooltap_error"


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("tooltap", "tooltap: the tool-calling exchanges tests make")
    group.addoption(
        "--tooltap",
        action="store_const",
        const="report",
        dest="tooltap",
        default=None,
        help="read every exchange the tests make (httpx, httpx2, botocore) with tooltap's rules "
        "and report the findings: a summary, and JUnit XML properties",
    )
    group.addoption(
        "--tooltap=strict",
        action="store_const",
        const="strict",
        dest="tooltap",
        help="as --tooltap, and fail a test that caused a finding tooltap audit would fail on",
    )
    parser.addini(
        "tooltap_log_arguments",
        "how tooltap shows tool arguments: raw, redact (mask secret-looking keys), hash or omit",
        default="raw",
    )


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", MARKER)
    mode = config.getoption("tooltap", None)
    if mode is not None:
        config.pluginmanager.register(Tooltap(config, mode), PLUGIN)


@pytest.fixture
def tooltap(request: pytest.FixtureRequest) -> TestExchanges:
    """This test's exchanges as tooltap read them: verdicts, findings, assert_clean()."""
    plugin = request.config.pluginmanager.get_plugin(PLUGIN)
    if plugin is None:  # no --tooltap: this test alone is watched, from here on
        plugin = Tooltap(request.config, None)
        request.config.pluginmanager.register(plugin, PLUGIN)
    ledger = request.node.stash.get(LEDGER, None) or plugin.begin(request.node)
    return TestExchanges(ledger, allowed(request.node))


class TestExchanges:
    """The `tooltap` fixture: what tooltap read in this test's exchanges so far (a streamed
    response counts once the code under test has read it to its end or closed it)."""

    __test__ = False  # not a test class, whatever its name

    def __init__(self, ledger: Ledger, allow: frozenset[str]) -> None:
        self._ledger = ledger
        self._allow = allow

    @property
    def verdicts(self) -> list[Verdict]:
        """One per exchange, in the order they ended; the log's fields (Verdict.to_dict())."""
        return [judged.verdict for judged in self._ledger.judged]

    @property
    def findings(self) -> dict[str, list[str]]:
        """Every finding, by name (unanswered-call, split-results, ...), each in the words
        the log and tooltap audit use; allowed ones too."""
        found: dict[str, list[str]] = defaultdict(list)
        for judged in self._ledger.judged:
            for finding in judged.findings:
                found[finding.name].append(finding.message)
        return dict(found)

    def assert_clean(self, allow: Sequence[str] = ()) -> None:
        """Fail when an exchange had a finding tooltap audit fails on, unless this call or the
        test's marker allows it by name; the message says each one and its repair."""
        check_names(allow, "assert_clean(allow=...)")
        failing = self._ledger.failing(self._allow | set(allow))
        if failing:
            raise AssertionError(said(failing))


class Tooltap:
    """Watches each test (mode report or strict; None: only the tests using the fixture)."""

    def __init__(self, config: pytest.Config, mode: str | None) -> None:
        self.config = config
        self.mode = mode
        self._watch: Watch | None = None
        self.tests: dict[str, Counter[str]] = {}  # test -> exchanges, not read, errors
        self.findings: dict[str, list[str]] = defaultdict(list)  # name -> tests
        self.allowed = 0
        self.errors: list[str] = []

    def watch(self) -> Watch:
        """tooltap's rules, imported now; the clients imported so far, watched."""
        from .clients import watch_clients  # noqa: PLC0415 - only once a test is watched
        from .watch import Watch  # noqa: PLC0415

        if self._watch is None:
            arguments = str(self.config.getini("tooltap_log_arguments"))
            from ..sinks.redaction import ARGUMENT_MODES  # noqa: PLC0415

            if arguments not in ARGUMENT_MODES:
                raise pytest.UsageError(
                    f"tooltap_log_arguments must be one of {', '.join(ARGUMENT_MODES)}, "
                    f"not {arguments!r}"
                )
            self._watch = Watch(arguments)
        watch_clients(self._watch)
        return self._watch

    def begin(self, item: pytest.Item) -> Ledger:
        ledger = self.watch().begin(item.nodeid)
        item.stash[LEDGER] = ledger
        item.stash[CHECKED] = 0
        return ledger

    @pytest.hookimpl(tryfirst=True)
    def pytest_configure(self, config: pytest.Config) -> None:
        if self.mode is not None:
            self.watch()

    @pytest.hookimpl(hookwrapper=True, tryfirst=True)
    def pytest_runtest_setup(self, item: pytest.Item) -> Any:
        if self.mode is not None:
            self.begin(item)  # before any fixture: what a fixture sends is the test's too
        outcome = yield
        try:  # a misspelt name in a marker fails the test's setup: it would allow nothing
            check_names(allowed(item), "@pytest.mark.tooltap(allow=...)")
        except pytest.fail.Exception as failed:
            outcome.force_exception(failed)

    @pytest.hookimpl(hookwrapper=True, trylast=True)
    def pytest_runtest_teardown(self, item: pytest.Item) -> Iterator[None]:
        yield
        if LEDGER in item.stash and self._watch is not None:
            self._watch.end()  # what the test left open is read as far as it came

    @pytest.hookimpl(hookwrapper=True)
    def pytest_runtest_makereport(self, item: pytest.Item, call: pytest.CallInfo[None]) -> Any:
        ledger = item.stash.get(LEDGER, None)
        if ledger is not None and call.when == "teardown":
            item.user_properties.extend(properties(ledger, allowed(item)))
        outcome = yield
        if ledger is None or call.when == "setup":
            return
        report: pytest.TestReport = outcome.get_result()
        checked = item.stash.get(CHECKED, 0)
        item.stash[CHECKED] = len(ledger.judged)
        failing = ledger.failing(allowed(item))
        new = ledger.failing(allowed(item), since=checked)  # each phase fails for its own
        if call.when == "teardown" and (failing or ledger.errors):
            report.sections.append(("tooltap", _section(ledger, failing)))
        if self.mode == "strict" and new and report.passed:
            report.outcome = "failed"
            report.longrepr = said(new, strict=True)

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        """The run's tally, from each test's properties (pytest-xdist's workers send them)."""
        if report.when != "teardown":
            return
        counts: Counter[str] = Counter()
        for name, value in report.user_properties:
            if name in (EXCHANGES, NOT_READ):
                counts[name] += int(str(value))
            elif name == FINDING:
                self.findings[str(value).partition(":")[0]].append(report.nodeid)
            elif name == ALLOWED:
                self.allowed += 1
            elif name == ERROR:
                self.errors.append(f"{report.nodeid}: {value}")
        if counts or any(name.startswith("tooltap_") for name, _ in report.user_properties):
            self.tests[report.nodeid] = counts

    def pytest_terminal_summary(self, terminalreporter: Any) -> None:
        if self._watch is not None:
            self.errors.extend(f"(outside any test): {e}" for e in self._watch.outside)
        if not self.tests and not self.errors:
            return
        write = terminalreporter.write_line
        terminalreporter.section("tooltap")
        read = sum(c[EXCHANGES] for c in self.tests.values())
        not_read = sum(c[NOT_READ] for c in self.tests.values())
        found = sum(len(tests) for tests in self.findings.values())
        unread = f", {not_read} not read" if not_read else ""
        allowed_by = f", {self.allowed} more allowed by a marker" if self.allowed else ""
        write(
            f"{read} exchange(s) read in {len(self.tests)} test(s){unread}; "
            f"{found} finding(s){allowed_by}"
        )
        width = max((len(name) for name in self.findings), default=0)
        for name, tests in sorted(self.findings.items(), key=lambda kv: (-len(kv[1]), kv[0])):
            for index, (test, count) in enumerate(Counter(tests).items()):
                head = f"  {name:<{width}}  " if index == 0 else " " * (width + 4)
                times = f" ({count})" if count > 1 else ""
                write(f"{head}{test}{times}")
        if self.errors:
            write(f"tooltap's own errors ({len(self.errors)}); no test failed for them:")
            for error in self.errors:
                write(f"  {error}")


def allowed(item: pytest.Item) -> frozenset[str]:
    """The findings a test's tooltap markers allow."""
    names: set[str] = set()
    for marker in item.iter_markers("tooltap"):
        allow = marker.kwargs.get("allow", ())
        names.update([allow] if isinstance(allow, str) else allow)
    return frozenset(names)


def check_names(names: Sequence[str] | frozenset[str], where: str) -> None:
    from tooltap.core.findings import NAMES  # noqa: PLC0415 - only once a test is watched

    unknown = sorted(set(names) - set(NAMES))
    if unknown:
        pytest.fail(
            f"{where}: {', '.join(map(repr, unknown))} is not a tooltap finding; "
            f"the findings are {', '.join(NAMES)}",
            pytrace=False,
        )


def properties(ledger: Ledger, allow: frozenset[str]) -> list[tuple[str, str]]:
    """A test's tally as JUnit XML properties: counts, each finding, the plugin's errors."""
    if not ledger.judged and not ledger.errors:
        return []
    not_read = sum(1 for j in ledger.judged if j.verdict.outcome == "not_read")
    found = [
        (ALLOWED if finding.name in allow else FINDING, f"{finding.name}: {finding.message}")
        for judged in ledger.judged
        for finding in judged.findings
    ]
    return [
        (EXCHANGES, str(len(ledger.judged) - not_read)),
        (NOT_READ, str(not_read)),
        *found,
        *((ERROR, error) for error in ledger.errors),
    ]


def said(failing: list[tuple[str, Any]], strict: bool = False) -> str:
    """Findings as the log says them, each under its exchange, with its repair."""
    why = " (--tooltap=strict)" if strict else ""
    lines = [f"tooltap: {len(failing)} finding(s) in this test's exchanges{why}"]
    last = None
    for label, finding in failing:
        if label != last:
            lines.append(label)
            last = label
        lines.append(f"  {finding.name}: {finding.message}")
    return "\n".join(lines)


def _section(ledger: Ledger, failing: list[tuple[str, Any]]) -> str:
    parts = [said(failing)] if failing else []
    parts.extend(ledger.errors)
    return "\n".join(parts)
