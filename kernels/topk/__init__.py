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

from occtune.kernels.topk.runtime import (SOURCE_PATH, PRECOMPUTED, KERNEL_NAME, SPLIT_KERNEL_NAME,
    CLUSTER_KERNEL_NAME, RESIDENT_KERNEL_NAME, DEFAULT_BUDGET,
    MAX_K, BITS_RULE, THREADS_RULE, BUDGET_RULE, K_RULE, ROW_FLAGS, flag_counts, read_source, defines,
    build, cluster_regs, topk, SCORES, LENGTHS, STARTS, OUT, TABLE, BINS, SCRATCH, WS, LaunchPlan,
    clear_plans, plan_for, AUTO_CLUSTER, CLUSTER_TWO_LEVEL, MAX_CLUSTER, PORTABLE_CLUSTER,
    PREFIX_MIN_ROW, SPLIT_MIN_SLICE, ResidentPlan, cluster_fits, long_row_plan, split_plan,
    split_record_ints, TopkOptions, options_of, policy)  # noqa: F401
