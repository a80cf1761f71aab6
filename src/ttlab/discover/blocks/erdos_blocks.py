"""Building blocks for Erdős minimum overlap programs (standalone: numpy and scipy only, no ttlab imports).

A sandboxed program does `import erdos_blocks as eb` and composes these; the library's smoothed-minimax
program (`library/erdos_lse.py`) is itself a composition of them. h is a numpy array of n pieces in [0, 1];
the verifier rescales it to sum n/2 and scores C5 = max(np.correlate(h, 1 - h, "full")) * 2 / n (lower is
better). Every block that takes time takes a `Clock`.

    objective   c5, corr, normalise, exactly_feasible, soft_max_and_grad, scaled_objective
    clock       Clock(budget_s, wall_factor): CPU seconds of this process, wall clock as the backstop; report
    work        CLOCK_UNIT "work": clocks count nominal work seconds instead (charged per objective evaluation,
                correlation and LP by a fixed cost model), so a program + seed computes the same on any load
    starts      random_start, smooth_start, symmetrise, multistart
    sizes       coarsen, upsample
    local       smooth (one L-BFGS-B stage at temperature tau), continuation (tau lowered in stages),
                converge (fixed temperatures, each to convergence)
    moves       hop (basin hopping: perturb a window, re-converge; monotone or Metropolis)
    exact steps lp_polish (trust-region sequential LP on the true max over all lags: exact minimax steps)
    refinement  refine (double and re-converge up to max_n), finish (normalise + exact repair)

Why a soft maximum: C5 is the max over 2n - 1 lags, flat almost everywhere; tau * logsumexp(c / tau) is
smooth, bounds C5 from above by at most tau log(2n - 1), and approaches it as tau -> 0. From a large tau
random rough starts land in good basins (graduated optimisation); basins differ at ~50-200 pieces, and
doubling a profile (same function, more freedom) then lets the fine levels deepen the basin found.

Gradient of L = sum_m w_m c_m(g) (w = softmax(c / tau)), with k = m - (n - 1):
    dL/dg_j = (2/n) (sum_k w_k (1 - g)_{j-k} - sum_k w_k g_{j+k})
            = (2/n) (convolve(w, 1 - g)[j + n - 1] - correlate(g, w)[j + n - 1]),
    dL/dh   = (n/2) / sum(h) * (dL/dg - (dL/dg . g) / (n/2))       (through the rescale).
"""
import json
import time
from fractions import Fraction

import numpy as np
from scipy.optimize import linprog, minimize
from scipy.signal import fftconvolve

FFT_N = 1000
"""From this n on the gradient's correlations go through the FFT (O(n log n); error ~1e-15)."""
HOP_TAUS = (1e-3, 3e-4, 1e-4, 3e-5, 1e-5, 3e-6, 1e-6, 1e-7, 1e-8)
"""Temperatures of a converged solve from a perturbed profile (a hop)."""
FINE_TAUS = (1e-6, 1e-7, 1e-8, 1e-9, 1e-10)
"""Temperatures re-converging a doubled profile (already near its optimum)."""
CLOCK_UNIT = "time"
"""What a `Clock` counts unless told: "time" (CPU seconds of the program's thread, wall backstop) or "work"
(nominal work seconds, `WORK`: deterministic). The sandbox's loader sets it per program (`with_blocks`)."""
WORK_WALL_FACTOR = 10.0
"""A work clock's wall backstop is at least this times its budget (it binds only on a machine giving the
program under 1 / WORK_WALL_FACTOR of a core; each check where it binds is counted in `WALL_STOPS`, reported)."""
CHECK_WORK = 1e-5
"""Work seconds charged per clock check, so that a loop doing nothing the model charges still ends."""
WORK = [0.0]
"""Work seconds charged so far in this process (a list: one mutable counter)."""
WALL_STOPS = [0]
"""Clock checks of a work clock stopped by its wall backstop with work left (0: the run was deterministic)."""


# ---- the work model -----------------------------------------------------------------------------------
# Fitted to one core of the development machine (per call, scipy 1.x, one BLAS thread), so a work second is
# about a CPU second there; what matters is that it depends only on the calls made, never on the load.
def charge(seconds):
    """Add `seconds` of work to this process's counter."""
    WORK[0] += seconds


def grad_work(n, fft):
    """Work of one `soft_max_and_grad` at n pieces (direct correlations O(n^2), FFT O(n log n))."""
    return (0.084e-3 + 1.71e-7 * n) if fft else (1e-5 + 1.3e-7 * n + 3e-10 * n * n)


def lbfgs_work(n):
    """L-BFGS-B's own work per evaluation at n pieces (memory 30)."""
    return 3e-5 + 1.6e-7 * n


def corr_work(n):
    """Work of one `corr` at n pieces."""
    return 2e-6 + 8e-11 * n * n


def lp_work(rows, cols):
    """Work of one HiGHS solve with a dense rows x cols constraint matrix."""
    return 1e-3 + 1e-6 * rows * cols


# ---- the objective ------------------------------------------------------------------------------------
def corr(h):
    """c_m for every lag m (2n - 1 values) of h as given (no rescale)."""
    n = h.size
    charge(corr_work(n))
    return np.correlate(h, 1.0 - h, "full") * 2.0 / n


def c5(h):
    """The verifier's C5 of h: rescaled to sum n/2, then the max correlation."""
    h = np.asarray(h, dtype=np.float64)
    return float(corr(h * (h.size / 2) / h.sum()).max())


def normalise(h):
    """Clip to [0, 1] and rescale to sum n/2 (spreading any excess above 1 over the other pieces)."""
    n = h.size
    h = np.clip(h, 0.0, 1.0)
    h = h * (n / 2) / h.sum()
    while h.max() > 1.0:
        h = np.clip(h, 0.0, 1.0)
        free = h < 1.0
        h[free] += (n / 2 - h.sum()) / free.sum()
    return np.clip(h, 0.0, 1.0)


def exactly_feasible(h):
    """h whose exact rescale stays <= 1, not only its float one: the exact shortfall n max(h) / 2 - sum(h) (a
    rounding residue, ~1e-11 with pieces at 1) is added to the piece nearest 0.5, rounded up, and a few ulps
    more while the exact check still fails."""
    fr = [Fraction(float(x)) for x in h]
    need = h.size * max(fr) / 2 - sum(fr)
    if need <= 0:
        return h
    h = h.copy()
    j = int(np.argmin(np.abs(h - 0.5)))
    target = Fraction(float(h[j])) + need
    x = float(target)
    h[j] = x if Fraction(x) >= target else np.nextafter(x, 1.0)
    for _ in range(200):
        fr = [Fraction(float(v)) for v in h]
        if h.size * max(fr) <= 2 * sum(fr):
            return h
        h[j] = np.nextafter(h[j] + 4 * np.spacing(h[j]), 1.0)
    raise ValueError("exactly_feasible: could not repair h")


def soft_max_and_grad(h, tau, penalty, fft_n=FFT_N):
    """(tau logsumexp(c(h) / tau) + penalty (sum h - n/2)^2 / n, its gradient) on h as given (no rescale)."""
    n = h.size
    fft = n >= fft_n
    charge(grad_work(n, fft))
    c = fftconvolve(h, (1.0 - h)[::-1]) * 2.0 / n if fft else corr(h)
    top = c.max()
    e = np.exp((c - top) / tau)
    s = e.sum()
    w = e / s
    val = top + tau * np.log(s)
    if fft:
        g = fftconvolve(w, 1.0 - h)[n - 1:2 * n - 1] - fftconvolve(h, w[::-1])[n - 1:2 * n - 1]
    else:
        g = np.convolve(w, 1.0 - h)[n - 1:2 * n - 1] - np.correlate(h, w, "full")[n - 1:2 * n - 1]
    g = g * 2.0 / n
    excess = h.sum() - n / 2
    return val + penalty * excess * excess / n, g + 2.0 * penalty * excess / n


def scaled_objective(h, tau, penalty, fft_n=FFT_N):
    """The soft maximum of c(g), g = h (n/2) / sum(h), plus penalty * sum(max(g - 1, 0)^2); gradient in h.

    The soft maximum is invariant to the scale of h; the last term, penalty (sum h - n/2)^2 / n, pins the
    scale (it moves no optimum) so that L-BFGS does not wander along a flat direction."""
    n = h.size
    a = n / 2
    total = h.sum()
    g = h * (a / total)
    val, dg = soft_max_and_grad(g, tau, 0.0, fft_n)
    over = np.maximum(g - 1.0, 0.0)
    val = val + penalty * float(over @ over)
    dg = dg + 2.0 * penalty * over
    excess = total - a
    return val + penalty * excess * excess / n, (a / total) * (dg - (dg @ g) / a) + 2.0 * penalty * excess / n


# ---- the clock ----------------------------------------------------------------------------------------
class Clock:
    """A budget in CPU seconds, with a wall-clock backstop of `wall_factor` times as long.

    How much a program computes then does not depend on how loaded the machine is, as long as it gets at
    least 1 / wall_factor of a core; below that the wall backstop stops it (each part at its share of the
    wall budget). wall_factor 1: the wall clock always binds first (CPU time never runs faster than the
    wall), which is a plain wall-clock budget. `left()` is in CPU seconds.

    The CPU seconds counted are those of the thread that runs the program (in the sandbox, where BLAS and
    OpenMP are capped at one thread, the whole process's): idle BLAS helper threads that spin on a loaded
    machine then do not eat the budget. `report` gives the whole process's CPU seconds too.

    unit "work" (or CLOCK_UNIT "work" when `unit` is None): the budget is in work seconds (`WORK`, charged by
    the blocks' cost model), so the same program and seed stop at the same point on any load; the wall
    backstop is then at least WORK_WALL_FACTOR times the budget."""

    def __init__(self, budget_s, wall_factor=1.0, unit=None):
        self.unit = CLOCK_UNIT if unit is None else unit
        if self.unit not in ("time", "work"):
            raise ValueError(f"Clock unit {self.unit!r}: one of 'time', 'work'")
        self.wall_factor = float(wall_factor)
        if self.unit == "work":
            self.wall_factor = max(self.wall_factor, WORK_WALL_FACTOR)
        self.cpu0, self.wall0, self.pcpu0, self.work0 = self._cpu(), time.time(), time.process_time(), WORK[0]
        self.tcpu0 = time.thread_time()
        self.budget_s = float(budget_s)
        self.cpu_end = self.cpu0 + self.budget_s
        self.wall_end = self.wall0 + self.wall_factor * self.budget_s

    def _cpu(self):
        """What the budget counts: work seconds or the program thread's CPU seconds."""
        return WORK[0] if self.unit == "work" else time.thread_time()

    @classmethod
    def wall_until(cls, t):
        """A clock that ends at wall time t (time.time() units; inf: never) and counts no CPU (legacy deadlines)."""
        c = cls(float("inf"), unit="time")
        c.wall_end = float(t)
        return c

    def _child(self, cpu_end, wall_end):
        c = Clock.__new__(Clock)
        c.unit = self.unit
        c.cpu0, c.wall0, c.pcpu0, c.work0 = self._cpu(), time.time(), time.process_time(), WORK[0]
        c.tcpu0 = time.thread_time()
        c.wall_factor = self.wall_factor
        c.cpu_end, c.wall_end = min(self.cpu_end, cpu_end), min(self.wall_end, wall_end)
        c.budget_s = max(0.0, c.cpu_end - c.cpu0)
        return c

    def left(self):
        """CPU seconds left (the backstop's wall seconds left / wall_factor when that is less); a work clock: the
        work seconds left, 0 once past its wall backstop."""
        if self.unit == "work":  # the wall never shapes a work clock's answer; past the backstop it stops it
            charge(CHECK_WORK)
            work = self.cpu_end - WORK[0]
            if work > 0.0 and time.time() >= self.wall_end:
                WALL_STOPS[0] += 1
                return 0.0
            return work
        return min(self.cpu_end - time.thread_time(), (self.wall_end - time.time()) / self.wall_factor)

    def done(self):
        return self.left() <= 0.0

    def sub(self, seconds):
        """A clock for the next `seconds` CPU seconds (wall_factor x as many wall seconds), within this one."""
        return self._child(self._cpu() + seconds, time.time() + self.wall_factor * seconds)

    def until(self, frac):
        """A clock ending at `frac` of this clock's budget, counted from this clock's start."""
        return self._child(self.cpu0 + frac * self.budget_s, self.wall0 + self.wall_factor * frac * self.budget_s)

    def used(self):
        """CPU seconds (of the thread running the program) since this clock started (work seconds for a work
        clock)."""
        return self._cpu() - self.cpu0

    def work_used(self):
        """Work seconds charged since this clock started (whatever its unit)."""
        return WORK[0] - self.work0

    def process_used(self):
        """CPU seconds of the whole process (all its threads) since this clock started."""
        return time.process_time() - self.pcpu0

    def wall(self):
        """Wall seconds since this clock started."""
        return time.time() - self.wall0

    def wall_left(self):
        """Wall seconds to the backstop."""
        return self.wall_end - time.time()


def as_clock(deadline):
    """A Clock as is; a number as a wall-clock deadline (time.time() units)."""
    return deadline if isinstance(deadline, Clock) else Clock.wall_until(deadline)


def report(clock, **extra):
    """Print one `program_meta {...}` line: the CPU seconds of the process and of the program's thread, and the
    wall seconds, since `clock` started (the search records them per program; a diagnostic, never a score)."""
    meta = {"cpu_s": round(clock.process_used(), 3), "thread_cpu_s": round(time.thread_time() - clock.tcpu0, 3),
            "wall_s": round(clock.wall(), 3), "work_s": round(clock.work_used(), 3), "wall_stops": WALL_STOPS[0], **extra}
    print("program_meta " + json.dumps(meta), flush=True)


# ---- starts and sizes ---------------------------------------------------------------------------------
def random_start(n, rng):
    """Zero margins at both ends (the published constructions are 0 on about a tenth of [0, 2] at each end),
    a random rough profile in between."""
    h = np.zeros(n)
    z = int(round(n * rng.uniform(0.06, 0.16)))
    m = n - 2 * z
    h[z:z + m] = np.clip(rng.uniform(0.2, 1.0, m) + 0.3 * np.sin(np.linspace(0, np.pi, m)), 0, 1)
    return h


def smooth_start(n, rng, modes=4):
    """Zero margins, a smooth random profile in between (a few random sine modes on a plateau)."""
    h = np.zeros(n)
    z = int(round(n * rng.uniform(0.06, 0.16)))
    m = n - 2 * z
    x = np.linspace(0, np.pi, m)
    prof = 0.6 + 0.3 * np.sin(x)
    for k in range(1, int(modes) + 1):
        prof = prof + rng.normal(0, 0.15 / k) * np.sin(k * x + rng.uniform(0, np.pi))
    h[z:z + m] = np.clip(prof, 0, 1)
    return h


def symmetrise(h):
    """(h + h reversed) / 2: the published constructions are nearly symmetric at coarse scale."""
    return (h + h[::-1]) / 2


def coarsen(h, f):
    """Block averages of f pieces (the same function at 1/f the resolution; unchanged when f does not divide
    n or fewer than 8 pieces would remain)."""
    f = int(f)
    if f > 1 and h.size % f == 0 and h.size // f >= 8:
        return h.reshape(-1, f).mean(axis=1)
    return h


def upsample(h, k=2):
    """Every piece split in k equal pieces: the same function (same C5), k times the freedom."""
    return np.repeat(h, int(k))


# ---- local solves -------------------------------------------------------------------------------------
class _Timeout(Exception):
    pass


def smooth(h, tau, clock, penalty=1000.0, maxcor=30, ftol=1e-16, objective="penalty", fft_n=FFT_N):
    """One L-BFGS-B stage at temperature tau from h over the box [0, 1]; returns the last iterate (also when
    the clock runs out). objective "penalty": the soft max of c(h) with (sum h - n/2)^2 penalised (descends
    fastest from far); "scaled": through the verifier's rescale (reaches lower once near an optimum)."""
    last = [h]
    fn = scaled_objective if objective == "scaled" else soft_max_and_grad
    step_work = lbfgs_work(h.size)

    def f(x):
        if clock.done():
            raise _Timeout
        charge(step_work)
        last[0] = x
        return fn(x, tau, penalty, fft_n)

    try:
        res = minimize(f, h, jac=True, method="L-BFGS-B", bounds=[(0.0, 1.0)] * h.size,
                       options={"maxiter": 100000, "maxcor": int(maxcor), "ftol": ftol, "gtol": 1e-14})
        return res.x
    except _Timeout:
        return last[0]


def continuation(h, clock, tau0=1e-6, tau_end=1e-10, factor=0.3, penalty=1000.0, maxcor=30, objective="penalty",
                 fft_n=FFT_N):
    """Stages tau0, tau0 * factor, ... down to tau_end, each warm-started from the last and given an equal
    share of the clock's time left; returns (best normalised h seen, its C5)."""
    stages = max(1, int(np.ceil(np.log(tau0 / float(tau_end)) / np.log(1.0 / float(factor))))) + 1
    h = normalise(h)
    best, best_c = h, corr(h).max()
    tau = tau0
    for k in range(stages):
        left = clock.left()
        if left <= 0.05:
            break
        h = smooth(h, tau, clock.sub(left / (stages - k)), penalty, maxcor, objective=objective, fft_n=fft_n)
        cand = normalise(h)
        c = corr(cand).max()
        if c < best_c:
            best, best_c = cand, c
        tau *= float(factor)
    return best, best_c


def converge(h, clock, taus=HOP_TAUS, objective="penalty", ftol=1e-11, penalty=1000.0, maxcor=30, fft_n=FFT_N):
    """Stages at fixed temperatures, each L-BFGS-B run to convergence (`ftol`) or the clock, whichever is
    first: unlike `continuation`, the result does not depend on the time it gets. Returns (h, true C5)."""
    for tau in taus:
        if clock.done():
            break
        h = smooth(h, tau, clock, penalty, maxcor, ftol, objective, fft_n)
    h = normalise(h)
    return h, corr(h).max()


def multistart(n, clock, rng, tau=0.01, per_start_s=20.0, start=random_start, **kw):
    """Continuation from random starts of n pieces (tau -> 1e-10) until the clock runs out (at least one, each
    at most `per_start_s`); returns the best (h, C5). `kw` go to `continuation`."""
    best = None
    while best is None or not clock.done():
        h, c = continuation(start(int(n), rng), clock.sub(per_start_s), tau, **kw)
        if best is None or c < best[1]:
            best = (h, c)
    return best


# ---- moves --------------------------------------------------------------------------------------------
def hop(h, clock, rng, max_hops=None, temperature=0.0, sym=0.0, sigma=0.3, window=0.15, ftol=1e-11,
        penalty=1000.0, maxcor=30, fft_n=FFT_N):
    """Basin hopping from h until the clock runs out (or `max_hops`); returns (best h, its C5, hops tried).

    Each hop perturbs a random window (a fraction 0.3-1 of `window` of the pieces) of the current profile by
    Gaussian noise (`sigma`), with probability `sym` also replaces it by its mirror average, and takes it to
    its local optimum (`converge`). temperature 0: monotone (the current profile is the best); > 0:
    Metropolis, an uphill hop of d is taken with probability exp(-d / temperature)."""
    n = h.size
    best = cur = converge(normalise(h), clock, HOP_TAUS, "penalty", ftol, penalty, maxcor, fft_n)
    hops = 0
    while not clock.done() and (max_hops is None or hops < max_hops):
        x = cur[0].copy()
        w = max(2, int(float(window) * n * rng.uniform(0.3, 1.0)))
        a = int(rng.integers(0, n - w + 1))
        x[a:a + w] = np.clip(x[a:a + w] + float(sigma) * rng.standard_normal(w), 0.0, 1.0)
        if sym > 0 and rng.uniform() < sym:
            x = (x + x[::-1]) / 2
        cand = converge(x, clock, HOP_TAUS, "penalty", ftol, penalty, maxcor, fft_n)
        hops += 1
        if cand[1] < cur[1] or (temperature > 0 and rng.uniform() < np.exp(-(cand[1] - cur[1]) / temperature)):
            cur = cand
        if cand[1] < best[1]:
            best = cand
    return best[0], best[1], hops


# ---- exact minimax steps (sequential LP) ----------------------------------------------------------------
def lin_all(h, d):
    """J d for every lag: the linear part of c(h + d) - c(h)."""
    n = h.size
    return (np.correlate(d, 1.0 - h, "full") - np.correlate(h, d, "full")) * 2.0 / n


def jac_rows(h, lags):
    """d c_m / d h_j for the given lags (rows)."""
    n = h.size
    u = 1.0 - h
    j = np.arange(n)[None, :]
    m = np.asarray(lags)[:, None]
    i1 = j - m + n - 1
    i2 = j + m - n + 1
    a = np.where((i1 >= 0) & (i1 < n), u[np.clip(i1, 0, n - 1)], 0.0)
    b = np.where((i2 >= 0) & (i2 < n), h[np.clip(i2, 0, n - 1)], 0.0)
    return (a - b) * 2.0 / n


def lp_step(h, c, delta, margin, clock, max_rounds=30):
    """The minimiser d of the linear model of every lag within the trust region |d| <= delta, sum d = 0,
    0 <= h + d <= 1 (HiGHS; lags within `margin` of the max first, violated ones added until none is);
    None if the LP fails or the clock has under 0.5 s left."""
    n = h.size
    active = set(np.nonzero(c >= c.max() - margin)[0].tolist())
    lo, hi = np.maximum(-delta, -h), np.minimum(delta, 1.0 - h)
    bounds = np.stack([np.append(lo, -np.inf), np.append(hi, np.inf)], axis=1)
    cost = np.zeros(n + 1)
    cost[-1] = 1.0
    a_eq = np.ones((1, n + 1))
    a_eq[0, -1] = 0.0
    for _ in range(max_rounds):
        if clock.left() < 0.5:
            return None
        lags = np.array(sorted(active))
        a_ub = np.hstack([jac_rows(h, lags), -np.ones((lags.size, 1))])
        charge(lp_work(*a_ub.shape))
        res = linprog(cost, A_ub=a_ub, b_ub=-c[lags], A_eq=a_eq, b_eq=[0.0], bounds=bounds, method="highs",
                      options={"time_limit": max(0.5, clock.wall_left())})
        if res.status != 0:
            return None
        d, t = res.x[:n], res.x[-1]
        model = c + lin_all(h, d)
        new = [m for m in np.nonzero(model > t + 1e-13)[0].tolist() if m not in active]
        if not new:
            return d
        active.update(new)
    return d


def lp_polish(h, clock, delta=0.02, margin=1e-6):
    """Trust-region sequential LP from h until the clock runs out or the trust region collapses: a step is
    kept only when the true C5 drops (delta x1.5, else x0.5). Slow per step at large n (the LP grows dense),
    exact where the smoothed solves stall. Returns (h, C5, steps)."""
    h = normalise(h)
    cur = corr(h).max()
    steps = 0
    while not clock.done() and delta > 1e-9:
        c = corr(h)
        d = lp_step(h, c, delta, margin, clock)
        if d is None and clock.left() <= 0.5:
            break
        if d is None:
            delta *= 0.5
            continue
        cand = normalise(h + d)
        val = corr(cand).max()
        steps += 1
        if val < cur:
            h, cur = cand, val
            delta = min(0.1, delta * 1.5)
        else:
            delta *= 0.5
    return h, cur, steps


# ---- refinement ---------------------------------------------------------------------------------------
def refine(h, clock, max_n, taus=FINE_TAUS, objective="scaled", ftol=1e-15, to_max=False, log=None, **kw):
    """Double h and re-converge it while 2n <= max_n, the clock's time left shared equally between the
    doublings still to do; returns (h, C5). The doublings stop when the clock runs out, unless `to_max`
    (then the last ones are not re-converged: the same function at max_n pieces). `kw` go to `converge`."""
    c = None
    while h.size * 2 <= int(max_n) and (to_max or not clock.done()):
        levels = int(np.floor(np.log2(int(max_n) / h.size)))
        h, c = converge(upsample(h, 2), clock.sub(max(0.0, clock.left()) / levels), taus, objective, ftol, **kw)
        if log:
            log(f"refined to n={h.size} C5={c:.12f}")
    return h, (c5(h) if c is None else c)


def finish(h):
    """The construction to return: normalised, then repaired so the exact rational check passes."""
    return exactly_feasible(normalise(np.asarray(h, dtype=np.float64)))
