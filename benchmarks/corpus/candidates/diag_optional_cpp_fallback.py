"""Model-output shape: an optional C++ extension in try/except with a PyTorch fallback.

``cpp_sources=""`` with ``functions=[...]``: torch cannot bind a function nobody declared, so
the build fails; the except branch prints and keeps the broadcast path, which is the faster
algorithm anyway. The module imports and runs in torch: the verdict follows what runs."""

import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

try:
    _ext = load_inline(name="diag_scale_optional", cpp_sources="", functions=["diag_scale"],
                       extra_cflags=["-O3"], verbose=False)
except Exception as exc:  # the optional build failed: use the PyTorch path
    print(f"[diag] extension unavailable ({type(exc).__name__}); using the broadcast fallback")
    _ext = None


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        if _ext is not None:
            return _ext.diag_scale(a, b)
        return a.unsqueeze(1) * b
