from pathlib import Path

import pytest

from cudal1_tui.config import load_settings
from cudal1_tui.errors import ConfigError


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "config.toml"
    path.write_text(text)
    return path


def test_defaults_when_nothing_is_set(tmp_path: Path) -> None:
    eff = load_settings(env={}, config_path=tmp_path / "absent.toml")
    assert eff.settings.base_url == "http://localhost:8000/v1"
    assert eff.settings.api_key == "EMPTY"
    assert eff.origins["base_url"].source == "default"
    assert not eff.config_exists


def test_precedence_flag_over_env_over_file(tmp_path: Path) -> None:
    path = write(tmp_path, 'model = "from-file"\ntemperature = 0.2\nbase_url = "http://f:1/v1"\n')
    env = {"CUDAL1_MODEL": "from-env", "OPENAI_BASE_URL": "http://e:2/v1"}
    eff = load_settings(flags={"model": "from-flag"}, env=env, config_path=path)
    assert eff.settings.model == "from-flag"
    assert eff.origins["model"].source == "flag"
    assert eff.settings.base_url == "http://e:2/v1"
    assert eff.origins["base_url"].where == "OPENAI_BASE_URL"
    assert eff.settings.temperature == 0.2
    assert eff.origins["temperature"].where == str(path)


def test_cudal1_env_wins_over_openai_env(tmp_path: Path) -> None:
    env = {"CUDAL1_BASE_URL": "http://a/v1", "OPENAI_BASE_URL": "http://b/v1"}
    eff = load_settings(env=env, config_path=tmp_path / "none.toml")
    assert eff.settings.base_url == "http://a/v1"


def test_env_values_are_typed(tmp_path: Path) -> None:
    env = {"CUDAL1_CANDIDATES_PER_ROUND": "4", "CUDAL1_USE_BUILTIN": "false"}
    eff = load_settings(env=env, config_path=tmp_path / "none.toml")
    assert eff.settings.candidates_per_round == 4
    assert eff.settings.use_builtin is False


def test_keys_table_merges_with_defaults(tmp_path: Path) -> None:
    path = write(tmp_path, '[keys]\naccept = "A"\n')
    eff = load_settings(env={}, config_path=path)
    assert eff.settings.keys["accept"] == "A"
    assert eff.settings.keys["reject"] == "r"


@pytest.mark.parametrize(
    ("text", "line", "words"),
    [
        ('model = "x"\ntemperature = \n', 2, "error: "),
        ('model = "x"\n\nbogus_key = 3\n', 3, "unknown setting 'bogus_key'"),
        ('candidates_per_round = "many"\n', 1, "must be an integer"),
        ("model = [1, 2]\n", 1, "must be a string"),
    ],
)
def test_broken_file_names_file_line_and_problem(
    tmp_path: Path, text: str, line: int, words: str
) -> None:
    path = write(tmp_path, text)
    with pytest.raises(ConfigError) as info:
        load_settings(env={}, config_path=path)
    # compiler-style, like every config error: file:line[:col]: error: …
    assert info.value.message.startswith(f"{path}:{line}")
    assert ": error: " in info.value.message
    assert words in info.value.message
    assert info.value.line == line


def test_bad_env_value_names_the_variable(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="CUDAL1_TEMPERATURE"):
        load_settings(env={"CUDAL1_TEMPERATURE": "hot"}, config_path=tmp_path / "n.toml")
