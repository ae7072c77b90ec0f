"""cudal1-tui: make PyTorch modules faster with a CUDA-L1-style model, honestly measured."""

from importlib.metadata import PackageNotFoundError, version

try:
    __version__ = version("cudal1-tui")
except PackageNotFoundError:  # running from a checkout that was never installed
    __version__ = "0.0.0+checkout"

__all__ = ["__version__"]
