"""tooltap run's mitmdump command line, and script-path."""

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tooltap.addon.commands.cli import main, parser
from tooltap.addon.commands.run import mitmdump_args


def argv_of(*args):
    cut = args.index("--") if "--" in args else len(args)
    parsed = parser().parse_args(["run", *args[:cut]])
    return mitmdump_args(parsed, list(args[cut + 1 :]))


def settings(argv):
    return [argv[i + 1] for i, item in enumerate(argv) if item == "--set"]


def test_the_default_is_reverse_to_openai_on_8080_with_loopback_metrics():
    argv, hints = argv_of()
    assert argv[:4] == [
        "--listen-host",
        "127.0.0.1",
        "--mode",
        "reverse:https://api.openai.com@8080",
    ]
    # mitmproxy's body streaming stays as plain mitmdump has it (off): it costs every flow.
    assert not any(s.startswith("stream_large_bodies") for s in settings(argv))
    assert {
        "flow_detail=0",
        "tooltap_metrics_host=127.0.0.1",
        "tooltap_metrics_port=9464",
    } <= set(settings(argv))
    assert (
        hints[0]
        == "reverse proxy to https://api.openai.com on 127.0.0.1:8080: OPENAI_BASE_URL=http://127.0.0.1:8080/v1"
    )


def test_each_upstream_gets_the_next_port_and_its_own_hint():
    argv, hints = argv_of(
        "--upstream",
        "openai",
        "--upstream",
        "anthropic",
        "--upstream",
        "http://10.0.0.5:8000",
        "--upstream",
        "gemini",
        "--upstream",
        "ollama",
        "--upstream",
        "cohere",
        "--listen",
        "0.0.0.0:9000",
    )
    modes = [argv[i + 1] for i, item in enumerate(argv) if item == "--mode"]
    assert modes == [
        "reverse:https://api.openai.com@9000",
        "reverse:https://api.anthropic.com@9001",
        "reverse:http://10.0.0.5:8000@9002",
        "reverse:https://generativelanguage.googleapis.com@9003",
        "reverse:http://localhost:11434@9004",  # the user's own Ollama
        "reverse:https://api.cohere.com@9005",
    ]
    assert "ANTHROPIC_BASE_URL=http://0.0.0.0:9001" in hints[1]
    assert "GOOGLE_GEMINI_BASE_URL=http://0.0.0.0:9003" in hints[3]
    assert "OLLAMA_HOST=http://0.0.0.0:9004" in hints[4]
    assert "CO_API_URL=http://0.0.0.0:9005" in hints[5]  # the cohere SDK's base URL


def test_any_free_port_takes_one_upstream_only():
    argv, _ = argv_of("--listen", "127.0.0.1:0", "--upstream", "openai")
    assert "reverse:https://api.openai.com@0" in argv
    with pytest.raises(SystemExit, match="needs a port"):
        argv_of("--listen", "127.0.0.1:0", "--upstream", "openai", "--upstream", "anthropic")


def test_regular_mode_says_where_the_ca_is_and_refuses_upstreams():
    argv, hints = argv_of("--regular")
    assert "regular@8080" in argv
    assert "HTTPS_PROXY=http://127.0.0.1:8080" in hints[0] and "mitmproxy-ca-cert.pem" in hints[0]
    with pytest.raises(SystemExit):
        argv_of("--regular", "--upstream", "openai")


def test_options_after_the_double_dash_win_and_are_never_set_twice():
    argv, _ = argv_of(
        "--log-format", "json", "--", "--set", "tooltap_metrics_port=0", "--set", "flow_detail=2"
    )
    assert settings(argv).count("tooltap_metrics_port=0") == 1
    assert settings(argv).count("flow_detail=2") == 1
    assert not any(s in ("tooltap_metrics_port=9464", "flow_detail=0") for s in settings(argv))
    assert "tooltap_log_format=json" in settings(argv)


def test_bad_addresses_and_upstreams_are_usage_errors(capsys):
    with pytest.raises(SystemExit):
        argv_of("--listen", "8080")
    with pytest.raises(SystemExit):
        argv_of("--upstream", "ftp://x")


def test_script_path_prints_a_script_plain_mitmdump_can_load(capsys):
    assert main(["script-path"]) == 0
    path = Path(capsys.readouterr().out.strip())
    assert path.name == "script.py" and path.exists()
    done = subprocess.run(
        [sys.executable, "-c", f"import runpy; runpy.run_path({str(path)!r})"],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr


def test_help_texts_and_the_readme_never_mention_where_an_idea_came_from(capsys):
    readme = (Path(__file__).parents[2] / "README.md").read_text()
    helps = []
    for command in ([], ["run"], ["audit"], ["demo"], ["script-path"]):
        with pytest.raises(SystemExit):
            main([*command, "--help"])
        helps.append(capsys.readouterr().out)
    for text in (readme, *helps):
        assert "seed" not in text.lower()


def test_web_takes_runs_options_and_sets_mitmwebs_own():
    parsed = parser().parse_args(
        [
            "web",
            "--regular",
            "--listen",
            "127.0.0.1:9090",
            "--web",
            "127.0.0.1:9091",
            "-r",
            "f.mitm",
        ]
    )
    argv, hints = mitmdump_args(parsed, ["--set", "web_password=hunter2"], web=parsed.web)
    assert argv[:4] == ["--listen-host", "127.0.0.1", "--mode", "regular@9090"]
    assert argv[argv.index("--rfile") : argv.index("--rfile") + 2] == ["--rfile", "f.mitm"]
    assert {"web_host=127.0.0.1", "web_port=9091", "store_streamed_bodies=true"} <= set(
        settings(argv)
    )
    # mitmweb has no flow_detail (mitmdump's), and the comment column names the findings.
    assert not any(s.startswith("flow_detail") for s in settings(argv))
    assert "--set=web_columns=comment" in argv
    assert argv[-2:] == ["--set", "web_password=hunter2"]  # the user's, passed through
    assert hints[0].startswith("regular proxy on 127.0.0.1:9090")


def test_the_web_ui_port_is_clear_of_every_listener_and_a_collision_is_refused():
    parsed = parser().parse_args(["web", "--upstream", "openai", "--upstream", "anthropic"])
    argv, _ = mitmdump_args(parsed, [], web=parsed.web)
    listeners = {int(a.rsplit("@", 1)[1]) for a in argv if a.startswith("reverse:")}
    assert parsed.web[1] not in listeners | {9464, 9465}
    clash = parser().parse_args(["web", "--upstream", "openai", "--upstream", "anthropic",
                                 "--web", "127.0.0.1:8081"])  # fmt: skip
    with pytest.raises(SystemExit, match="--upstream anthropic and --web both want port 8081"):
        mitmdump_args(clash, [], web=clash.web)


def test_health_is_on_for_tooltap_run_and_can_be_turned_off():
    argv, hints = argv_of()
    assert "tooltap_health=127.0.0.1:9465" in settings(argv)
    assert "health at http://127.0.0.1:9465/livez and /readyz" in hints
    argv, _ = argv_of("--health", "off")
    assert not any(s.startswith("tooltap_health") for s in settings(argv))
    with pytest.raises(SystemExit, match="--health and --metrics both want port 9464"):
        argv_of("--health", "127.0.0.1:9464")


def test_tls_makes_the_hints_https_and_is_refused_in_regular_mode():
    _, hints = argv_of("--tls-cert", "tls.crt", "--tls-key", "tls.key")
    assert hints[0].endswith("OPENAI_BASE_URL=https://127.0.0.1:8080/v1")
    with pytest.raises(SystemExit, match="--tls-cert is for reverse mode"):
        argv_of("--regular", "--tls-cert", "tls.crt")


def test_run_with_a_hash_key_file_it_cannot_read_exits_at_once_and_says_why(tmp_path):
    env = {k: v for k, v in os.environ.items() if not k.startswith("TOOLTAP_HASH")}
    env["TOOLTAP_HASH_KEY_FILE"] = str(tmp_path / "absent")
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "tooltap.addon.commands.cli",
            "run",
            "--listen",
            "127.0.0.1:0",
            "--metrics",
            "127.0.0.1:0",
            "--health",
            "off",
        ],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
        env=env,
    )
    assert done.returncode != 0
    assert f"TOOLTAP_HASH_KEY_FILE={tmp_path / 'absent'}: the hash key cannot be read" in (
        done.stdout + done.stderr
    )
