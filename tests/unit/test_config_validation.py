"""Settings are checked once at load, against the evaluator's names, where they were set."""

from __future__ import annotations

from pathlib import Path

import pytest

from cudal1_evaluator.reward import FORMULAS
from cudal1_tui.cli.main import main
from cudal1_tui.config import load_settings
from cudal1_tui.config.saving import save_settings
from cudal1_tui.errors import ConfigError


@pytest.mark.parametrize(("line", "problem"), [
    ('tolerance = "loose"', "tolerance must be one of strict, relaxed, got 'loose'"),
    ('reward = "speedup_squared"', "reward must be one of " + ", ".join(FORMULAS)),
    ('device = "gpu"', "device must be auto, cpu, cuda, cuda:N, got 'gpu'"),
    ("correctness_trials = 0", "correctness_trials must be greater than 0"),
])
def test_a_bad_value_in_the_file_names_file_and_line(tmp_path: Path, line: str,
                                                     problem: str) -> None:
    config = tmp_path / "config.toml"
    config.write_text(f'model = "m"\n{line}\n')
    with pytest.raises(ConfigError) as err:
        load_settings(env={}, config_path=config)
    assert err.value.message.startswith(f"{config}:2: error: ")
    assert problem in err.value.message


def test_env_and_flags_are_named_too(tmp_path: Path) -> None:
    missing = tmp_path / "none.toml"
    with pytest.raises(ConfigError, match="environment variable CUDAL1_DEVICE: error"):
        load_settings(env={"CUDAL1_DEVICE": "tpu"}, config_path=missing)
    with pytest.raises(ConfigError, match="command-line flag: error: tolerance"):
        load_settings(flags={"tolerance": "lax"}, env={}, config_path=missing)
    assert load_settings(flags={"device": "cuda:1"}, env={},
                         config_path=missing).settings.device == "cuda:1"


def test_the_cli_reports_it_without_a_traceback(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                               capsys: pytest.CaptureFixture[str]) -> None:
    config = tmp_path / "config.toml"
    config.write_text('reward = "nope"\n')
    monkeypatch.setenv("CUDAL1_CONFIG", str(config))
    assert main(["config", "show"]) == 1
    err = capsys.readouterr().err
    assert f"{config}:1: error: reward" in err and "Traceback" not in err


def test_saving_replaces_in_place_and_keeps_the_rest(tmp_path: Path) -> None:
    config = tmp_path / "config.toml"
    config.write_text('# my settings\ntemperature = 0.7\n\n[keys]\nhelp = "h"\n')
    save_settings(config, {"temperature": 0.2, "model": 'qwen "coder"'})
    text = config.read_text()
    assert text.startswith("# my settings\ntemperature = 0.2\n")
    assert text.index('model = "qwen \\"coder\\""') < text.index("[keys]")
    settings = load_settings(env={}, config_path=config).settings
    assert (settings.temperature, settings.model, settings.keys["help"]) == (
        0.2, 'qwen "coder"', "h")
