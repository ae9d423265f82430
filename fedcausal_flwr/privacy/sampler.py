"""The discrete Gaussian sampler: the noise the server adds to a release (``dp=central``) and the
share each site adds inside SecAgg+ (``dp=distributed``).

It follows Canonne, Kamath and Steinke's rejection from a discrete Laplace (Algorithm 3) in
floating point (numpy's generator), not their exact rational arithmetic; OpenDP's exact sampler
costs a private run 185 times as much (``experiments/bench_sampler.py``, docs/privacy.md).
"""

from __future__ import annotations

import math

import numpy as np


def discrete_gaussian(variance: float, size: int, rng: np.random.Generator) -> np.ndarray:
    """``size`` draws of the discrete Gaussian ``N_Z(0, variance)`` as int64 (zeros when the
    variance is 0): a discrete Laplace proposal of scale ``t = floor(sigma) + 1``, kept with
    probability ``exp(-(|y| - sigma^2 / t)^2 / (2 sigma^2))`` (Canonne et al., Algorithm 3)."""
    out = np.zeros(int(size), dtype=np.int64)
    if variance <= 0 or size == 0:
        return out
    sigma = math.sqrt(variance)
    t = math.floor(sigma) + 1
    missing = np.arange(out.size)
    while missing.size:
        n = missing.size
        # a discrete Laplace of scale t: the difference of two geometric counts (failures)
        p = 1 - math.exp(-1 / t)
        y = rng.geometric(p, n) - rng.geometric(p, n)
        keep = rng.random(n) < np.exp(-((np.abs(y) - variance / t) ** 2) / (2 * variance))
        out[missing[keep]] = y[keep]
        missing = missing[~keep]
    return out
