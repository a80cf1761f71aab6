"""First and second autocorrelation inequalities (AlphaEvolve's formulations), step functions f >= 0.

AC1 (minimise): f on [-1/4, 1/4] with n equal steps of width w = 1/(2n);
    C1 = max_t (f*f)(t) / (∫f)^2 = max(np.convolve(f, f)) * w / (sum(f) * w)^2
(f*f is piecewise linear with knots at the step edges, so its max is the max of the discrete convolution.)
AC2 (maximise): C2 = ||f*f||_2^2 / (||f*f||_1 ||f*f||_inf), scale-free; with g = np.convolve(f, f) padded
by zeros at both ends (the knot values of the piecewise-linear f*f), ||.||_2^2 is integrated exactly
segment by segment: sum (g_k^2 + g_k g_{k+1} + g_{k+1}^2) / 3.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ttlab.discover.tasks.base import Task, VerifyResult, as_float_array, coarsest_steps, invalid

MAX_N = 100_000
"""Largest f accepted (AlphaEvolve's AC2 construction has 50,000 steps)."""
DIRECT_MAX = 10_000
"""Up to this n the autoconvolution is np.convolve (exact float sums, quadratic: ~20 ms at 10k); above it
scipy's FFT convolution (~0.1 s at 100k; relative error ~1e-15 * log n, far below any record's margin)."""


def autoconv(f: np.ndarray) -> np.ndarray:
    """f * f (discrete), bounded time for every accepted n."""
    if f.shape[0] <= DIRECT_MAX:
        return np.convolve(f, f)
    from scipy.signal import fftconvolve  # deferred on purpose: ~2 s to import, only n > DIRECT_MAX needs it

    return np.maximum(fftconvolve(f, f), 0.0)  # f >= 0: clip FFT round-off below zero


def _check(output: Any) -> tuple[np.ndarray | None, str]:
    f, why = as_float_array(output, "f")
    if f is None:
        return None, why
    if f.ndim != 1 or not 1 <= f.shape[0] <= MAX_N:
        return None, f"f must be 1-D with 1..{MAX_N} steps, got shape {f.shape}"
    if f.min() < 0.0:
        return None, f"f must be >= 0 (min {f.min():.3g})"
    if f.sum() <= 0.0:
        return None, "f is identically zero"
    return f, ""


def ac1_value(f: np.ndarray) -> float:
    n = f.shape[0]
    w = 1.0 / (2 * n)
    return float(np.max(autoconv(f)) * w / (np.sum(f) * w) ** 2)


def ac2_value(f: np.ndarray) -> float:
    g = np.concatenate([[0.0], autoconv(f), [0.0]])
    l2 = np.sum(g[:-1] ** 2 + g[:-1] * g[1:] + g[1:] ** 2) / 3.0
    l1 = np.sum(g[:-1] + g[1:]) / 2.0
    return float(l2 / (l1 * g.max()))


class _ACTask(Task):
    n_init = 200
    statement = ""

    def problem_statement(self) -> str:
        return self.statement + "\n\n" + self.program_contract()

    def initial_states(self, rng: np.random.Generator, k: int) -> list[np.ndarray]:
        return [rng.uniform(0.0, 1.0, self.n_init) for _ in range(k)]

    def normal_forms(self, construction: np.ndarray) -> list[np.ndarray]:
        """f scaled to max 1 (C1 and C2 are scale-free) on the fewest equal steps that represent the same
        function, and its reversal f(-x) (the autoconvolution is reversed, its max and norms unchanged)."""
        f = np.asarray(construction, dtype=np.float64)
        g = coarsest_steps(f / f.max())
        return [g, g[::-1].copy()]


class AC1Task(_ACTask):
    name = "ac1"
    higher_is_better = False
    best_known = 1.5053
    best_known_source = "AlphaEvolve (2025) upper bound 1.5053 (previous: Matolcsi-Vinuesa 1.5098)"
    statement = ("# First autocorrelation inequality\n\nFind a non-negative step function f on [-1/4, 1/4] (a numpy array "
                 "of n equal steps) minimising max_t (f*f)(t) / (∫f)^2, computed as max(np.convolve(f, f)) * w / "
                 "(sum(f) * w)^2 with w = 1/(2n). Lower is better; best known 1.5053 (AlphaEvolve).")

    def verify(self, output: Any, reported_score: float | None = None) -> VerifyResult:
        f, why = _check(output)
        if f is None:
            return invalid(why)
        v = ac1_value(f)
        res = VerifyResult(True, v, 1.0 / (1e-8 + v), {"n": float(f.size)}, f"C1 = {v:.9f} (n={f.size})", f)
        return self.with_reported(res, reported_score)


class AC2Task(_ACTask):
    name = "ac2"
    higher_is_better = True
    best_known = 0.8962
    best_known_source = "AlphaEvolve (2025) lower bound 0.8962 (later work reports higher values)"
    statement = ("# Second autocorrelation inequality\n\nFind a non-negative step function f (a numpy array of n "
                 "equal steps) maximising ||f*f||_2^2 / (||f*f||_1 ||f*f||_inf), with f*f the piecewise-linear "
                 "autoconvolution. Higher is better; AlphaEvolve reached 0.8962.")

    def verify(self, output: Any, reported_score: float | None = None) -> VerifyResult:
        f, why = _check(output)
        if f is None:
            return invalid(why)
        v = ac2_value(f)
        res = VerifyResult(True, v, v, {"n": float(f.size)}, f"C2 = {v:.9f} (n={f.size})", f)
        return self.with_reported(res, reported_score)
