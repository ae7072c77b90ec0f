"""The ``[keys]`` table is checked at load: known actions, no empty key, no key bound twice."""

from __future__ import annotations

from pathlib import Path

import pytest

from cudal1_tui.config import DEFAULT_KEYS, load_settings
from cudal1_tui.errors import ConfigError
from cudal1_tui.ui.actions import ACTIONS


def _load(tmp_path: Path, text: str) -> ConfigError:
    config = tmp_path / "config.toml"
    config.write_text(text)
    with pytest.raises(ConfigError) as err:
        load_settings(env={}, config_path=config)
    return err.value


def test_a_clash_names_both_actions_and_the_line_that_made_it(tmp_path: Path) -> None:
    err = _load(tmp_path, 'model = "m"\n\n[keys]\nundo = "z"\naccept = "r"\n')
    config = tmp_path / "config.toml"
    assert err.message == f"{config}:5: error: key 'r' is bound to both accept and reject"
    assert err.line == 5


def test_two_user_keys_clash_at_the_second(tmp_path: Path) -> None:
    err = _load(tmp_path, '[keys]\nundo = "z"\nexport = "z,x"\n')
    assert err.message.endswith(":3: error: key 'z' is bound to both undo and export")


def test_an_unknown_action_or_an_empty_key_is_refused(tmp_path: Path) -> None:
    err = _load(tmp_path, '[keys]\nlaunch = "l"\n')
    assert ":2: error: unknown key binding 'launch'" in err.message
    err = _load(tmp_path, 'keys = { reject = "" }\n')
    assert ":1: error: the key for reject is empty" in err.message


def test_a_swap_is_fine_and_every_action_has_one_default_key(tmp_path: Path) -> None:
    config = tmp_path / "config.toml"
    config.write_text('[keys]\naccept = "r"\nreject = "a"\n')
    keys = load_settings(env={}, config_path=config).settings.keys
    assert (keys["accept"], keys["reject"]) == ("r", "a")
    assert [a.binding_id for a in ACTIONS] == list(DEFAULT_KEYS)
