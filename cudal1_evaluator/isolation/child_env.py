"""The environment a sandboxed child starts with: an allow-list, never anything secret."""

from __future__ import annotations

import os
import re
from pathlib import Path

_KEEP_EXACT = frozenset({
    "PATH", "LANG", "LANGUAGE", "TERM", "TZ", "USER", "LOGNAME", "SHELL",
    "LD_LIBRARY_PATH", "LIBRARY_PATH", "CPATH", "C_INCLUDE_PATH", "CPLUS_INCLUDE_PATH",
    "CC", "CXX", "CFLAGS", "CXXFLAGS", "LDFLAGS", "NVCC_APPEND_FLAGS", "NVCC_PREPEND_FLAGS",
    "MAX_JOBS", "CONDA_PREFIX", "VIRTUAL_ENV", "PYTHONPATH", "PYTHONHOME",
    "PYTHONHASHSEED", "PYTHONDONTWRITEBYTECODE",
})
_KEEP_PREFIXES = (
    "CUDA_", "NVIDIA_", "TORCH_", "TORCHINDUCTOR_", "TRITON_", "CUDNN_", "CUBLAS_",
    "OMP_", "MKL_", "KMP_", "OPENBLAS_", "LC_", "PYTORCH_",
)
_SECRET_WORDS = re.compile(
    r"KEY|TOKEN|SECRET|PASSW|CREDENTIAL|AUTH|COOKIE|SESSION|PRIVATE", re.IGNORECASE
)
_SECRET_PREFIXES = (
    "OPENAI_", "HF_", "HUGGING", "AWS_", "AZURE_", "GOOGLE_", "GCP_", "ANTHROPIC_",
    "GITHUB_", "GH_", "WANDB_", "GITLAB_",
)


def is_secret(name: str) -> bool:
    upper = name.upper()
    return bool(_SECRET_WORDS.search(upper)) or upper.startswith(_SECRET_PREFIXES)


def scrub_env(env: dict[str, str], *, home: Path, tmpdir: Path) -> dict[str, str]:
    """Keep an allow-list of build/runtime variables, never anything that looks secret."""
    kept = {
        name: value
        for name, value in env.items()
        if (name in _KEEP_EXACT or name.startswith(_KEEP_PREFIXES)) and not is_secret(name)
    }
    package_root = str(Path(__file__).resolve().parents[2])
    python_path = [package_root, *filter(None, kept.get("PYTHONPATH", "").split(os.pathsep))]
    kept.update({
        "HOME": str(home),
        "TMPDIR": str(tmpdir),
        "TMP": str(tmpdir),
        "TEMP": str(tmpdir),
        "PYTHONPATH": os.pathsep.join(dict.fromkeys(python_path)),
        "PYTHONFAULTHANDLER": "1",
        "PYTHONUNBUFFERED": "1",
        "PYTHONNOUSERSITE": "1",
    })
    kept.setdefault("PATH", os.defpath)
    return kept
