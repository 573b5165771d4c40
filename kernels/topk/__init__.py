"""Radix top-k with transform ("topk_transform"), our own CUDA/HIP single-source kernel.

``topk(scores, k, lengths, row_starts, lds_budget=..., ...)`` -> int32 ``[B, k]`` row indices of the
k largest scores per row (unsorted; -1 padding where a row is shorter than k), optionally mapped
through a page table or ragged offsets. See ``topk.cuh`` for the algorithm and the NaN policy.

Serving: a call's host work after the first call of a shape is an output allocation, a pointer
check and the driver-API launches, in one C call (``LaunchPlan``; ``kernel.launcher`` says whether
occtune's native launcher, cuda-python/hip-python or torch's slower launcher is used). The
recommended serving mode is a CUDA graph: capture ``topk`` (or ``torch.ops.occtune.topk``, see
``op.py``) once after a warm-up call, copy each step's scores (and lengths) into the captured
tensors and replay the graph.
"""

from __future__ import annotations

import functools
import threading
from collections import namedtuple
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from occtune.build import rtc
from occtune.errors import UserError
from occtune.kernels.topk.capacity import candidate_entries
from occtune.model.targets import hopper_or_later
from occtune.outputs.tuned import tuned_config
from occtune.validate import SIZE, Rule

SOURCE_PATH = Path(__file__).with_name("topk.cuh")
# the default runs' compiled resources and tie bound on every target (tools/precompute.py topk)
PRECOMPUTED = Path(__file__).with_name("precomputed.json")
KERNEL_NAME = "topk_transform_kernel"
SPLIT_KERNEL_NAME = "topk_split_keep_kernel"
CLUSTER_KERNEL_NAME = "topk_cluster_kernel"
PORTABLE_CLUSTER = 8                  # the portable thread-block cluster size (sm_90+)
MAX_CLUSTER = 16                      # with the non-portable attribute set (sm_90, sm_100): cluster=True
AUTO_CLUSTER = 8                      # the largest cluster the automatic plan takes
CLUSTER_TWO_LEVEL = 4                 # topk.cuh's TOPK_CLUSTER_TWO_LEVEL: two-level searches from here
CLUSTER_REGS_VALUES = 16384           # the register path's slice: at most this many values per block
PREFETCH_CLUSTERS = 3                 # cluster sizes built side by side where the first may not fit
SPLIT_MIN_SLICE = 16384               # a split row's slices are at least this many columns
DEFAULT_BUDGET = 128 * 1024          # the untuned default of the original kernel
MAX_K = 2048
# What the kernel accepts (checked by ``defines``, by the profile and by the CLI options).
BITS_RULE = Rule(int, choices=(8, 12))                    # coarse-key width
THREADS_RULE = Rule(int, min=64, max=1024, multiple=64)   # threads per block
BUDGET_RULE = Rule(SIZE, min=64, multiple=8)              # dynamic LDS bytes
K_RULE = Rule(int, min=1, max=MAX_K)                      # top-k size
_BUDGET_BYTES = replace(BUDGET_RULE, kind=int)            # a config's budget: bytes, not "40K"
# Long rows: prefix length that bounds the threshold bin, and the per-row scratch list length.
PREFIX_MIN_ROW = 131072               # rows at least this long use the prefix-bound single pass
# The kernel's per-row report (topk.cuh, TOPK_FLAG_*): how each row was finished. No overflow is
# silent: a row whose threshold bin, shared stage or kept list overflowed has its flag set.
ROW_FLAGS = {"bin_overflow_rows": 1,    # bin t did not fit the candidate list (narrowed elsewhere)
             "spilled_rows": 2,         # a cluster block's kept values spilled to global memory
             "replayed_rows": 4,        # the long-row pass was given up, the row redone
             "row_pass_rows": 8}        # bin t was narrowed by extra passes over the row itself


def flag_counts(row_flags) -> dict:
    """{name: rows with that flag} of a kernel's per-row flags (a tensor; one host sync)."""
    import torch

    if not row_flags.numel():
        return dict.fromkeys(ROW_FLAGS, 0)
    bits = torch.tensor(list(ROW_FLAGS.values()), dtype=row_flags.dtype, device=row_flags.device)
    counts = ((row_flags[:, None] & bits) != 0).sum(0).tolist()
    return dict(zip(ROW_FLAGS, map(int, counts)))


def read_source() -> str:
    return SOURCE_PATH.read_text(encoding="utf-8")


def defines(lds_budget: int, threads: int = 512, bits: int = 8) -> dict:
    """The compile-time macros of one config (validated)."""
    return {"SGL_TOPK_DYNAMIC_SMEM_BYTES": _BUDGET_BYTES.check(lds_budget, "LDS budget"),
            "TOPK_THREADS": THREADS_RULE.check(threads, "threads"),
            "TOPK_COARSE_BITS": BITS_RULE.check(bits, "coarse key width")}


@functools.lru_cache(maxsize=1024)
def _tuned(B: int, L: int, k: int, device) -> dict:
    """The tuned config of this workload on ``device`` (:mod:`occtune.outputs.tuned`); {} without one.
    Looked up once per (B, L, k, device) in a process: no file system access on the serving path."""
    return tuned_config("topk", {"B": B, "L": L, "K": int(k)}, device=device,
                        validate=lambda c: defines(c["lds_budget"], c["threads"], c["bits"]) and c) or {}


def split_record_ints(bits: int) -> int:
    """Ints per row of the split kernel's record (topk.cuh's TOPK_SPLIT_REC): the kept-list
    length, the coarse histogram of the kept values (2**bits bins), 1 + the bin the sampled floor
    cut (0: none)."""
    return 2 + (1 << int(bits))


def long_row_plan(L: int, k: int, prefix_min_row: int = PREFIX_MIN_ROW) -> tuple[int, int]:
    """(prefix_len, scratch_cap) for rows of ``L`` columns; (0, 0) disables the single pass.

    The prefix (L/16, at least 16k) bounds the threshold bin from below: only elements at or
    above that bound are counted and copied to the scratch list, roughly k/prefix of the row plus
    one coarse bin. L/8 entries (at least 16k) leave headroom on random rows; an overflow falls
    back to re-reading the row, exactly.
    """
    if L < prefix_min_row or L < 16 * k:
        return 0, 0
    prefix = max(16 * k, L // 16)
    if 2 * prefix >= L:
        prefix = max(k, (L - 1) // 2)
    return prefix, max(16 * k, L // 8)


def split_plan(B: int, L: int, scratch_cap: int, num_sms: int, split=None,
               blocks_per_sm: int = 2) -> int:
    """Blocks per row of the split main pass (1: one block per row, no split kernel).

    ``split=None`` chooses: nothing when B >= the SM count, else as many blocks per row as fit
    in one wave (B*S <= blocks_per_sm * num_sms: every block of the main pass resident at
    once), each slice at least SPLIT_MIN_SLICE columns; only rows that take the long-row path
    (scratch_cap > 0) split. An int forces that many (still capped so that no slice is empty);
    0 or 1 disables it.
    """
    if not scratch_cap or B <= 0 or L <= 0:
        return 1
    if split is None:
        if B >= num_sms:          # one block per row already fills the GPU
            return 1
        want = max(1, int(blocks_per_sm)) * int(num_sms) // B
        s = min(want, L // SPLIT_MIN_SLICE)
    else:
        s = int(split)
        if s < 0:
            raise UserError(f"split must be >= 0 blocks per row, got {split}")
        s = min(s, max(1, L // 4))
    return s if s >= 2 else 1


def cluster_fits(L: int, k: int, lds_budget: int, S: int) -> bool:
    """Whether a cluster block's slice is expected to keep few enough values for its stage.

    The sample aims at about 1.5k + L/256 kept values per row (1.5 times the expected count
    above the k-th largest, plus a margin: TOPK_SAMPLE_MARGIN in topk.cuh); the rule counts
    2k + L/256 (the kernel's aim before v8, kept: it only adds headroom), a block keeps 1/S of
    them. With 50% more headroom for the coarse bin's width and sampling noise they must fit
    the budget's entries, or a row would often take the (exact, slower) whole-row fallback.
    """
    per_block = (2 * int(k) + int(L) // 256) / max(1, int(S))
    return 1.5 * per_block <= candidate_entries(lds_budget)


_BUILT: dict = {}             # (budget, threads, bits, device) -> kernel: a repeat costs a lookup


def build(lds_budget: int = DEFAULT_BUDGET, threads: int = 512, bits: int = 8, device=None):
    key = (lds_budget, threads, bits, device)
    h = _BUILT.get(key)
    if h is None:
        h = _BUILT[key] = rtc.compile_kernel(read_source(), KERNEL_NAME, defines(lds_budget, threads, bits),
                                             device, dynamic_smem=int(lds_budget))
    return h


_DERIVED_HANDLES: dict = {}   # (name, options, arch, device, extra macros) -> kernel
_NUM_SMS: dict = {}


def _derived_handle(handle, name, extra: dict, dynamic_smem: int, lds_budget, threads, bits, dev):
    """Kernel ``name`` of topk.cuh built with every macro of ``handle`` plus ``extra`` (cached:
    no host work after the first call)."""
    key = _derived_key(handle, name, extra, dev)
    h = _DERIVED_HANDLES.get(key)
    if h is None:
        d = {**(handle.defines or defines(lds_budget, threads, bits)), **extra}   # extra macros carry over
        h = rtc.compile_kernel(read_source(), name, d, dev, dynamic_smem=dynamic_smem)
        _DERIVED_HANDLES[key] = h
    return h


def _derived_key(handle, name, extra: dict, dev) -> tuple:
    return (name, tuple(getattr(handle, "options", ()) or ()), getattr(handle, "arch", None), str(dev),
            tuple(sorted(extra.items())))


def _cluster_key(handle, S: int, dev) -> tuple:
    return _derived_key(handle, CLUSTER_KERNEL_NAME, {"TOPK_CLUSTER": int(S)}, dev)


def _split_handle(handle, lds_budget, threads, bits, dev):
    """The split main-pass kernel (no dynamic shared memory), built alone (TOPK_SPLIT_ONLY)."""
    return _derived_handle(handle, SPLIT_KERNEL_NAME, {"TOPK_SPLIT_ONLY": 1}, 0, lds_budget, threads, bits, dev)


def _cluster_handle(handle, S: int, lds_budget, threads, bits, dev, regs: int = 0):
    """The cluster kernel with TOPK_CLUSTER=S (same lds_budget), with the register path where
    ``regs`` (TOPK_CLUSTER_REGS: float4 per thread); above PORTABLE_CLUSTER blocks with the
    non-portable cluster size allowed (a UserError where the driver refuses)."""
    smem = int((handle.defines or {}).get("SGL_TOPK_DYNAMIC_SMEM_BYTES", lds_budget))
    extra = {"TOPK_CLUSTER": int(S), **({"TOPK_CLUSTER_REGS": int(regs)} if regs else {})}
    h = _derived_handle(handle, CLUSTER_KERNEL_NAME, extra, smem, lds_budget, threads, bits, dev)
    if S > PORTABLE_CLUSTER and not h.info.get("nonportable_cluster"):
        rtc.allow_nonportable_cluster(h)
        h.info["nonportable_cluster"] = True
    return h


def cluster_regs(L: int, S: int, threads: int) -> int:
    """TOPK_CLUSTER_REGS (float4 per thread) of the cluster kernel's register path for rows of
    ``L`` over S blocks of ``threads``, or 0 where it does not apply: a two-level build (S >=
    CLUSTER_TWO_LEVEL), 256 threads or more, each block's slice at most 4 R threads values (R =
    CLUSTER_REGS_VALUES / 4 threads, rounded down: the kernel's own test, so that a thread count
    that does not divide 4096 never builds a register path no row takes)."""
    slice_ = (-(-int(L) // int(S)) + 3) & ~3          # topk_cluster_slice's chunk
    regs = CLUSTER_REGS_VALUES // (4 * int(threads))
    if S < CLUSTER_TWO_LEVEL or threads < 256 or slice_ > 4 * regs * int(threads):   # the kernel's test
        return 0
    return regs


def _cluster_kernel(handle, S: int, B: int, L: int, lds_budget, threads, bits, dev):
    """The cluster kernel a plan launches: with the register path where it applies (see
    ``cluster_regs``) and the driver keeps all B clusters of it resident at once (it takes more
    registers); else the sampled one, whose residency ``_cluster_plan`` checked."""
    nthreads = int(handle.defines.get("TOPK_THREADS", threads))
    regs = cluster_regs(L, S, nthreads)
    if regs:
        try:
            ch = _cluster_handle(handle, S, lds_budget, threads, bits, dev, regs)
        except UserError:
            ch = None
        if ch is not None:
            most = _resident_clusters(ch, S, nthreads, ch.dynamic_smem)
            if most is None or B <= most:
                return ch
    return _cluster_handle(handle, S, lds_budget, threads, bits, dev)


def _resident_clusters(ch, S: int, nthreads: int, smem: int):
    """The driver's answer for cluster kernel ``ch``: how many of its clusters of S can be
    resident at once (None: it won't say), asked once per kernel and block size."""
    key = ("max_clusters", nthreads)
    if key not in ch.info:
        ch.info[key] = rtc.max_active_clusters(ch, S, nthreads, smem)
    return ch.info[key]


def _prefetch_clusters(handle, sizes, lds_budget, threads, bits, dev) -> None:
    """Build the cluster kernels of ``sizes`` side by side (NVRTC runs outside the GIL): the plan
    below may try them one after another, each a compile of seconds, on a shape's first call.
    A size that cannot be built is left to the plan, which says why or moves on."""
    todo = [S for S in sizes if S >= 2 and _cluster_key(handle, S, dev) not in _DERIVED_HANDLES]
    if len(todo) < 2:
        return

    def build_one(S):
        try:
            _cluster_handle(handle, S, lds_budget, threads, bits, dev)
        except UserError:
            pass
    threads_ = [threading.Thread(target=build_one, args=(S,), name=f"occtune-cluster-{S}") for S in todo]
    for t in threads_:
        t.start()
    for t in threads_:
        t.join()


def _cluster_plan(handle, B, L, k, scap, nsms, split, cluster, lds_budget, threads, bits, dev):
    """Cluster size for the cluster kernel, or 0 to use the other kernels (see ``topk``).

    Automatic (cluster=None, split=None): on sm_90+ where a cluster covers the whole one-wave
    split and a block's kept values are expected to fit its stage, with S lowered until the
    driver says every row's cluster is resident at once; 0 wherever that fails (including a
    cluster kernel that cannot be built with this lds_budget). cluster=True: S = split (2..16), or the
    automatic S without the fit rule; an error where no cluster can be used. A given split with
    cluster unset keeps the split kernel.
    """
    if cluster is False or (cluster is None and split is not None):
        return 0
    if cluster and split is not None and int(split) < 2:
        raise UserError(f"cluster=True needs split >= 2 (or split unset), got split={split}")
    if not hopper_or_later(getattr(handle, "arch", None)):   # thread-block clusters
        if cluster:
            raise UserError(f"cluster=True needs a CUDA device of sm_90 or later (thread-block "
                            f"clusters); this one is {handle.arch}: leave cluster unset")
        return 0
    nthreads = int(handle.defines.get("TOPK_THREADS", threads))
    smem = int(handle.defines.get("SGL_TOPK_DYNAMIC_SMEM_BYTES", lds_budget))
    if split is not None:
        return min(split_plan(B, L, scap, nsms, split), MAX_CLUSTER)
    # blocks/SM: the driver's answer for the main kernel (same threads and budget; asked once
    # per kernel); the resident-cluster query below checks the cluster kernel itself
    per_sm = handle.info.get("blocks_per_sm")
    if per_sm is None:
        per_sm = handle.info["blocks_per_sm"] = rtc.occupancy_query(handle, nthreads, smem) or 1
    full = split_plan(B, L, scap, nsms, None, per_sm)
    # Automatic: only where a cluster covers the whole one-wave split (few rows want more
    # blocks than a cluster holds: the split kernel's wider split is faster there, e.g. (1, 1M)
    # on the H200: 35.6 us with 64 blocks vs 44.8 us with a cluster of 8).
    if not cluster and full > AUTO_CLUSTER:
        return 0
    S = min(full, MAX_CLUSTER if cluster else AUTO_CLUSTER)
    if B * S > nsms * per_sm // 2:    # the driver may well refuse S: build the next sizes alongside
        _prefetch_clusters(handle, [s for s in range(S, max(1, S - PREFETCH_CLUSTERS), -1)
                                    if cluster or cluster_fits(L, k, smem, s)], lds_budget, threads, bits, dev)
    while S >= 2:                                       # every cluster resident at once (one wave)
        if not cluster and not cluster_fits(L, k, smem, S):
            return 0                                    # (a smaller S keeps more per block)
        try:
            ch = _cluster_handle(handle, S, lds_budget, threads, bits, dev)
        except UserError:
            if cluster:
                raise
            return 0      # e.g. budget + the cluster kernel's static shared memory too large
        most = _resident_clusters(ch, S, nthreads, smem)
        rtc.log_compile(f"topk plan: B={B} L={L} {smem} B: cluster {S} {'kept' if most is None or B <= most else 'refused'}"
                        f" (at most {most} resident)")
        if most is None or B <= most:
            return S
        S -= 1
    if cluster:
        raise UserError(f"cluster=True: no cluster size from 2 to {MAX_CLUSTER} keeps all {B} rows "
                        "resident at once here; pass split=S to force one, or leave cluster unset")
    return 0


def _check_args(scores, k, lengths, row_starts):
    import torch

    if not isinstance(scores, torch.Tensor) or scores.dim() != 2 or scores.dtype != torch.float32:
        raise UserError("scores must be a float32 tensor of shape [B, L]")
    if not scores.is_cuda:
        raise UserError("scores must be on a CUDA/ROCm device (the reference runs on the CPU)")
    if scores.stride(1) != 1:
        raise UserError("scores rows must be contiguous (stride 1 along L)")
    if not 1 <= int(k) <= MAX_K:
        raise UserError(f"k must be between 1 and {MAX_K}, got {k}")
    if lengths is None and row_starts is None:
        return
    B = scores.shape[0]
    for name, t in (("lengths", lengths), ("row_starts", row_starts)):
        if t is not None and (t.dtype != torch.int32 or t.shape != (B,) or t.device != scores.device):
            raise UserError(f"{name} must be int32 of shape [{B}] on {scores.device}")
    if row_starts is not None and lengths is None:
        raise UserError("row_starts needs lengths (each row's valid length from its start)")


def _out_ptr(out, plan, reads: tuple) -> int:
    """The pointer of ``out=``, after checking that it is what the plan would allocate (int32
    [B, k] on the scores' device), contiguous, and shares no byte with what the kernel reads
    while it writes out: ``reads``, (name, tensor or None) pairs."""
    import torch

    like = plan.out_like
    if not (isinstance(out, torch.Tensor) and out.dtype == torch.int32 and out.shape == like.shape
            and out.is_contiguous() and out.device == plan.device):
        raise UserError(f"out must be a contiguous int32 tensor of shape {list(like.shape)} on {plan.device}")
    optr = out.data_ptr()
    oend = optr + 4 * out.numel()
    for name, t in reads:
        if t is None or not t.numel() or optr == oend:
            continue
        p = t.data_ptr()            # t's bytes: from p to its last element's end
        if optr < p + t.element_size() * (1 + sum((n - 1) * st for n, st in zip(t.shape, t.stride()))) and p < oend:
            raise UserError(f"out must not overlap {name} (the kernel reads them while it writes out)")
    return optr


def topk(scores, k: int = 2048, lengths=None, row_starts=None, *, lds_budget: int | None = None,
         threads: int | None = None, bits: int | None = None, page_table=None, page_bits: int = 0, offsets=None,
         return_diagnostics: bool = False, kernel=None, prefix_min_row: int = PREFIX_MIN_ROW,
         split=None, split_kernel=None, cluster=None, out=None):
    """Top-k indices of each row; see the module docstring. With ``row_starts`` the caller
    guarantees ``row_starts[b] + lengths[b] <= row stride`` (the kernel reads from the start).
    ``split``: blocks per long row for the main pass (None: chosen from B and the SM count; 0/1:
    one block per row), see ``split_plan``. ``cluster``: on sm_90+ a split row is done by one
    thread-block cluster in a single kernel (topk_cluster_kernel); None chooses it with split
    unset where it fits (see ``_cluster_plan``), True insists (at most MAX_CLUSTER blocks per
    row; ``split`` then sets the cluster size), False keeps the split kernel and the list in
    global memory. A row whose kept values crowd into one slice (sorted or strongly
    position-biased scores) overflows that block's shared stage into the row's global scratch
    list (``spilled_rows``); a threshold bin larger than the candidate list is narrowed without
    re-reading the row where the long-row list holds it (``bin_overflow_rows``), by extra passes
    over the row otherwise (``row_pass_rows``). Every such row is counted in the diagnostics
    (``row_flags``: the kernel's per-row TOPK_FLAG_* bits; ``ROW_FLAGS``).

    Serving: the first call for a (kernel, shape, options) builds a ``LaunchPlan`` (kernels,
    grid, block, shared memory, packed arguments); later calls allocate the output (torch's
    caching allocator), re-pack pointers only if one changed, and launch through the driver API
    (``kernel.launcher``: "native", occtune's C launcher, all launches in one call; else
    "cuda-python"/"hip-python"; "torch" is the slow fallback) on torch's current stream. A later
    call without lengths, row starts or a table, whose scores' dtype, device, shape and strides, k
    and options match an earlier one in this thread, also skips the argument checks and the
    tuned-config lookup (``clear_plans`` forgets them). A call makes no host synchronisation and
    no allocation outside torch's allocator, so it can be captured in a CUDA graph
    (torch.cuda.graph) and replayed on new inputs copied into the captured tensors: the
    recommended serving mode (make one eager call first, outside the capture, so that
    compilation and the plan happen there). Not capturable:
    ``return_diagnostics=True`` (it reads the overflow count back); use "lazy".

    ``out``: an int32 [B, k] contiguous tensor on the scores' device that does not overlap them,
    written and returned instead of a new one (a serving loop's own buffer: no allocation, a few
    microseconds of host time less per call).

    ``lds_budget``/``threads``/``bits``
    left unset take the tuned config of this (B, L) on the scores' device (nearest tuned
    workload in ``results/<target>/topk.yaml``; ``$OCCTUNE_RESULTS`` names another results
    folder), else 128 KiB / 512 / 8."""
    import torch

    plan, table = _plan_of(scores, k, lengths, row_starts, lds_budget, threads, bits, page_table, page_bits,
                           offsets, kernel, prefix_min_row, split, split_kernel, cluster)
    d, dp, dev = plan.dummy, plan.dummy_ptr, plan.device
    if out is None:     # [B, k] int32: empty_like takes fewer host microseconds than torch.empty(shape, ...)
        out = torch.empty_like(plan.out_like, memory_format=torch.contiguous_format)
        optr = out.data_ptr()
    else:
        optr = _out_ptr(out, plan, (("scores", scores), ("lengths", lengths), ("row_starts", row_starts),
                                    ("the index table", table)))
    # per row: count(t), then the row's TOPK_FLAG_* bits
    bins = torch.empty_like(plan.sink) if return_diagnostics else plan.sink
    scratch = torch.empty(plan.scratch_numel, dtype=torch.int32, device=dev) if plan.scratch_numel else d
    kept = torch.zeros(plan.kept_numel, dtype=torch.int32, device=dev) if plan.kept_numel else d
    tensors = (scores, d if lengths is None else lengths, d if row_starts is None else row_starts, out,
               d if table is None else table, bins, scratch, kept)
    # the same pointers as tensors (SCORES ... KEPT), without asking the placeholders for theirs
    ptrs = (scores.data_ptr(), dp if lengths is None else lengths.data_ptr(),
            dp if row_starts is None else row_starts.data_ptr(), optr, dp if table is None else table.data_ptr(),
            bins.data_ptr() if return_diagnostics else plan.sink_ptr, scratch.data_ptr() if plan.scratch_numel else dp,
            kept.data_ptr() if plan.kept_numel else dp)
    _launch(plan, tensors, ptrs)
    if not return_diagnostics:
        return out
    counts, flags = bins[:, 0], bins[:, 1]
    if return_diagnostics == "lazy":       # no host sync: the tuner times this call
        return out, {"capacity": plan.capacity, "bin_counts": counts, "row_flags": flags}
    return out, {"overflow_rows": int((counts > plan.capacity).sum().item()), "capacity": plan.capacity,
                 "bin_counts": counts, "row_flags": flags, **flag_counts(flags), "split": plan.nsplit,
                 "cluster": plan.ncluster, "cluster_regs": plan.cluster_regs,
                 "launcher": plan.launches[0][0].launcher if plan.launches else None}


def _launch(plan: LaunchPlan, tensors: tuple, ptrs: tuple) -> None:
    """Bind the call's pointers (``tensors``' ``data_ptr()``; a tuple compare when none changed) and
    launch every kernel on torch's current stream: all in one C call where every kernel has the
    native launcher (``plan.native``). A thread with no (or another device's) CUDA context current
    gets the device's primary context and a second try of the launch that failed."""
    import torch

    plan.bind(ptrs)
    dev = plan.device
    stream = torch._C._cuda_getCurrentRawStream(dev.index) if plan.fast else 0
    first = 0
    if plan.native:
        nat = plan.native_launcher
        failed = nat.launch_all(nat.function, plan.native, stream)
        if failed is None:
            return
        first = failed[0]        # retried below, one launch at a time
    for h, grid, block, smem, pack in plan.launches[first:]:
        try:
            rtc.launch_packed(h, grid, block, smem, pack, stream, tensors)
        except rtc.LaunchError as e:
            if e.code not in rtc.CONTEXT_ERRORS:
                raise
            rtc.make_context_current(dev.index or 0)
            rtc.launch_packed(h, grid, block, smem, pack, stream, tensors)    # fails again: raised


# ---- the launch plan: decided once per (kernel, shape, options), reused by every call ----------

# pointer numbers of a plan's argument packs (LaunchPlan.bind gets the pointers in this order)
SCORES, LENGTHS, STARTS, OUT, TABLE, BINS, SCRATCH, KEPT = range(8)

_PlanKey = namedtuple("_PlanKey", "B L stride k has_len has_starts mode tstride page_bits "
                                  "prefix_min_row split cluster lds_budget threads bits")


@dataclass
class LaunchPlan:
    """What ``topk`` decides per (kernel, shape, options), decided on the first call: the
    kernels it launches as (handle, grid, block, dynamic shared memory, ArgPack), the split and
    cluster choice, and the sizes of the buffers each call allocates (0: none; the placeholder
    ``dummy`` is passed). ``bind`` re-packs the pointers only when one changed (``repacks``)."""

    launches: list
    nsplit: int
    ncluster: int
    scratch_numel: int
    kept_numel: int
    capacity: int
    dummy: Any                # 1 int: the pointer of an absent tensor (its flag is 0: never read)
    sink: Any                 # [B, 2] bin counts and row flags of calls without diagnostics (never read)
    fast: bool = False        # every launch goes through a driver API (needs the raw stream)
    keep: tuple = ()          # the kernels of the key (their ids key the plan: kept alive)
    device: Any = None        # the scores' device
    out_like: Any = None      # dummy expanded to the output's [B, k]: what the output is allocated like
    dummy_ptr: int = 0        # dummy.data_ptr(), sink.data_ptr(): asked once
    sink_ptr: int = 0
    ptrs: tuple = ()
    repacks: int = 0
    cluster_regs: int = 0     # the cluster kernel's TOPK_CLUSTER_REGS (0: the sampled path only)
    native: tuple = ()        # every launch as (kernel, grid, block, smem, params) where all are native
    native_launcher: Any = None   # rtc.NativeLauncher of those

    def __post_init__(self):
        if self.launches and all(h.launcher == "native" for h, *_ in self.launches):
            self.native = tuple((h.fn, grid, block, smem, pack.address) for h, grid, block, smem, pack in self.launches)
            self.native_launcher = rtc.native_launcher()

    def bind(self, ptrs: tuple) -> None:
        if ptrs != self.ptrs:
            for launch in self.launches:
                launch[4].bind(ptrs)
            self.ptrs = ptrs
            self.repacks += 1


_TLS = threading.local()      # plans per thread: a plan's packs are rewritten by its calls


def _plans() -> dict:
    plans = getattr(_TLS, "plans", None)
    if plans is None:
        plans = _TLS.plans = {}
    return plans


def _calls() -> dict:
    """This thread's plans by the raw arguments of a plain call (see ``_call_key``)."""
    calls = getattr(_TLS, "calls", None)
    if calls is None:
        calls = _TLS.calls = {}
    return calls


def clear_plans() -> None:
    """Forget this thread's launch plans (the next call of each shape plans again)."""
    _plans().clear()
    _calls().clear()


def _call_key(scores, k, opts: tuple):
    """The raw arguments of a call without lengths, row starts or a transform table, as a key
    (None when ``scores`` is not a tensor): its dtype, device, shape and strides decide what
    ``_check_args`` checks, so a call with a known key is a checked one. An unhashable key (a
    list for k) is found by the lookup (``_known_plan``): hashing it here too cost a second hash
    of every call's key."""
    try:
        return (scores.dtype, scores.device, scores.shape, scores.stride(), k, id(opts[0]), id(opts[1]), *opts[2:])
    except (AttributeError, TypeError):
        return None


def _known_plan(ckey):
    """(plan or None, key): this thread's plan of a call key; an unhashable key gives (None, None)."""
    if ckey is None:
        return None, None
    try:
        return _calls().get(ckey), ckey
    except TypeError:
        return None, None


def _split_choice(handle, split_kernel, dev, r: _PlanKey, scap: int) -> tuple[int, int]:
    """(blocks per row, cluster size or 0) of a plan; see ``topk``'s docstring."""
    import torch

    if not (r.B and scap):
        if r.cluster and r.B:
            raise UserError("cluster=True applies to long rows only (the long-row path is off here: "
                            f"L={r.L} < prefix_min_row={r.prefix_min_row} or < 16k); leave cluster unset")
        return 1, 0
    nsms = _NUM_SMS.get(str(dev))
    if nsms is None:
        nsms = _NUM_SMS[str(dev)] = torch.cuda.get_device_properties(dev).multi_processor_count
    ncluster = _cluster_plan(handle, r.B, r.L, r.k, scap, nsms, r.split, r.cluster, r.lds_budget, r.threads,
                             r.bits, dev)
    if ncluster:
        return ncluster, ncluster
    per_sm = 2
    if r.split is None and r.B < nsms:
        skern = split_kernel if split_kernel is not None else _split_handle(handle, r.lds_budget, r.threads,
                                                                            r.bits, dev)
        per_sm = skern.info.get("blocks_per_sm")     # the driver's answer, asked once per kernel
        if per_sm is None:
            nthreads = int(handle.defines.get("TOPK_THREADS", r.threads))
            per_sm = skern.info["blocks_per_sm"] = rtc.occupancy_query(skern, nthreads, 0) or 2
    return split_plan(r.B, r.L, scap, nsms, r.split, per_sm), 0


def _make_plan(handle, split_kernel, dev, r: _PlanKey) -> LaunchPlan:
    import torch

    from occtune.build.rtc import ArgPack, Ptr

    prefix, scap = long_row_plan(r.L, r.k, r.prefix_min_row)
    nsplit, ncluster = _split_choice(handle, split_kernel, dev, r, scap)
    nthreads = int(handle.defines.get("TOPK_THREADS", r.threads))
    # arguments every kernel takes first (rows), then those of the two that write the output
    row = [Ptr(SCORES), r.stride, r.L, Ptr(LENGTHS), int(r.has_len), Ptr(STARTS), int(r.has_starts), r.k]
    outa = [Ptr(OUT), r.mode, Ptr(TABLE), r.tstride, r.page_bits, Ptr(BINS)]
    launches, scratch_numel, kept_numel = [], 0, 0
    if r.B:
        scratch_numel = r.B * 2 * scap     # the long-row list (cluster: its blocks' spill regions)
    if r.B and ncluster:
        ck = _cluster_kernel(handle, ncluster, r.B, r.L, r.lds_budget, r.threads, r.bits, dev)
        launches.append((ck, r.B * ncluster, nthreads, ck.dynamic_smem,
                         ArgPack([*row, *outa, scap, prefix, Ptr(SCRATCH)])))
    elif r.B:
        if nsplit > 1:
            skern = split_kernel if split_kernel is not None else _split_handle(handle, r.lds_budget, r.threads,
                                                                                r.bits, dev)
            kept_numel = r.B * split_record_ints(handle.defines.get("TOPK_COARSE_BITS", r.bits))
            launches.append((skern, r.B * nsplit, nthreads, skern.dynamic_smem,
                             ArgPack([*row, Ptr(SCRATCH), scap, prefix, Ptr(KEPT), nsplit])))
        launches.append((handle, r.B, nthreads, handle.dynamic_smem,
                         ArgPack([*row, *outa, Ptr(SCRATCH), scap, prefix, Ptr(KEPT), int(nsplit > 1)])))
    cap = candidate_entries(int(handle.defines.get("SGL_TOPK_DYNAMIC_SMEM_BYTES", r.lds_budget)))
    dummy = torch.empty(1, dtype=torch.int32, device=dev)
    sink = torch.empty((r.B, 2), dtype=torch.int32, device=dev)
    fast = bool(launches) and all(h.launcher != "torch" for h, *_ in launches)
    regs = int(launches[0][0].defines.get("TOPK_CLUSTER_REGS", 0)) if ncluster and launches else 0
    return LaunchPlan(launches, nsplit, ncluster, scratch_numel, kept_numel, cap, dummy, sink, fast,
                      keep=(handle, split_kernel), device=dev, cluster_regs=regs,
                      dummy_ptr=dummy.data_ptr(), sink_ptr=sink.data_ptr(), out_like=dummy.expand(r.B, int(r.k)))


def plan_for(scores, k: int = 2048, lengths=None, row_starts=None, *, lds_budget: int | None = None,
             threads: int | None = None, bits: int | None = None, page_table=None, page_bits: int = 0, offsets=None,
             kernel=None, prefix_min_row: int = PREFIX_MIN_ROW, split=None, split_kernel=None,
             cluster=None) -> LaunchPlan:
    """The plan ``topk`` uses for these arguments (built now if there is none yet): its launches,
    split and cluster choice; for tests, benchmarks and diagnostics. Launches nothing."""
    return _plan_of(scores, k, lengths, row_starts, lds_budget, threads, bits, page_table, page_bits, offsets,
                    kernel, prefix_min_row, split, split_kernel, cluster)[0]


def _plan_of(scores, k, lengths, row_starts, lds_budget, threads, bits, page_table, page_bits, offsets, kernel,
             prefix_min_row, split, split_kernel, cluster):
    """(plan, transform table or None) of one call, after checking its arguments. A plain call
    (no lengths, row starts or table) whose raw arguments were seen before takes its plan from
    ``_calls()`` without re-checking them: the serving path's host time."""
    plain = lengths is None and row_starts is None and page_table is None and offsets is None
    ckey = _call_key(scores, k, (kernel, split_kernel, page_bits, prefix_min_row, split, cluster, lds_budget,
                                 threads, bits)) if plain else None
    plan, ckey = _known_plan(ckey)
    if plan is not None:
        return plan, None
    _check_args(scores, k, lengths, row_starts)
    if None in (lds_budget, threads, bits):          # unset: this workload's tuned config, else the default
        tuned = _tuned(*scores.shape, k, scores.device) if kernel is None else {}
        lds_budget, threads, bits = (tuned.get(name, d) if v is None else v for v, name, d in (
            (lds_budget, "lds_budget", DEFAULT_BUDGET), (threads, "threads", 512), (bits, "bits", 8)))
    B, L = scores.shape
    dev = scores.device
    handle = kernel if kernel is not None else build(lds_budget, threads, bits, dev)
    mode, table, tstride = (0, None, 0) if page_table is None and offsets is None else \
        _table_args(page_table, page_bits, offsets, B, L)
    key = (id(handle), id(split_kernel), dev, B, L, scores.stride(0), k, lengths is not None,
           row_starts is not None, mode, tstride, page_bits, prefix_min_row, split, cluster, lds_budget,
           threads, bits)
    plans = _plans()
    plan = plans.get(key)
    if plan is None:
        plan = plans[key] = _make_plan(handle, split_kernel, dev, _PlanKey(*key[3:]))
    if ckey is not None:
        _calls()[ckey] = plan
    return plan, table


def _table_args(page_table, page_bits, offsets, B, L):
    """(mode, table, table stride) of the index transform (0: none, 1: page table, 2: offsets)."""
    import torch

    if page_table is not None and offsets is not None:
        raise UserError("give either page_table or offsets, not both")
    if page_table is not None:
        if page_table.dtype != torch.int32 or page_table.dim() != 2 or page_table.shape[0] != B:
            raise UserError(f"page_table must be int32 [B={B}, pages]")
        if not 0 <= page_bits <= 20:
            raise UserError(f"page_bits must be between 0 and 20, got {page_bits}")
        if page_table.shape[1] << page_bits < L:
            raise UserError(f"page_table covers {page_table.shape[1] << page_bits} positions, rows have {L}")
        table = page_table.contiguous()
        return 1, table, int(table.stride(0))
    if offsets is not None:
        if offsets.dtype != torch.int32 or offsets.shape != (B,):
            raise UserError(f"offsets must be int32 [B={B}]")
        return 2, offsets.contiguous(), 0
    return 0, None, 0
