"""The median of a stream of positive values in fixed memory (the ``global_constant`` baseline's depth)."""

from __future__ import annotations

import math

import numpy as np

from .pixels import evaluated_arrays


class StreamingMedian:
    """Median of a stream of positive values (e.g. all valid GT depths of a dataset) in fixed memory.

    Method: a histogram of ``log(value)`` with ``num_bins`` equal bins over ``[lo, hi]`` (values
    outside are counted in the first / last bin); the median is read from the cumulative counts and
    linearly interpolated (in log space) inside the bin holding the middle rank. Error bound: the
    result lies in the same bin as the exact median, i.e. within a relative error of
    ``(hi/lo)^(1/num_bins) - 1`` (defaults: 1e-4..1e4, 2^16 bins -> < 2.9e-4), usually far less.
    Counts are integers, so the result is independent of the order of updates and histograms of
    several processes can be summed (:meth:`merge`, or all-reduce ``counts``) before :meth:`median`.
    For the exact pixel-pooled median use ``numpy.median`` on the concatenated values instead.
    """

    def __init__(self, lo: float = 1e-4, hi: float = 1e4, num_bins: int = 2**16):
        if not 0 < lo < hi:
            raise ValueError(f"need 0 < lo < hi, got lo={lo}, hi={hi}")
        self.lo, self.hi, self.num_bins = float(lo), float(hi), int(num_bins)
        self._log_lo = math.log(self.lo)
        self._width = (math.log(self.hi) - self._log_lo) / self.num_bins
        self.counts = np.zeros(self.num_bins, dtype=np.int64)

    def update(self, values, valid=None) -> None:
        """Add the values (any shape, numpy or torch) where ``valid`` and value > 0 and finite."""
        v, _, m = evaluated_arrays(values, values, valid, ndim=None)
        idx = np.floor((np.log(v[m]) - self._log_lo) / self._width).astype(np.int64)
        self.counts += np.bincount(np.clip(idx, 0, self.num_bins - 1), minlength=self.num_bins)

    def merge(self, other: "StreamingMedian") -> None:
        """Add another histogram with the same (lo, hi, num_bins)."""
        if (other.lo, other.hi, other.num_bins) != (self.lo, self.hi, self.num_bins):
            raise ValueError("cannot merge StreamingMedian objects with different lo/hi/num_bins")
        self.counts += other.counts

    @property
    def count(self) -> int:
        """Number of values added."""
        return int(self.counts.sum())

    def median(self) -> float:
        """Approximate median (see the class docstring); NaN if no value was added."""
        n = self.count
        if n == 0:
            return math.nan
        cum = np.cumsum(self.counts)
        half = n / 2.0
        b = int(np.searchsorted(cum, half, side="left"))
        before = cum[b - 1] if b > 0 else 0
        frac = (half - before) / self.counts[b]
        return float(math.exp(self._log_lo + (b + frac) * self._width))
