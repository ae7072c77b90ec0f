"""The CLI surface: routing, help, version, config show, usage errors."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from cudal1_tui.cli import commands
from cudal1_tui.cli.main import _route, build_parser, main


def test_a_bare_file_means_open() -> None:
    assert _route(["model.py", "--device", "cpu"], set(commands.NAMES)) == [
        "open", "model.py", "--device", "cpu"]
    assert _route(["run", "x.py"], set(commands.NAMES))[0] == "run"
    assert _route(["--help"], set(commands.NAMES)) == ["--help"]


def test_every_subcommand_has_help() -> None:
    parser = build_parser()
    for name in commands.NAMES:
        with pytest.raises(SystemExit) as info:
            parser.parse_args([name, "--help"])
        assert info.value.code == 0


def test_help_lists_examples(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        main(["--help"])
    out = capsys.readouterr().out
    assert "examples:" in out and "cudal1-tui run" in out and "OPENAI_BASE_URL" in out


def test_no_arguments_prints_help_and_exits_2(capsys: pytest.CaptureFixture[str]) -> None:
    assert main([]) == 2
    assert "usage:" in capsys.readouterr().out


def test_config_show_json_names_sources(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                        capsys: pytest.CaptureFixture[str]) -> None:
    config = tmp_path / "config.toml"
    config.write_text('model = "qwen"\n')
    monkeypatch.setenv("CUDAL1_CONFIG", str(config))
    monkeypatch.setenv("OPENAI_BASE_URL", "http://127.0.0.1:1234/v1")
    assert main(["config", "show", "--json", "--temperature", "0.3"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["model"] == {"value": "qwen", "source": "file", "where": str(config)}
    assert data["base_url"]["source"] == "env"
    assert data["temperature"] == {"value": 0.3, "source": "flag", "where": ""}


def test_broken_config_is_a_clear_error(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                        capsys: pytest.CaptureFixture[str]) -> None:
    config = tmp_path / "config.toml"
    config.write_text("temperature = = 1\n")
    monkeypatch.setenv("CUDAL1_CONFIG", str(config))
    assert main(["config", "show"]) == 1
    err = capsys.readouterr().err
    assert str(config) in err.replace("\n", "") and "line 1" in err
    assert "Traceback" not in err


def test_api_key_is_masked(monkeypatch: pytest.MonkeyPatch, tmp_path: Path,
                           capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setenv("CUDAL1_CONFIG", str(tmp_path / "none.toml"))
    monkeypatch.setenv("OPENAI_API_KEY", "sk-verysecretvalue")
    assert main(["config", "show", "--json"]) == 0
    out = capsys.readouterr().out
    assert "verysecret" not in out


def test_module_entry_point_runs() -> None:
    result = subprocess.run([sys.executable, "-m", "cudal1_tui", "--version"],
                            capture_output=True, text=True, check=True)
    assert result.stdout.startswith("cudal1-tui ")
