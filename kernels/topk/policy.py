"""The top-k launcher's sizing policy: pure functions of shapes, budgets and device numbers (no
torch, no driver), so that every decision the launch plan makes can be tested on the CPU.

Paths, by what a row needs (the runtime, ``occtune.kernels.topk``, asks the driver for the
numbers these take: SM count, resident blocks per SM, resident clusters):
- resident (``topk_resident_kernel``): the row's slice in each block's LDS budget, every score read
  once; one block a row where the row fits one budget, else ``parts`` blocks a row that merge
  their histograms in a global workspace (every block of the launch resident at once);
- long rows that do not fit on chip: a sampled floor and one pass that keeps the values above it,
  over one thread-block cluster (sm_90+), the split kernel (several blocks a row), or one block;
- short rows (4K-64K values) of few rows on sm_90+: one thread-block cluster a row, the row's
  slices in the blocks' registers (``topk_cluster_kernel``'s register path, ``short_cluster``);
- the rest: one block a row, two passes over the row (``topk_transform_kernel``).
"""

from __future__ import annotations

from typing import NamedTuple

from occtune.errors import UserError
from occtune.kernels.topk.capacity import candidate_entries

PORTABLE_CLUSTER = 8                  # the portable thread-block cluster size (sm_90+)
MAX_CLUSTER = 16                      # with the non-portable attribute set (sm_90, sm_100): cluster=True
AUTO_CLUSTER = 8                      # the largest cluster the automatic plan takes
CLUSTER_TWO_LEVEL = 4                 # topk.cuh's TOPK_CLUSTER_TWO_LEVEL: two-level searches from here
CLUSTER_REGS_VALUES = 16384           # the register path's slice: at most this many values per block
SPLIT_MIN_SLICE = 16384               # a split row's slices are at least this many columns
PREFIX_MIN_ROW = 131072               # rows at least this long use the prefix-bound single pass
# The resident path (topk_resident.cuh). A one-block row keeps at least RES_MIN_CAP candidate
# entries beside its slice (else it is spread over blocks); a spread row has slices of about
# RES_SLICE values or more where it may take more blocks than the minimum, at most RES_MAX_PARTS
# blocks (the automatic plan).
RES_MIN_CAP = 256
RES_SLICE = 8192
RES_MAX_PARTS = 256
MAX_THREADS_PER_SM = 2048             # sm_90 and CDNA3 alike: the block-count bound before the driver's answer
# The short-row cluster path (topk_cluster.cuh's register path on rows that are not long, sm_90+):
# a block's slice aims at SHORT_SLICE values; rows of SHORT_MIN_ROW to SHORT_MAX_ROW values (the
# range measured: benchmarks/records/topk_cshort).
SHORT_SLICE = 1024
SHORT_MIN_ROW = 4096
SHORT_MAX_ROW = 65536
SHORT_MAX_THREADS = 512


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


def split_record_ints(bits: int) -> int:
    """Ints per row of the split kernel's record (topk.cuh's TOPK_SPLIT_REC): the kept-list
    length, the coarse histogram of the kept values (2**bits bins), 1 + the bin the sampled floor
    cut (0: none)."""
    return 2 + (1 << int(bits))


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


def cluster_regs(L: int, S: int, threads: int, values: int = CLUSTER_REGS_VALUES) -> int:
    """TOPK_CLUSTER_REGS (float4 per thread) of the cluster kernel's register path for rows of
    ``L`` over S blocks of ``threads``, or 0 where it does not apply: a two-level build (S >=
    CLUSTER_TWO_LEVEL), 256 threads or more, each block's slice at most 4 R threads values (R =
    ``values`` / 4 threads, rounded down: the kernel's own test, so that a thread count that does
    not divide 4096 never builds a register path no row takes)."""
    slice_ = (-(-int(L) // int(S)) + 3) & ~3          # topk_cluster_slice's chunk
    regs = int(values) // (4 * int(threads))
    if S < CLUSTER_TWO_LEVEL or threads < 256 or slice_ > 4 * regs * int(threads):   # the kernel's test
        return 0
    return regs


def _ceil4(n: int) -> int:
    return (int(n) + 3) & ~3


def resident_slice(lds_budget: int) -> int:
    """Scores one block of the resident kernel keeps on chip: its whole dynamic LDS budget as
    4-byte values (a multiple of 4: slices keep 16-byte alignment)."""
    return (int(lds_budget) // 4) & ~3


def resident_workspace_ints(bits: int, cap: int) -> int:
    """Ints per row of a spread row's workspace (topk_resident.cuh's TOPK_RWS_*): counters (8),
    group sums and the threshold group's bins, four digit histograms, then the ``cap``-entry
    candidate list (2 ints an entry)."""
    bins = 1 << int(bits)
    group = 64 if bins >= 4096 else 16
    return 8 + bins // group + group + 4 * 256 + 2 * int(cap)


class ResidentPlan(NamedTuple):
    """How the resident kernel holds rows of L values: ``parts`` blocks a row, each with a
    slice of at most ``chunk`` values; ``cap`` candidate entries (one block: after the slice, at
    u32 offset ``cand_off`` of the block's LDS; spread: the row's global list); ``ws_row`` ints of
    workspace a row (0: none, one block a row)."""

    parts: int
    chunk: int
    cap: int
    cand_off: int
    ws_row: int


def resident_parts(B: int, L: int, lds_budget: int, num_sms: int, one_block: bool = True) -> int:
    """Blocks a row of the automatic resident plan: 1 where the row and RES_MIN_CAP candidates fit
    one block's budget (0, the two-pass kernel, with ``one_block`` false), else the fewest blocks
    whose slices fit, raised towards slices of about RES_SLICE values while the B rows' blocks stay
    within one per SM (the merge then starts sooner); 0 where a row needs more than RES_MAX_PARTS
    blocks.

    One block a row is chosen since its collect and load take one shared atomic a value out
    (benchmarks/records/topk_regs, run6, H200, 48 KiB): (1, 8K) 10.72 us against the two-pass
    kernel's 11.47 at 1024 threads, 11.18 against 15.04 at 512; (64, 8K) 11.62 against 12.24; it
    lost before that change (records/topk_decode/r2: 12.9 against 11.4). The runtime passes
    ``one_block`` false for rows that are not 16-byte aligned (an odd row stride, row starts),
    which the one-block load reads 4 bytes at a time: (3, 10001) took 16.42 us against 13.58."""
    per = resident_slice(lds_budget)
    if per <= 0:
        return 0
    if 4 * _ceil4(L) + 8 * RES_MIN_CAP <= int(lds_budget):
        return int(bool(one_block))
    least = max(2, -(-int(L) // per))
    want = min(-(-int(L) // RES_SLICE), max(1, int(num_sms) // max(1, int(B))))
    parts = max(least, want)
    return parts if parts <= RES_MAX_PARTS else 0


def resident_plan(B: int, L: int, bits: int, lds_budget: int, parts: int) -> ResidentPlan:
    """The resident kernel's layout for ``parts`` blocks a row (a UserError where a slice does not
    fit the budget)."""
    parts = int(parts)
    if parts < 1:
        raise UserError(f"resident needs at least 1 block a row, got {parts}")
    chunk = _ceil4(-(-int(L) // parts))
    if 4 * chunk > int(lds_budget):
        raise UserError(f"resident: a slice of {chunk} scores ({4 * chunk} B) does not fit the LDS budget of "
                        f"{lds_budget} B with {parts} block(s) a row; use at least "
                        f"{-(-int(L) // max(1, resident_slice(lds_budget)))} blocks or a larger budget")
    if parts == 1:
        return ResidentPlan(1, chunk, (int(lds_budget) - 4 * chunk) // 8, chunk, 0)
    cap = candidate_entries(int(lds_budget))     # the last block copies the list into its budget
    return ResidentPlan(parts, chunk, cap, 0, resident_workspace_ints(bits, cap))


def resident_one_wave(B: int, parts: int, num_sms: int, blocks_per_sm: int) -> bool:
    """Whether every block of a spread plan can be resident at once (its rows wait for each other:
    one wave, by the driver's blocks per SM); one-block rows need no such thing."""
    return parts == 1 or int(B) * int(parts) <= int(num_sms) * max(0, int(blocks_per_sm))


class ShortCluster(NamedTuple):
    """The short-row cluster path's layout: ``size`` blocks a row (one cluster) of ``threads``
    threads, each holding ``regs`` float4 of its block's slice (TOPK_CLUSTER_REGS)."""

    size: int
    threads: int
    regs: int


def _pow2_at_least(n: int) -> int:
    return 1 << max(0, int(n) - 1).bit_length()


def short_cluster(B: int, L: int, k: int, num_sms: int, size: int | None = None) -> ShortCluster | None:
    """The cluster layout for B rows of L values (SHORT_MIN_ROW <= L <= SHORT_MAX_ROW, L > k), or
    None where the path does not apply. The cluster has the fewest blocks (a power of two, 4 to
    MAX_CLUSTER) whose slices hold about SHORT_SLICE values, halved while the B rows' blocks would
    be more than one a SM; None where that leaves fewer than CLUSTER_TWO_LEVEL blocks a row (the
    register path needs the two-level search). ``size`` forces the cluster (no SM rule). Blocks
    of 256 to SHORT_MAX_THREADS threads, one float4 a thread where the slice allows.

    Measured on the H200 (records/topk_cshort, exp1/exp2, k = 2048, us, against the committed
    default): (1, 8K) 9.95 / 11.04, (16, 8K) 10.69 / 11.97, (1, 16K) 10.88 / 17.18, (16, 16K)
    11.87-12.10 / 16.83, (1, 32K) 11.26 / 16.75, (1, 64K) 12.21 / 17.68; it lost at (64, 8K) over
    4 blocks a row (12.66 / 11.87), which this rule leaves to the resident kernel."""
    if B <= 0 or L <= k or not SHORT_MIN_ROW <= L <= SHORT_MAX_ROW:
        return None
    if size is None:
        S = max(CLUSTER_TWO_LEVEL, min(MAX_CLUSTER, _pow2_at_least(-(-int(L) // SHORT_SLICE))))
        while S > CLUSTER_TWO_LEVEL and int(B) * S > int(num_sms):
            S //= 2
        if int(B) * S > int(num_sms):
            return None
    else:
        S = int(size)
        if not CLUSTER_TWO_LEVEL <= S <= MAX_CLUSTER:
            raise UserError(f"a short row's cluster takes {CLUSTER_TWO_LEVEL} to {MAX_CLUSTER} blocks, got split={size}")
    chunk = _ceil4(-(-int(L) // S))                       # topk_cluster_slice's chunk
    threads = min(SHORT_MAX_THREADS, max(256, _pow2_at_least(-(-chunk // 4))))
    return ShortCluster(S, threads, -(-chunk // (4 * threads)))
