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
    ]
    assert "ANTHROPIC_BASE_URL=http://0.0.0.0:9001" in hints[1]
    assert "GOOGLE_GEMINI_BASE_URL=http://0.0.0.0:9003" in hints[3]
    assert "OLLAMA_HOST=http://0.0.0.0:9004" in hints[4]


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
