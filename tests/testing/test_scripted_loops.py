"""The scripted agent loops (tests/support/loops.py) under `pytest --tooltap`, with the official
openai and anthropic SDKs against httpx2's MockTransport, respx and a vcrpy cassette, sync and
async, streamed and not: each loop gets exactly its finding, the correct loop none that fails.

The loops run as a team's own suite does, in a pytest subprocess; what tooltap found is read
back from the JUnit XML report, as CI reads it.
"""

from __future__ import annotations

from pathlib import Path
from xml.etree import ElementTree

import httpx2
import pytest
import vcr
from support import loops

from tooltap.core.findings import DEFAULT

SUPPORT = Path(loops.__file__).parent
SUITE_SIZE = 2 * 2 * (2 * len(loops.LOOPS) - 1)  # sync/async, whole/streamed, the cases


@pytest.fixture(scope="module")
def cassettes(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One cassette per SDK and body kind, recorded by vcrpy from the player (a correct run:
    which loop made the requests does not matter, vcrpy answers them in order)."""
    folder = tmp_path_factory.mktemp("cassettes")
    for sdk in ("openai", "anthropic"):
        for stream in (False, True):
            player = loops.Player(sdk, stream)
            transport = httpx2.MockTransport(player.handler(httpx2, asynchronous=False))
            path = folder / f"{sdk}-{'sse' if stream else 'json'}.yaml"
            with vcr.use_cassette(str(path), record_mode="all"):
                client = loops.client(sdk, False, httpx2.Client(transport=transport))
                loops.run(sdk, client, "correct", stream)
    return folder


def properties(report: Path) -> dict[str, list[tuple[str, str]]]:
    """Each test case's properties, by its name."""
    root = ElementTree.parse(report).getroot()
    return {
        case.get("name", ""): [
            (p.get("name", ""), p.get("value", "")) for p in case.iter("property")
        ]
        for case in root.iter("testcase")
    }


def run_suite(pytester, monkeypatch, mock: str, cassettes: Path, *options: str):
    pytester.makepyfile(
        loops=(SUPPORT / "loops.py").read_text(),
        test_loops=(SUPPORT / "loops_suite.py").read_text(),
        aliased="import httpx2\n\nhttpx2.alias_httpx()\n",
    )
    monkeypatch.setenv("LOOPS_MOCK", mock)
    monkeypatch.setenv("LOOPS_CASSETTES", str(cassettes))
    # respx mocks httpx: httpx2.alias_httpx() must come before anything imports httpx.
    alias = ("-p", "aliased") if mock == "respx" else ()
    return pytester.runpytest_subprocess(
        *alias, "-p", "no:cacheprovider", "--junitxml=report.xml", *options, timeout=240
    )


@pytest.mark.parametrize("mock", ["transport", "respx", "vcr"])
def test_each_loop_gets_exactly_its_finding_and_the_correct_loop_none(
    pytester, monkeypatch, cassettes, mock
):
    result = run_suite(pytester, monkeypatch, mock, cassettes, "--tooltap")
    result.assert_outcomes(passed=SUITE_SIZE)  # --tooltap reports; it fails no test
    cases = properties(pytester.path / "report.xml")
    assert len(cases) == SUITE_SIZE
    for name, found in cases.items():
        sdk, *words, _stream, _mode = name.partition("[")[2].rstrip("]").split("-")
        loop = "-".join(words)
        counts = dict(found)
        assert counts["tooltap_exchanges"] == "2", (name, found)
        assert counts["tooltap_not_read"] == "0", (name, found)
        named = [value.partition(":")[0] for key, value in found if key == "tooltap_finding"]
        failing = {n for n in named if n in DEFAULT}
        assert failing == loops.EXPECTED[loop], (name, found)
        assert len([n for n in named if n in DEFAULT]) == len(failing), (name, found)
        # Chat's three calls in one turn, with no strict tool, is said (it fails nothing).
        advisory = {"fanout-no-strict"} if sdk == "openai" else set()
        assert set(named) - failing == advisory, (name, found)
        assert not [v for k, v in found if k == "tooltap_error"], (name, found)
    assert (
        f"{2 * SUITE_SIZE} exchange(s) read in {SUITE_SIZE} test(s); "
        in result.outlines[
            result.outlines.index(next(line for line in result.outlines if " tooltap " in line)) + 1
        ]
    )
