"""Timing in one place: warm-up, repeats, L2 flush or rotating inputs, events or graphs, median + IQR.

``measure(fn, ...)`` times ``fn()`` (or ``fn(inputs)`` over rotating input sets) and returns a
:class:`Timing` with the median, quartiles and every raw sample in microseconds.

- CUDA/HIP (torch.cuda): one pair of events per repetition around a single launch; before each
  timed launch a buffer of >= 2x the L2 size is overwritten so repeats do not time the cache
  (or pass ``rotate=[inputs0, inputs1, ...]`` and set ``flush_l2=False``). ``use_graph=N`` captures
  N back-to-back launches in a CUDA graph and replays it (launch overhead amortised; divide by N;
  the L2 is warm inside a graph, which the method string says).
- CPU (tests, TRITON_INTERPRET=1): ``time.perf_counter`` around each call.

Adaptive (``adaptive=True``, the engine's default): repetitions come in batches of ``min_reps``
and stop as soon as the distribution-free 95% confidence interval of the median (from order
statistics, :func:`median_ci`) lies within +-``ci_rel`` of the median, or when ``rep_ms`` (the
most a point may take) or ``reps`` is used up. A steady kernel stops after ``min_reps``; a noisy
one gets the whole budget. The warm-up (``warmup_ms``) is the same either way. Warm-up and
timed repetitions are counted as the ``warmup`` and ``timing`` phases (:mod:`occtune.engine.phases`).

The engine never calls ``measure`` directly: it calls a *timer* (the :class:`Timer` protocol), so
tests can inject :class:`tests/doubles.py FakeTimer` and run without a GPU or noise.
"""

from __future__ import annotations

import math
import statistics
import time
from dataclasses import asdict, dataclass, field
from typing import Any, Callable, Protocol, Sequence

from occtune.engine.phases import phase

_MIN_EST_MS = 1e-4          # guard against a zero estimate (do_bench divides by it)
_MAX_REPS = 2000
_MIN_REPS = 5            # a median and quartiles need a few samples even for slow kernels
_DEFAULT_L2_BYTES = 256 * 1024 * 1024


@dataclass
class Timing:
    median_us: float
    q1_us: float
    q3_us: float
    iqr_us: float
    samples_us: list[float] = field(default_factory=list)
    method: str = ""

    @classmethod
    def from_samples(cls, samples_us: Sequence[float], method: str) -> "Timing":
        s = sorted(float(x) for x in samples_us)
        if not s:
            raise ValueError("no timing samples")
        if len(s) == 1:
            q1 = med = q3 = s[0]
        else:
            q1, med, q3 = statistics.quantiles(s, n=4, method="inclusive")
        return cls(med, q1, q3, q3 - q1, [round(x, 4) for x in samples_us], method)

    def to_dict(self) -> dict:
        return asdict(self)


class Timer(Protocol):
    """Times one (config, workload) point. ``context`` names it (config, workload) for fakes."""

    kind: str   # part of the cache fingerprint: points timed by another kind are not reused

    def __call__(self, fn: Callable[..., Any], *, rotate: list | None = None,
                 context: dict | None = None) -> Timing: ...


@dataclass
class BenchTimer:
    """The real timer: :func:`measure` with fixed settings (picklable, so workers get a copy)."""

    warmup_ms: float = 25.0
    rep_ms: float = 100.0
    reps: int | None = None
    flush_l2: bool = True
    use_graph: int = 0
    adaptive: bool = False
    ci_rel: float = 0.01
    min_reps: int = 10
    kind: str = "bench"

    def __call__(self, fn, *, rotate=None, context=None) -> Timing:
        return measure(fn, warmup_ms=self.warmup_ms, rep_ms=self.rep_ms, reps=self.reps,
                       flush_l2=self.flush_l2, rotate=rotate, use_graph=self.use_graph,
                       device=(context or {}).get("device"),
                       stop=Stop(self.ci_rel, self.min_reps) if self.adaptive else None)


@dataclass(frozen=True)
class Stop:
    """When adaptive timing stops: the median's 95% CI within +-``ci_rel``, after ``min_reps``."""

    ci_rel: float = 0.01
    min_reps: int = 10

    def done(self, samples: Sequence[float]) -> bool:
        if len(samples) < max(self.min_reps, 2):
            return False
        lo, med, hi = median_ci(samples)
        return med > 0 and (hi - lo) <= 2.0 * self.ci_rel * med


def median_ci(samples: Sequence[float], z: float = 1.96) -> tuple[float, float, float]:
    """(low, median, high): the distribution-free confidence interval of the median from order
    statistics (ranks n/2 -+ z*sqrt(n)/2, rounded outward; 95% for z = 1.96)."""
    s = sorted(samples)
    n = len(s)
    half = z * math.sqrt(n) / 2.0
    lo = max(0, math.floor(n / 2.0 - half) - 1)          # 0-based ranks
    hi = min(n - 1, math.ceil(n / 2.0 + half))
    return s[lo], statistics.median(s), s[hi]


def _collect(take: Callable[[int], list], n_rep: int, stop: Stop | None) -> list[float]:
    """Samples from ``take(n)`` (n more timed runs): all ``n_rep`` at once, or adaptive batches."""
    if stop is None:
        with phase("timing"):
            return take(n_rep)
    samples: list[float] = []
    with phase("timing"):
        while len(samples) < n_rep:
            samples += take(min(max(stop.min_reps, 1), n_rep - len(samples)))
            if stop.done(samples):
                break
    return samples


def measure(fn: Callable[..., Any], *, warmup_ms: float = 25.0, rep_ms: float = 100.0,
            reps: int | None = None, flush_l2: bool = True, rotate: list | None = None,
            use_graph: int = 0, device: Any = None, stop: Stop | None = None) -> Timing:
    """Time ``fn``; see the module docstring. ``reps`` fixes the count (the most, when adaptive),
    else ``rep_ms`` budgets it; ``stop`` makes it adaptive."""
    call = _rotating(fn, rotate)
    if _on_gpu(device):
        if use_graph and use_graph > 1:
            return _measure_graph(call, warmup_ms, rep_ms, reps, use_graph, stop)
        return _measure_events(call, warmup_ms, rep_ms, reps, flush_l2, stop)
    return _measure_cpu(call, warmup_ms, rep_ms, reps, stop)


def _rotating(fn, rotate):
    if not rotate:
        return lambda: fn()
    state = {"i": 0}

    def call():
        args = rotate[state["i"] % len(rotate)]
        state["i"] += 1
        return fn(args)

    return call


def _on_gpu(device) -> bool:
    try:
        import torch
    except ImportError:
        return False
    if device is not None:
        return str(device).startswith("cuda")
    return torch.cuda.is_available()


def _counts(est_ms: float, warmup_ms: float, rep_ms: float, reps: int | None) -> tuple[int, int]:
    est_ms = max(est_ms, _MIN_EST_MS)
    n_warm = max(1, int(warmup_ms / est_ms))
    n_rep = reps if reps else max(_MIN_REPS, int(rep_ms / est_ms))
    return min(n_warm, _MAX_REPS), min(n_rep, _MAX_REPS)


def _method(base: str, samples: list, n_rep: int, stop: Stop | None) -> str:
    if stop is None:
        return base
    return base + (f" adaptive ({len(samples)} runs, CI +-{100 * stop.ci_rel:g}%)" if len(samples) < n_rep
                   else f" adaptive (budget used: {len(samples)} runs)")


def _measure_cpu(call, warmup_ms, rep_ms, reps, stop=None) -> Timing:
    with phase("warmup"):
        t0 = time.perf_counter()
        call()
        est_ms = (time.perf_counter() - t0) * 1e3
        n_warm, n_rep = _counts(est_ms, warmup_ms, rep_ms, reps)
        for _ in range(n_warm):
            call()

    def take(n):
        out = []
        for _ in range(n):
            t0 = time.perf_counter()
            call()
            out.append((time.perf_counter() - t0) * 1e6)
        return out

    samples = _collect(take, n_rep, stop)
    return Timing.from_samples(samples, _method("perf_counter", samples, n_rep, stop))


def l2_flush_buffer(device=None):
    """A byte buffer of >= 2x the device's L2 (from its properties; 256 MiB when unknown)."""
    import torch

    props = torch.cuda.get_device_properties(device if device is not None else torch.cuda.current_device())
    l2 = int(getattr(props, "L2_cache_size", 0) or 0) or _DEFAULT_L2_BYTES // 2
    return torch.empty(2 * l2, dtype=torch.int8, device="cuda")


def _estimate_gpu_ms(call, flush) -> float:
    import torch

    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    call()
    torch.cuda.synchronize()
    start.record()
    for _ in range(5):
        if flush is not None:
            flush.zero_()
        call()
    end.record()
    torch.cuda.synchronize()
    return start.elapsed_time(end) / 5


# Before each timed launch the GPU spins, so the host has enqueued the call before the start
# event fires: the events then time the kernels, not the host's launch overhead (which otherwise
# dominates kernels of a few microseconds). The spin lasts at least _SLEEP_CYCLES (~100 us at
# 2 GHz) and at least twice the call's measured host time (a call that launches through a slow
# host path, e.g. several kernels through ctypes, can take hundreds of microseconds to enqueue).
_SLEEP_CYCLES = 200_000
_SPIN_GHZ = 2.0            # cycles per ns assumed to size the spin (a slower clock spins longer)


def _spin_cycles(host_us: float) -> int:
    return max(_SLEEP_CYCLES, int(2.0 * host_us * _SPIN_GHZ * 1e3))


def _hide_launch(host_us: float = 0.0):
    import torch

    sleep = getattr(torch.cuda, "_sleep", None)
    if sleep is None:
        return lambda: None, ""
    cycles = _spin_cycles(host_us)
    return (lambda: sleep(cycles)), " + launch hidden"


def _host_us(call, n: int = 3) -> float:
    """Median host time of enqueueing ``call`` (no synchronisation inside the timed span)."""
    import time

    ts = []
    for _ in range(n):
        t0 = time.perf_counter()
        call()
        ts.append((time.perf_counter() - t0) * 1e6)
    return sorted(ts)[len(ts) // 2]


_FLUSH: dict = {}


def _flush_buffer():
    """The L2 flush buffer of the current device, allocated once per process."""
    import torch

    dev = torch.cuda.current_device()
    if dev not in _FLUSH:
        _FLUSH[dev] = l2_flush_buffer(dev)
    return _FLUSH[dev]


def _measure_events(call, warmup_ms, rep_ms, reps, flush_l2, stop=None) -> Timing:
    import torch

    with phase("warmup"):
        flush = _flush_buffer() if flush_l2 else None
        n_warm, n_rep = _counts(_estimate_gpu_ms(call, flush), warmup_ms, rep_ms, reps)
        spin, spin_note = _hide_launch(_host_us(call))
        for _ in range(n_warm):
            call()

    def take(n):
        starts = [torch.cuda.Event(enable_timing=True) for _ in range(n)]
        ends = [torch.cuda.Event(enable_timing=True) for _ in range(n)]
        for s, e in zip(starts, ends):
            if flush is not None:
                flush.zero_()
            spin()
            s.record()
            call()
            e.record()
        torch.cuda.synchronize()
        return [s.elapsed_time(e) * 1e3 for s, e in zip(starts, ends)]

    samples = _collect(take, n_rep, stop)
    method = "cuda-events" + (" + L2 flush" if flush is not None else " (L2 warm)") + spin_note
    return Timing.from_samples(samples, _method(method, samples, n_rep, stop))


def _measure_graph(call, warmup_ms, rep_ms, reps, n_launch, stop=None) -> Timing:
    import torch

    with phase("warmup"):
        stream = torch.cuda.Stream()
        stream.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(stream):      # warm up (and compile) outside the capture
            for _ in range(3):
                call()
        torch.cuda.current_stream().wait_stream(stream)
        torch.cuda.synchronize()
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            for _ in range(n_launch):
                call()
        torch.cuda.synchronize()
        est = _estimate_gpu_ms(graph.replay, None)
        n_warm, n_rep = _counts(est, warmup_ms, rep_ms, reps)
        for _ in range(n_warm):
            graph.replay()

    def take(n):
        starts = [torch.cuda.Event(enable_timing=True) for _ in range(n)]
        ends = [torch.cuda.Event(enable_timing=True) for _ in range(n)]
        for s, e in zip(starts, ends):
            s.record()
            graph.replay()
            e.record()
        torch.cuda.synchronize()
        return [s.elapsed_time(e) * 1e3 / n_launch for s, e in zip(starts, ends)]

    samples = _collect(take, n_rep, stop)
    return Timing.from_samples(samples, _method(f"cuda-graph x{n_launch} (L2 warm)", samples, n_rep, stop))
