"""The effective settings and where each value came from.

Precedence: command-line flag > environment variable > config file > default.
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any, Literal

from cudal1_tui.config.keymap import DEFAULT_KEYS

Source = Literal["default", "file", "env", "flag"]

DEFAULT_BASE_URL = "http://localhost:8000/v1"


@dataclass
class Settings:
    """Every knob of the app. Field docs double as the ``config show`` help."""

    base_url: str = DEFAULT_BASE_URL
    api_key: str = "EMPTY"
    model: str = ""  # empty: the first model the server lists
    temperature: float = 0.7
    top_p: float = 0.95
    max_tokens: int = 4096  # a CUDA-L1 reply is a few thousand tokens; CPU servers are slow
    max_reply_kb: int = 256  # longer replies are cut to this before parsing (recorded)
    candidates_per_round: int = 2
    exemplars: int = 2
    request_timeout_s: float = 300.0  # a stream may go quiet this long (prefill counts)
    headers_timeout_s: float = 60.0  # the server must answer (send headers) within this
    connect_timeout_s: float = 5.0
    retries: int = 2
    use_builtin: bool = True  # seed sessions with the built-in proposer
    device: str = "auto"  # auto | cpu | cuda | cuda:N
    tolerance: str = "strict"
    correctness_trials: int = 5
    timing_budget_s: float = 10.0
    eval_timeout_s: float = 300.0
    memory_limit_mb: int = 16384
    strict_threshold: float = 10.0
    compare_torch_compile: bool = False
    model_gpus: str = "auto"  # GPUs the model server uses: auto (detect), none, or 0 / 0,1
    wait_for_model: str = "auto"  # timing waits while the model generates: auto, always, never
    gpu_memory_margin_mb: int = 1024  # kept free beyond an evaluation's estimated need
    sessions_dir: str = ""  # empty: the platform's data dir
    build_dir: str = ""  # empty: the platform's cache dir
    seed: int = 0
    reward: str = "clipped_speedup"
    keys: dict[str, str] = field(default_factory=lambda: dict(DEFAULT_KEYS))


SECRET_FIELDS = frozenset({"api_key"})


def setting_names() -> list[str]:
    return [f.name for f in fields(Settings)]


@dataclass
class Origin:
    """Where a value came from: its source and, for files and env, the exact place."""

    source: Source
    where: str = ""


@dataclass
class EffectiveSettings:
    settings: Settings
    origins: dict[str, Origin]
    config_path: Path | None
    config_exists: bool

    def rows(self) -> list[tuple[str, Any, Origin]]:
        """(name, value, origin) for display; secrets are masked."""
        out: list[tuple[str, Any, Origin]] = []
        for name in setting_names():
            value: Any = getattr(self.settings, name)
            if name in SECRET_FIELDS and value and value != "EMPTY":
                value = value[:3] + "…" if len(value) > 6 else "…"
            out.append((name, value, self.origins[name]))
        return out
