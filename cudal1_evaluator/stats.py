"""Timing statistics (stdlib only): summaries and the median's confidence interval."""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence

from cudal1_evaluator.schema import TimingSummary

Z95 = 1.96


def quantile(sorted_values: Sequence[float], q: float) -> float:
    """Linear-interpolated quantile of already sorted values."""
    if not sorted_values:
        return 0.0
    pos = q * (len(sorted_values) - 1)
    lo = math.floor(pos)
    hi = min(lo + 1, len(sorted_values) - 1)
    return sorted_values[lo] + (sorted_values[hi] - sorted_values[lo]) * (pos - lo)


def median_rel_ci(samples: Sequence[float]) -> float:
    """Half-width of the median's ~95% CI (order statistics), relative to the median.

    ``inf`` until there are enough samples for the interval to exist.
    """
    n = len(samples)
    if n < 6:
        return math.inf
    values = sorted(samples)
    half = Z95 * math.sqrt(n) / 2
    lo = max(0, math.floor(n / 2 - half))
    hi = min(n - 1, math.ceil(n / 2 + half))
    med = statistics.median(values)
    if med <= 0:
        return math.inf
    return (values[hi] - values[lo]) / (2 * med)


def summarize(samples: Sequence[float], clock: str) -> TimingSummary:
    """Summary of raw samples in milliseconds; non-finite or negative samples are dropped."""
    clean = [float(s) for s in samples if math.isfinite(s) and s >= 0]
    if not clean:
        return TimingSummary(samples_ms=[], n=0, clock=clock)
    values = sorted(clean)
    med = statistics.median(values)
    p10, p90 = quantile(values, 0.1), quantile(values, 0.9)
    return TimingSummary(
        samples_ms=clean,
        median_ms=med,
        p10_ms=p10,
        p90_ms=p90,
        mean_ms=statistics.fmean(values),
        spread=(p90 - p10) / med if med > 0 else 0.0,
        n=len(clean),
        clock=clock,
    )
