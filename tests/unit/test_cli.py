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
    captured = capsys.readouterr()
    err = captured.err
    assert err.startswith(f"{config}:1:") and "Traceback" not in err
    assert err.count("error:") == 1  # never "error: …: error: …"
    # the fix is a command: open the file at its line; `config show` then explains (issue 23)
    assert f"fix: ${{EDITOR:-vi}} +1 {config}" in err
    assert "temperature" in captured.out and "left out below" in captured.out


def test_a_bad_environment_variable_is_fixed_by_unsetting_it(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setenv("CUDAL1_CONFIG", str(tmp_path / "none.toml"))
    monkeypatch.setenv("CUDAL1_DEVICE", "gpu")
    assert main(["sessions"]) == 1
    err = capsys.readouterr().err
    assert err.startswith("environment variable CUDAL1_DEVICE: error: ")
    assert "fix: unset CUDAL1_DEVICE" in err and "edit the file" not in err
    assert main(["config", "show", "--json"]) == 1  # still shows what applies without it
    captured = capsys.readouterr()
    assert json.loads(captured.out)["device"]["value"] == "auto"


def test_a_fix_with_brackets_prints_as_written(capsys: pytest.CaptureFixture[str]) -> None:
    from cudal1_tui.cli.reporting import report
    from cudal1_tui.errors import ExportError

    report(ExportError("verl needs pyarrow", fix="pip install 'cudal1-tui[export]'"))
    assert "fix: pip install 'cudal1-tui[export]'" in capsys.readouterr().err


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


WRONG_RELU = '''import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x * 2.0
'''


def test_eval_uses_cpu_sizes_on_a_cpu_and_exits_1_when_not_ok(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    candidate = tmp_path / "cand.py"
    candidate.write_text(WRONG_RELU)
    problem = Path(__file__).resolve().parents[2] / "examples" / "relu.py"
    code = main(["eval", str(problem), str(candidate), "--json", "--trials", "1",
                 "--budget", "0.2", "--build-dir", str(tmp_path / "build")])
    result = json.loads(capsys.readouterr().out)
    assert code == 1
    assert result["status"] == "incorrect"


@pytest.mark.parametrize(("sizes", "device", "rows"), [
    ("auto", "cpu", "rows = 128"), ("auto", "cuda", "rows = 16384"),
    ("full", "cpu", "rows = 16384"), ("cpu", "cuda", "rows = 128")])
def test_eval_sizes(sizes: str, device: str, rows: str) -> None:
    from cudal1_tui.cli.commands import eval_cmd

    problem = Path(__file__).resolve().parents[2] / "examples" / "relu.py"
    args = build_parser().parse_args(["eval", str(problem), str(problem), "--sizes", sizes,
                                      "--device", device])
    assert rows in eval_cmd._job(args).problem_source


def test_eval_with_a_missing_file_exits_2(tmp_path: Path,
                                          capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["eval", str(tmp_path / "nope.py"), str(tmp_path / "c.py")]) == 2
    assert "does not exist" in capsys.readouterr().err


def test_the_exit_line_names_the_session_and_the_next_commands() -> None:
    from cudal1_tui.cli.commands.open_cmd import exit_line

    line = exit_line("2026-11-23_0900_relu_ab12cd", "/s/2026-11-23_0900_relu_ab12cd",
                     Path("examples/relu.py"))
    assert line.splitlines() == [
        "session 2026-11-23_0900_relu_ab12cd saved in /s/2026-11-23_0900_relu_ab12cd",
        "  resume: cudal1-tui examples/relu.py --resume 2026-11-23_0900_relu_ab12cd",
        "  export: cudal1-tui export 2026-11-23_0900_relu_ab12cd --format trl -o data.jsonl"]
