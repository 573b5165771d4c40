"""The top-k runtime: kernel sources and builds, launch plans, and the call.

``occtune.kernels.topk`` re-exports the public names; the pure sizing policy is ``policy.py``, the
options bundle ``options.py``. State kept here, per process: built kernels (``build``, the derived
split/cluster/resident builds), the driver's SM and occupancy answers, and each thread's launch
plans (``clear_plans``). Tests that replace a private piece patch it here (``runtime._X``).
"""

from __future__ import annotations

import functools
import re
import sys
import threading
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, NamedTuple

from occtune.build import rtc
from occtune.errors import UserError
from occtune.kernels.topk import policy
from occtune.kernels.topk.capacity import candidate_entries
from occtune.kernels.topk.options import TopkOptions, options_of
from occtune.kernels.topk.policy import (AUTO_CLUSTER, CLUSTER_TWO_LEVEL, MAX_CLUSTER, PORTABLE_CLUSTER,  # noqa: F401
                                         PREFIX_MIN_ROW, SPLIT_MIN_SLICE, ResidentPlan, cluster_fits,
                                         long_row_plan, split_plan, split_record_ints)
from occtune.model.targets import hopper_or_later
from occtune.outputs.tuned import tuned_config
from occtune.validate import SIZE, Rule

SOURCE_PATH = Path(__file__).with_name("topk.cuh")
# the default runs' compiled resources and tie bound on every target (tools/precompute.py topk)
PRECOMPUTED = Path(__file__).with_name("precomputed.json")
KERNEL_NAME = "topk_transform_kernel"
SPLIT_KERNEL_NAME = "topk_split_keep_kernel"
CLUSTER_KERNEL_NAME = "topk_cluster_kernel"
RESIDENT_KERNEL_NAME = "topk_resident_kernel"
CLUSTER_REGS_VALUES = policy.CLUSTER_REGS_VALUES   # the register path's slice (a benchmark may lower it)
PREFETCH_CLUSTERS = 3                 # cluster sizes built side by side where the first may not fit
DEFAULT_BUDGET = 128 * 1024          # the untuned default of the original kernel
MAX_K = 2048
# What the kernel accepts (checked by ``defines``, by the profile and by the CLI options).
BITS_RULE = Rule(int, choices=(8, 12))                    # coarse-key width
THREADS_RULE = Rule(int, min=64, max=1024, multiple=64)   # threads per block
BUDGET_RULE = Rule(SIZE, min=64, multiple=8)              # dynamic LDS bytes
K_RULE = Rule(int, min=1, max=MAX_K)                      # top-k size
_BUDGET_BYTES = replace(BUDGET_RULE, kind=int)            # a config's budget: bytes, not "40K"
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


_PART = re.compile(r'^#include "(topk_\w+\.cuh)"[ \t]*\n', re.M)


def read_source() -> str:
    """topk.cuh with its parts (``#include "topk_*.cuh"`` beside it) inlined: one text for the
    runtime compilers, which know no include path, and for the build caches' source hash."""
    text = SOURCE_PATH.read_text(encoding="utf-8")
    return _PART.sub(lambda m: SOURCE_PATH.with_name(m.group(1)).read_text(encoding="utf-8"), text)


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


def _cluster_handle(handle, S: int, lds_budget, threads, bits, dev, regs: int = 0, block: int = 0):
    """The cluster kernel with TOPK_CLUSTER=S (same lds_budget), with the register path where
    ``regs`` (TOPK_CLUSTER_REGS: float4 per thread), blocks of ``block`` threads where given (else
    the config's); above PORTABLE_CLUSTER blocks with the non-portable cluster size allowed (a
    UserError where the driver refuses)."""
    smem = int((handle.defines or {}).get("SGL_TOPK_DYNAMIC_SMEM_BYTES", lds_budget))
    extra = {"TOPK_CLUSTER": int(S), **({"TOPK_CLUSTER_REGS": int(regs)} if regs else {}),
             **({"TOPK_THREADS": int(block)} if block else {})}
    h = _derived_handle(handle, CLUSTER_KERNEL_NAME, extra, smem, lds_budget, threads, bits, dev)
    if S > PORTABLE_CLUSTER and not h.info.get("nonportable_cluster"):
        rtc.allow_nonportable_cluster(h)
        h.info["nonportable_cluster"] = True
    return h


def cluster_regs(L: int, S: int, threads: int) -> int:
    """policy.cluster_regs with this module's CLUSTER_REGS_VALUES (0 turns the register path off)."""
    return policy.cluster_regs(L, S, threads, CLUSTER_REGS_VALUES)


def _resident_handle(handle, lds_budget, threads, bits, dev):
    """The resident kernel (TOPK_RESIDENT, same config; its dynamic LDS is the budget: the slice)."""
    smem = int((handle.defines or {}).get("SGL_TOPK_DYNAMIC_SMEM_BYTES", lds_budget))
    return _derived_handle(handle, RESIDENT_KERNEL_NAME, {"TOPK_RESIDENT": 1}, smem, lds_budget, threads, bits, dev)


def _blocks_per_sm(h, nthreads: int, smem: int, fallback: int) -> int:
    """The driver's resident blocks per SM for kernel ``h`` (asked once per kernel and block size)."""
    key = ("blocks_per_sm", nthreads)
    if key not in h.info:
        h.info[key] = rtc.occupancy_query(h, nthreads, smem) or fallback
    return h.info[key]


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
        if t is not None and (t.dtype != torch.int32 or t.shape != (B,) or t.device != scores.device
                              or not t.is_contiguous()):
            raise UserError(f"{name} must be contiguous int32 of shape [{B}] on {scores.device}")
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


def topk(scores, k: int = 2048, lengths=None, row_starts=None, *, options: TopkOptions | None = None,
         page_table=None, offsets=None, out=None, return_diagnostics=False, kernel=None, split_kernel=None,
         **config):
    """Top-k indices of each row; see the module docstring. With ``row_starts`` the caller
    guarantees ``row_starts[b] + lengths[b] <= row stride`` (the kernel reads from the start).

    Options (``options=TopkOptions(...)``, or its fields as keywords: ``lds_budget``, ``threads``,
    ``bits``, ``page_bits``, ``prefix_min_row``, ``split``, ``cluster``, ``resident``; see
    ``options.py``). The path (``occtune.kernels.topk.policy``):
    - ``resident``: rows that fit on chip are read once into the blocks' LDS (the budget is the
      slice each block keeps): one block a row where a row fits one budget, else several blocks a
      row that merge their histograms in a workspace of the plan (one wave; the call allocates
      nothing for it). None chooses it wherever it fits with ``split`` and ``cluster`` unset (one
      block a row only where rows are 16-byte aligned: a row stride of a multiple of 4, no
      ``row_starts``); False turns it off; True insists; an int forces that many blocks a row.
    - ``split``: blocks per long row for the main pass (None: chosen from B and the SM count; 0/1:
      one block per row), see ``split_plan``. ``cluster``: on sm_90+ a split row is done by one
      thread-block cluster in a single kernel (topk_cluster_kernel); None chooses it with split
      unset where it fits (see ``_cluster_plan``), True insists (at most MAX_CLUSTER blocks per
      row; ``split`` then sets the cluster size), False keeps the split kernel and the list in
      global memory.
    - short rows (``policy.short_cluster``: 4K-64K values, few rows, 16-byte aligned, sm_90+): one
      cluster of 4-16 blocks a row, each block's slice in its threads' registers (the cluster
      kernel's register path; blocks of 256-512 threads whatever ``threads`` says), where split,
      cluster and resident are unset; cluster=True asks for it (``split`` sets the cluster size).
    A row whose kept values crowd into one slice (sorted or strongly position-biased scores)
    overflows that block's shared stage into the row's global scratch list (``spilled_rows``); a
    threshold bin larger than the candidate list is narrowed without re-reading the row where the
    long-row list or the LDS holds it (``bin_overflow_rows``), by extra passes over the row
    otherwise (``row_pass_rows``). Every such row is counted in the diagnostics (``row_flags``: the
    kernel's per-row TOPK_FLAG_* bits; ``ROW_FLAGS``).

    Serving: the first call for a (kernel, shape, options) builds a ``LaunchPlan`` (kernels,
    grid, block, shared memory, packed arguments); later calls allocate the output (torch's
    caching allocator), re-pack pointers only if one changed, and launch through the driver API
    (``kernel.launcher``: "native", occtune's C launcher, all launches in one call; else
    "cuda-python"/"hip-python"; "torch" is the slow fallback) on torch's current stream. A later
    call without lengths, row starts or a table, whose scores' dtype, device, shape and strides, k
    and options match an earlier one in this thread, also skips the argument checks and the
    tuned-config lookup (``clear_plans`` forgets them). The workspaces that the split and
    resident paths need are the plan's, one per stream, zeroed once and left zeroed by each call
    (calls of one plan on one stream run in order; a call being captured in a CUDA graph gets its
    own). A call makes no host synchronisation and no allocation outside torch's allocator, so it
    can be captured in a CUDA graph (torch.cuda.graph) and replayed on new inputs copied into the
    captured tensors: the recommended serving mode (make one eager call first, outside the
    capture, so that compilation and the plan happen there). Not capturable:
    ``return_diagnostics=True`` (it reads the overflow count back); use "lazy".

    ``out``: an int32 [B, k] contiguous tensor on the scores' device that does not overlap them,
    written and returned instead of a new one (a serving loop's own buffer: no allocation, a few
    microseconds of host time less per call).

    ``lds_budget``/``threads``/``bits`` left unset take the tuned config of this (B, L) on the
    scores' device (nearest tuned workload in ``results/<target>/topk.yaml``; ``$OCCTUNE_RESULTS``
    names another results folder), else 128 KiB / 512 / 8."""
    import torch

    plan, table = _plan_of(scores, k, lengths, row_starts, options, config, page_table, offsets, kernel,
                           split_kernel)
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
    ws = plan.workspace() if plan.ws_numel else d
    tensors = (scores, d if lengths is None else lengths, d if row_starts is None else row_starts, out,
               d if table is None else table, bins, scratch, ws)
    # the same pointers as tensors (SCORES ... WS), without asking the placeholders for theirs
    ptrs = (scores.data_ptr(), dp if lengths is None else lengths.data_ptr(),
            dp if row_starts is None else row_starts.data_ptr(), optr, dp if table is None else table.data_ptr(),
            bins.data_ptr() if return_diagnostics else plan.sink_ptr, scratch.data_ptr() if plan.scratch_numel else dp,
            ws.data_ptr() if plan.ws_numel else dp)
    _launch(plan, tensors, ptrs)
    if not return_diagnostics:
        return out
    counts, flags = bins[:, 0], bins[:, 1]
    if return_diagnostics == "lazy":       # no host sync: the tuner times this call
        return out, {"capacity": plan.capacity, "bin_counts": counts, "row_flags": flags}
    return out, {"overflow_rows": int((counts > plan.capacity).sum().item()), "capacity": plan.capacity,
                 "bin_counts": counts, "row_flags": flags, **flag_counts(flags), "split": plan.nsplit,
                 "cluster": plan.ncluster, "cluster_regs": plan.cluster_regs, "resident": plan.nresident,
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

# pointer numbers of a plan's argument packs (LaunchPlan.bind gets the pointers in this order);
# WS: the plan's zeroed workspace (split records, or the resident kernel's row workspaces)
SCORES, LENGTHS, STARTS, OUT, TABLE, BINS, SCRATCH, WS = range(8)


class _Shape(NamedTuple):
    """The shape side of a plan's key (the options are the other)."""

    B: int
    L: int
    stride: int
    k: int
    has_len: bool
    has_starts: bool
    mode: int
    tstride: int


@dataclass
class LaunchPlan:
    """What ``topk`` decides per (kernel, shape, options), decided on the first call: the
    kernels it launches as (handle, grid, block, dynamic shared memory, ArgPack), the path, and
    the sizes of the buffers each call allocates (0: none; the placeholder ``dummy`` is passed).
    ``bind`` re-packs the pointers only when one changed (``repacks``). ``ws_numel`` ints of
    workspace that must be zero at a call's start (every call leaves it so): one per stream
    (``workspace``)."""

    launches: list
    nsplit: int
    ncluster: int
    scratch_numel: int
    ws_numel: int
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
    nresident: int = 0        # the resident kernel's blocks a row (0: not resident)
    native: tuple = ()        # every launch as (kernel, grid, block, smem, params) where all are native
    native_launcher: Any = None   # rtc.NativeLauncher of those
    ws_by_stream: dict = field(default_factory=dict)

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

    def workspace(self):
        """The zeroed workspace of a call on torch's current stream: the stream's own (made and
        zeroed on it once; each call leaves it zeroed), or, while the stream is being captured in
        a CUDA graph, one zeroed in the capture (each graph its own)."""
        import torch

        try:
            capturing = torch.cuda.is_current_stream_capturing()
        except RuntimeError:      # a torch without CUDA (the CPU tests' fake device)
            capturing = False
        if capturing:
            return torch.zeros(self.ws_numel, dtype=torch.int32, device=self.device)
        get = getattr(torch._C, "_cuda_getCurrentRawStream", None)     # None: a torch without CUDA
        stream = get(self.device.index) if get is not None else 0
        ws = self.ws_by_stream.get(stream)
        if ws is None:
            ws = self.ws_by_stream[stream] = torch.zeros(self.ws_numel, dtype=torch.int32, device=self.device)
        return ws


NATIVE_FORMAT = 2          # the layout of native_description (op_native.cpp's FORMAT)


def native_description(plan: LaunchPlan) -> list[int]:
    """``plan`` as op_native.cpp's C++ kernel of ``torch.ops.occtune.topk`` launches it: FORMAT, rows,
    k, workspace ints, scratch ints, then its launches as ``occtune/build/plan_launch.h`` reads them
    (their number; per launch the driver function, grid x, y, z, block, dynamic shared bytes,
    parameter count and each parameter as (0, a 32-bit int) or (1, pointer number: SCORES ... WS)).
    ``[]`` where a launch has no driver-API handle of the native launcher (then Python runs every
    call of the plan)."""
    if not plan.native:
        return []
    B, k = plan.out_like.shape
    d = [NATIVE_FORMAT, int(B), int(k), plan.ws_numel, plan.scratch_numel, len(plan.launches)]
    for h, grid, block, smem, pack in plan.launches:
        d += [int(h.fn), int(grid), 1, 1, int(block), int(smem), len(pack.template)]
        for t in pack.template:
            d += [1, t.index] if isinstance(t, rtc.Ptr) else [0, int(t)]
    return d


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
    """Forget this thread's launch plans (the next call of each shape plans again), and those of
    ``torch.ops.occtune.topk``'s C++ kernel (op.py) where it is loaded."""
    _plans().clear()
    _calls().clear()
    op = sys.modules.get("occtune.kernels.topk.op")
    if op is not None and op.native_error() is None:
        import torch

        torch.ops.occtune._topk_native_clear()


def _call_key(scores, k, ids: tuple, options, config: dict):
    """The raw arguments of a call without lengths, row starts or a transform table, as a key
    (None when ``scores`` is not a tensor): its dtype, device, shape and strides decide what
    ``_check_args`` checks, so a call with a known key is a checked one. An unhashable key (a
    list for k) is found by the lookup (``_known_plan``): hashing it here too cost a second hash
    of every call's key."""
    try:
        return (scores.dtype, scores.device, scores.shape, scores.stride(), k, *ids, options,
                *config.items())
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


def _num_sms(dev) -> int:
    import torch

    n = _NUM_SMS.get(str(dev))
    if n is None:
        n = _NUM_SMS[str(dev)] = torch.cuda.get_device_properties(dev).multi_processor_count
    return n


def _resident_choice(handle, dev, r: _Shape, o: TopkOptions) -> ResidentPlan | None:
    """The resident layout of a plan, or None for the other paths (see ``topk``'s docstring).
    Automatic only with split and cluster unset, rows longer than k, and, for rows over several
    blocks, every block of the launch resident at once (the driver's blocks per SM)."""
    if o.resident is False or not r.B or (o.resident is None and (o.split is not None or o.cluster is not None)):
        return None
    nthreads = int(handle.defines.get("TOPK_THREADS", o.threads))
    smem = int(handle.defines.get("SGL_TOPK_DYNAMIC_SMEM_BYTES", o.lds_budget))
    bits = int(handle.defines.get("TOPK_COARSE_BITS", o.bits))
    nsms = _num_sms(dev)
    forced = o.resident is not None and o.resident is not True
    if forced:
        parts = int(o.resident)
    else:
        if o.resident is None and r.L <= r.k:
            return None
        aligned = r.stride % 4 == 0 and not r.has_starts        # the one-block load's 16-byte reads
        parts = policy.resident_parts(r.B, r.L, smem, nsms, one_block=o.resident is True or aligned)
        if not parts:
            if o.resident:
                raise UserError(f"resident=True: a row of {r.L} scores needs more than {policy.RES_MAX_PARTS} "
                                f"blocks of {smem} B; pass resident=N blocks, a larger budget, or leave it unset")
            return None
    plan = policy.resident_plan(r.B, r.L, bits, smem, parts)
    if plan.parts > 1:
        upper = min(policy.MAX_THREADS_PER_SM // nthreads, 32)
        if not forced and not policy.resident_one_wave(r.B, plan.parts, nsms, upper):
            return None        # cannot be one wave whatever the driver says: nothing built
        if o.resident is None and _cluster_first(handle, dev, r, o, nsms):
            return None
        rk = _resident_handle(handle, o.lds_budget, o.threads, o.bits, dev)
        if not policy.resident_one_wave(r.B, plan.parts, nsms, _blocks_per_sm(rk, nthreads, smem, 1)):
            if o.resident is not None:
                raise UserError(f"resident: {r.B} rows x {plan.parts} blocks are not resident at once on this "
                                "device (its blocks wait for each other); use fewer blocks a row, or leave resident unset")
            return None
    return plan


def _cluster_first(handle, dev, r: _Shape, o: TopkOptions, nsms: int) -> bool:
    """Whether the automatic plan keeps a spread row on the cluster kernel instead: wherever that
    kernel takes the row (sm_90+, a long row, one cluster covering its one-wave split). On the H200
    (benchmarks/records/topk_decode/r1) the cluster's register path took (8, 128K) in 17.7 us, the
    resident kernel's 16 blocks a row 22.2-22.6; where no cluster covers a row, the resident
    kernel won: (1, 1M) 22.4 us against the split kernel's 26.0."""
    scap = long_row_plan(r.L, r.k, o.prefix_min_row)[1]
    return bool(scap) and bool(_cluster_plan(handle, r.B, r.L, r.k, scap, nsms, None, None, o.lds_budget,
                                             o.threads, o.bits, dev))


def _short_cluster_choice(handle, dev, r: _Shape, o: TopkOptions) -> policy.ShortCluster | None:
    """The short-row cluster path's layout (``policy.short_cluster``), or None for the other paths:
    automatic with split, cluster and resident unset, or asked for with cluster=True (split: the
    cluster size); sm_90+ (thread-block clusters), rows that are not long, 16-byte aligned (no row
    starts, a row stride of whole float4: the register path's loads)."""
    if o.resident is not None or o.cluster is False or (o.cluster is None and o.split is not None) or not r.B:
        return None
    if long_row_plan(r.L, r.k, o.prefix_min_row)[1] or not hopper_or_later(getattr(handle, "arch", None)):
        return None
    if r.stride % 4 or r.has_starts:
        return None
    size = int(o.split) if o.cluster and o.split is not None else None
    return policy.short_cluster(r.B, r.L, r.k, _num_sms(dev), size)


def _split_choice(handle, split_kernel, dev, r: _Shape, o: TopkOptions, scap: int) -> tuple[int, int]:
    """(blocks per row, cluster size or 0) of a plan; see ``topk``'s docstring."""
    if not (r.B and scap):
        if o.cluster and r.B:
            raise UserError("cluster=True applies to long rows (here the long-row path is off: "
                            f"L={r.L} < prefix_min_row={o.prefix_min_row} or < 16k) and, on sm_90+, to 16-byte "
                            f"aligned rows of {policy.SHORT_MIN_ROW}-{policy.SHORT_MAX_ROW} values; leave cluster unset")
        return 1, 0
    nsms = _num_sms(dev)
    ncluster = _cluster_plan(handle, r.B, r.L, r.k, scap, nsms, o.split, o.cluster, o.lds_budget, o.threads,
                             o.bits, dev)
    if ncluster:
        return ncluster, ncluster
    per_sm = 2
    if o.split is None and r.B < nsms:
        skern = split_kernel if split_kernel is not None else _split_handle(handle, o.lds_budget, o.threads,
                                                                            o.bits, dev)
        nthreads = int(handle.defines.get("TOPK_THREADS", o.threads))
        per_sm = _blocks_per_sm(skern, nthreads, 0, 2)    # the driver's answer, asked once per kernel
    return split_plan(r.B, r.L, scap, nsms, o.split, per_sm), 0


def _launches(handle, split_kernel, dev, r: _Shape, o: TopkOptions):
    """(launches, nsplit, ncluster, scratch ints, workspace ints, capacity, resident blocks a row)."""
    from occtune.build.rtc import ArgPack, Ptr

    nthreads = int(handle.defines.get("TOPK_THREADS", o.threads))
    smem = int(handle.defines.get("SGL_TOPK_DYNAMIC_SMEM_BYTES", o.lds_budget))
    # arguments every kernel takes first (rows), then those of the kernels that write the output
    row = [Ptr(SCORES), r.stride, r.L, Ptr(LENGTHS), int(r.has_len), Ptr(STARTS), int(r.has_starts), r.k]
    outa = [Ptr(OUT), r.mode, Ptr(TABLE), r.tstride, o.page_bits, Ptr(BINS)]
    sc = _short_cluster_choice(handle, dev, r, o)
    if sc is not None:
        ck = _cluster_handle(handle, sc.size, o.lds_budget, o.threads, o.bits, dev, sc.regs, sc.threads)
        pack = ArgPack([*row, *outa, 0, 0, Ptr(SCRATCH)])      # no long-row pass: no scratch list
        return [(ck, r.B * sc.size, sc.threads, ck.dynamic_smem, pack)], sc.size, sc.size, 0, 0, \
            candidate_entries(smem), 0
    res = _resident_choice(handle, dev, r, o)
    if res is not None:
        rk = _resident_handle(handle, o.lds_budget, o.threads, o.bits, dev)
        pack = ArgPack([*row, *outa, res.parts, res.cap, res.cand_off, Ptr(WS), res.ws_row])
        return [(rk, r.B * res.parts, nthreads, rk.dynamic_smem, pack)], 1, 0, 0, r.B * res.ws_row, res.cap, res.parts
    prefix, scap = long_row_plan(r.L, r.k, o.prefix_min_row)
    nsplit, ncluster = _split_choice(handle, split_kernel, dev, r, o, scap)
    cap = candidate_entries(smem)
    if not r.B:
        return [], nsplit, ncluster, 0, 0, cap, 0
    scratch = r.B * 2 * scap           # the long-row list (cluster: its blocks' spill regions)
    if ncluster:
        ck = _cluster_kernel(handle, ncluster, r.B, r.L, o.lds_budget, o.threads, o.bits, dev)
        return [(ck, r.B * ncluster, nthreads, ck.dynamic_smem, ArgPack([*row, *outa, scap, prefix, Ptr(SCRATCH)]))], \
            nsplit, ncluster, scratch, 0, cap, 0
    launches, ws = [], 0
    if nsplit > 1:
        skern = split_kernel if split_kernel is not None else _split_handle(handle, o.lds_budget, o.threads, o.bits, dev)
        ws = r.B * split_record_ints(handle.defines.get("TOPK_COARSE_BITS", o.bits))
        launches.append((skern, r.B * nsplit, nthreads, skern.dynamic_smem,
                         ArgPack([*row, Ptr(SCRATCH), scap, prefix, Ptr(WS), nsplit])))
    launches.append((handle, r.B, nthreads, handle.dynamic_smem,
                     ArgPack([*row, *outa, Ptr(SCRATCH), scap, prefix, Ptr(WS), int(nsplit > 1)])))
    return launches, nsplit, ncluster, scratch, ws, cap, 0


def _make_plan(handle, split_kernel, dev, r: _Shape, o: TopkOptions) -> LaunchPlan:
    import torch

    launches, nsplit, ncluster, scratch, ws, cap, nres = _launches(handle, split_kernel, dev, r, o)
    dummy = torch.empty(1, dtype=torch.int32, device=dev)
    sink = torch.empty((r.B, 2), dtype=torch.int32, device=dev)
    fast = bool(launches) and all(h.launcher != "torch" for h, *_ in launches)
    regs = int(launches[0][0].defines.get("TOPK_CLUSTER_REGS", 0)) if ncluster and launches else 0
    return LaunchPlan(launches, nsplit, ncluster, scratch, ws, cap, dummy, sink, fast,
                      keep=(handle, split_kernel), device=dev, cluster_regs=regs, nresident=nres,
                      dummy_ptr=dummy.data_ptr(), sink_ptr=sink.data_ptr(), out_like=dummy.expand(r.B, int(r.k)))


def plan_for(scores, k: int = 2048, lengths=None, row_starts=None, *, options: TopkOptions | None = None,
             page_table=None, offsets=None, kernel=None, split_kernel=None, **config) -> LaunchPlan:
    """The plan ``topk`` uses for these arguments (built now if there is none yet): its launches,
    path and buffers; for tests, benchmarks and diagnostics. Launches nothing."""
    return _plan_of(scores, k, lengths, row_starts, options, config, page_table, offsets, kernel, split_kernel)[0]


def _plan_of(scores, k, lengths, row_starts, options, config, page_table, offsets, kernel, split_kernel):
    """(plan, transform table or None) of one call, after checking its arguments. A plain call
    (no lengths, row starts or table) whose raw arguments were seen before takes its plan from
    ``_calls()`` without re-checking them: the serving path's host time."""
    plain = lengths is None and row_starts is None and page_table is None and offsets is None
    ckey = _call_key(scores, k, (id(kernel), id(split_kernel)), options, config) if plain else None
    plan, ckey = _known_plan(ckey)
    if plan is not None:
        return plan, None
    o = options_of(options, config)
    _check_args(scores, k, lengths, row_starts)
    if None in (o.lds_budget, o.threads, o.bits):      # unset: this workload's tuned config, else the default
        tuned = _tuned(*scores.shape, k, scores.device) if kernel is None else {}
        o = o.with_config(*(tuned.get(name, d) if v is None else v for v, name, d in (
            (o.lds_budget, "lds_budget", DEFAULT_BUDGET), (o.threads, "threads", 512), (o.bits, "bits", 8))))
    B, L = scores.shape
    dev = scores.device
    handle = kernel if kernel is not None else build(o.lds_budget, o.threads, o.bits, dev)
    mode, table, tstride = (0, None, 0) if page_table is None and offsets is None else \
        _table_args(page_table, o.page_bits, offsets, B, L)
    shape = _Shape(B, L, scores.stride(0), k, lengths is not None, row_starts is not None, mode, tstride)
    key = (id(handle), id(split_kernel), dev, shape, o)
    plans = _plans()
    plan = plans.get(key)
    if plan is None:
        plan = plans[key] = _make_plan(handle, split_kernel, dev, shape, o)
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
