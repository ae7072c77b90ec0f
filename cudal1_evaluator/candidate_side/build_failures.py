"""Builds that failed while the candidate went on: a runtime fact, not a verdict.

Model output often calls ``load_inline`` inside its own ``try/except`` (``cpp_sources=""`` with
``functions=[...]``, which torch cannot bind, is common) and falls back to PyTorch ops when the
build fails. Importing such a module works in torch, and so does calling it: the evaluation
judges it by its outputs and times it. What the build failure changes is a note for the user
("optional build failed; fallback ran"), never the status.

``install`` wraps ``cpp_extension.load_inline`` and ``load`` (before the candidate imports
them) to remember each build that raised; the exception goes on to the candidate unchanged.
This runs inside the candidate's process, so it is informative only: it can add a warning,
never credit anything.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import torch.utils.cpp_extension as cpp_extension

from cudal1_evaluator.parent import build_cache
from cudal1_evaluator.schema import Flag

CODE = "optional_build_failed"
_MARK = "_cudal1_build_failures"


@dataclass
class BuildFailures:
    """Each failed build as ``name: headline``, in the order they failed."""

    seen: list[str] = field(default_factory=list)

    def note(self, name: str, exc: BaseException) -> None:
        text = build_cache.headline(build_cache.trim_compile_log(str(exc)))
        entry = f"{name}: {text or type(exc).__name__}"[:400]
        if entry not in self.seen:
            self.seen.append(entry)

    def flag(self) -> Flag | None:
        """The warning for a candidate that ran although a build of its failed."""
        if not self.seen:
            return None
        names = "; ".join(self.seen[:3])
        more = f" (and {len(self.seen) - 3} more)" if len(self.seen) > 3 else ""
        return Flag(CODE, f"optional build failed; fallback ran: the candidate caught its own "
                    f"build failure and computed without that extension ({names}{more}); "
                    "its verdict and speedup are those of the code that ran", "warn")


def _recording(real: Callable[..., Any], failures: BuildFailures) -> Callable[..., Any]:
    @functools.wraps(real)
    def build(*args: Any, **kwargs: Any) -> Any:
        try:
            return real(*args, **kwargs)
        except Exception as exc:
            failures.note(str(kwargs.get("name", args[0] if args else "?")), exc)
            raise

    setattr(build, _MARK, True)
    return build


def install() -> BuildFailures:
    """Record failed ``load_inline``/``load`` builds from now on (call before the import)."""
    failures = BuildFailures()
    for attr in ("load_inline", "load"):
        real = getattr(cpp_extension, attr)
        if getattr(real, _MARK, False):  # a warm child installs once: unwrap the old one
            real = real.__wrapped__
        setattr(cpp_extension, attr, _recording(real, failures))
    return failures
