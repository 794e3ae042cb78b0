"""Credentials out of a verdict: every echo of a credential header's value, at any depth."""

from tooltap.addon.inspection.scrub import scrub
from tooltap.addon.sinks.redaction import REDACTED
from tooltap.core import Verdict

KEY = "sk-proj-ECHOEDkey0123456789"


def test_every_string_holding_a_credential_is_scrubbed_keys_included():
    verdict = Verdict(
        api="chat",
        outcome="inspected",
        reason=f"upstream said: bad key {KEY}",
        duplicates={f"tool-{KEY}": 2},
        calls=[
            {
                "call_id": "c",
                "name": "f",
                "type": "function_call",
                "arguments_raw": f'{{"k": "{KEY}"}}',
            }
        ],
    )
    clean = scrub(verdict, (KEY,))
    assert KEY not in clean.model_dump_json()
    assert clean.reason == f"upstream said: bad key {REDACTED}"
    assert clean.duplicates == {f"tool-{REDACTED}": 2}
    assert clean.calls[0].arguments_raw == f'{{"k": "{REDACTED}"}}'


def test_a_verdict_without_a_credential_is_returned_as_it_is():
    verdict = Verdict(api="chat", outcome="inspected", reason="nothing secret here")
    assert scrub(verdict, (KEY,)) is verdict
