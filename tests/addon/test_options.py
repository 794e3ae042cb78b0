"""One option table: mitmproxy's options, the inspector's settings and `tooltap run`'s flags."""

from types import SimpleNamespace

import pytest
from mitmproxy import exceptions
from mitmproxy.test import taddons

from tooltap.addon import options
from tooltap.addon.commands.cli import parser
from tooltap.addon.commands.run import mitmdump_args
from tooltap.addon.proxy.addon import Tooltap


def test_every_option_is_declared_to_mitmproxy_with_its_default_and_help():
    addon = Tooltap()
    with taddons.context(addon) as tctx:
        for option in options.OPTIONS:
            assert getattr(tctx.options, option.name) == option.default
            assert tctx.options._options[option.name].help == option.help
        addon.done()


@pytest.mark.parametrize(
    "bad",
    [
        {"tooltap_max_body": 0},
        {"tooltap_queue_size": -1},
        {"tooltap_metrics_port": 70000},
        {"tooltap_model_labels": -1},
        {"tooltap_log_format": "xml"},
        {"tooltap_inspector": "fork"},
        {"tooltap_state": "http://127.0.0.1:6379/0"},
        {"tooltap_state": "127.0.0.1:6379"},
        {"tooltap_state_ttl": 0},
    ],
)
def test_a_value_outside_the_table_is_refused(bad):
    addon = Tooltap()
    with taddons.context(addon) as tctx:
        with pytest.raises(exceptions.OptionsError):
            tctx.configure(addon, **bad)
        addon.done()


def test_the_inspector_gets_exactly_the_options_it_reads_as_data():
    values = SimpleNamespace(**{o.name: o.default for o in options.OPTIONS})
    assert options.settings(values) == options.defaults()
    assert set(options.defaults()) == {
        "tooltap_max_body",  # a WebSocket turn's bound
        "tooltap_memory_budget",  # the bound on the sockets' turns in flight
        "tooltap_metrics_host",
        "tooltap_metrics_port",
        "tooltap_log_format",
        "tooltap_log_file",
        "tooltap_log_arguments",
        "tooltap_model_labels",
        "tooltap_otlp",  # spans are exported by the inspector
        "tooltap_inspector",
        "tooltap_queue_size",
        "tooltap_tool_deadline",  # when a waiting call is overdue, and an answer late
        "tooltap_state",  # the inspector keeps the session's memory there
        "tooltap_state_ttl",
        "tooltap_tools_lock",  # the inspector keeps the pins
        "tooltap_app_header",
        "tooltap_pins_ttl",
    }


def test_tooltap_run_has_a_flag_for_each_flagged_option_and_passes_it_on():
    flagged = [o for o in options.OPTIONS if o.flag]
    assert {o.flag for o in flagged} == {
        "--log-format",
        "--log-arguments",
        "--model-labels",
        "--otlp",
        "--state",
        "--tools-lock",
        "--tls-cert",
        "--tls-key",
    }
    args = parser().parse_args(
        ["run", "--log-format", "json", "--log-arguments", "hash", "--model-labels", "7",
         "--otlp", "http://127.0.0.1:4318", "--state", "redis://127.0.0.1:6379/0",
         "--tools-lock", "tools.lock.json", "--tls-cert", "tls.crt", "--tls-key", "tls.key"]
    )  # fmt: skip
    argv, _ = mitmdump_args(args, [])
    for setting in (
        "tooltap_log_format=json",
        "tooltap_log_arguments=hash",
        "tooltap_model_labels=7",
        "tooltap_otlp=http://127.0.0.1:4318",
        "tooltap_state=redis://127.0.0.1:6379/0",
        "tooltap_tools_lock=tools.lock.json",
        "tooltap_tls_cert=tls.crt",
        "tooltap_tls_key=tls.key",
    ):
        assert argv[argv.index(setting) - 1] == "--set"


def test_a_redis_url_is_a_state_the_addon_takes_and_no_url_is_off():
    addon = Tooltap()
    with taddons.context(addon) as tctx:
        for url in ("redis://127.0.0.1:6379/0", "rediss://cache.internal:6380/1", ""):
            tctx.configure(addon, tooltap_state=url)
            assert tctx.options.tooltap_state == url
        addon.done()


def test_a_tools_lock_that_cannot_be_read_or_is_no_lock_is_refused_with_the_reason(tmp_path):
    option = options.BY_NAME["tooltap_tools_lock"]
    assert option.problem("") is None
    missing = option.problem(str(tmp_path / "nowhere.json"))
    assert missing is not None and "cannot read" in missing
    bad = tmp_path / "bad.json"
    bad.write_text('{"tooltap_tools_lock": 7, "tools": []}')
    said = option.problem(str(bad))
    assert said is not None and "is not a usable tools lock" in said and "version 1" in said
    good = tmp_path / "good.json"
    good.write_text('{"tooltap_tools_lock": 1, "tools": []}\n')
    assert option.problem(str(good)) is None


def test_a_hash_key_file_that_cannot_be_read_stops_the_proxy_at_start_with_why(
    monkeypatch, tmp_path
):
    monkeypatch.delenv("TOOLTAP_HASH_KEY", raising=False)
    monkeypatch.setenv("TOOLTAP_HASH_KEY_FILE", str(tmp_path / "absent"))
    addon = Tooltap()
    refused = pytest.raises(exceptions.OptionsError, match=r"TOOLTAP_HASH_KEY_FILE=.*absent: ")
    with refused, taddons.context(addon) as tctx:
        tctx.configure(addon, tooltap_inspector="thread")
    addon.done()
