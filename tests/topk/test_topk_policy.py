"""CPU tests of the top-k launch policy (kernels/topk/policy.py) and options (options.py): pure
functions of shapes, budgets and device numbers."""

from __future__ import annotations

import pytest

from occtune.errors import UserError
from occtune.kernels.topk import policy
from occtune.kernels.topk.options import TopkOptions, options_of


def test_rows_that_fit_one_block_take_one_block_unless_unaligned():
    assert policy.resident_parts(64, 8192, 40960, 132) == 1                   # 32 KiB + 2 KiB <= 40 KiB
    assert policy.resident_parts(64, 8192, 40960, 132, one_block=False) == 0  # the two-pass kernel
    assert policy.resident_parts(64, 8192, 32768, 132, one_block=False) == 2  # spread rows stay spread
    assert policy.resident_parts(64, 8192, 32768, 132) == 2                  # no room for candidates
    p = policy.resident_plan(64, 8192, 12, 40960, 1)
    assert p == policy.ResidentPlan(1, 8192, (40960 - 32768) // 8, 8192, 0)
    assert 4 * p.cand_off + 8 * p.cap <= 40960


@pytest.mark.parametrize("B,L,budget,want", [(1, 1 << 20, 32768, 128), (1, 1 << 20, 49152, 128),
                                             (8, 131072, 32768, 16), (8, 131072, 49152, 16),
                                             (64, 131072, 32768, 16), (1, 1 << 20, 4096, 0)])
def test_spread_rows_take_the_fewest_blocks_raised_towards_8k_slices(B, L, budget, want):
    parts = policy.resident_parts(B, L, budget, 132)
    assert parts == want
    if parts:
        plan = policy.resident_plan(B, L, 12, budget, parts)
        assert 4 * plan.chunk <= budget and plan.parts * plan.chunk >= L
        assert plan.cap == budget // 8 and plan.ws_row == policy.resident_workspace_ints(12, plan.cap)


def test_a_slice_over_the_budget_is_an_error_that_says_how_many_blocks():
    with pytest.raises(UserError, match="at least 32 blocks"):
        policy.resident_plan(1, 131072, 12, 16384, 8)


def test_workspace_layout_matches_the_kernels_offsets():
    # topk_resident.cuh: 8 counters, TOPK_CG group sums, TOPK_CGS bins, 4 x 256 digits, then the list
    assert policy.resident_workspace_ints(12, 0) == 8 + 64 + 64 + 1024
    assert policy.resident_workspace_ints(8, 10) == 8 + 16 + 16 + 1024 + 20


def test_one_wave_only_matters_for_spread_rows():
    assert policy.resident_one_wave(256, 1, 132, 1)
    assert policy.resident_one_wave(8, 16, 132, 1) and not policy.resident_one_wave(64, 16, 132, 2)


def test_options_are_frozen_hashable_and_checked():
    o = options_of(None, {"lds_budget": 32768, "resident": False})
    assert o == TopkOptions(lds_budget=32768, resident=False) and hash(o) == hash(TopkOptions(32768, resident=False))
    assert options_of(o, {}) is o
    assert o.with_config(40960, 1024, 12) == TopkOptions(40960, 1024, 12, resident=False)
    with pytest.raises(UserError, match="unknown option 'budget'"):
        options_of(None, {"budget": 1})
    with pytest.raises(UserError, match="TopkOptions"):
        options_of({"lds_budget": 1}, {})
    with pytest.raises(AttributeError):
        o.lds_budget = 1


def test_the_analytic_resident_columns_count_slices_and_rows_kept_on_chip():
    """tune topk's resident columns: the budget as the slice, the longest row one block finishes
    with its rank list, and rows of 8K/128K/1M the device keeps on chip at blocks_per_cu."""
    from occtune.kernels.topk.analysis import resident_columns

    c = resident_columns(32768, 256, 3)           # gfx950's 256 CUs, 3 resident blocks each
    assert c["resident_slice_scores"] == 8192 and c["resident_row_one_block"] == (32768 - 8 * 256) // 4
    assert (c["rows_on_chip_8k"], c["rows_on_chip_128k"], c["rows_on_chip_1m"]) == (768 // 2, 768 // 16, 768 // 128)
    c = resident_columns(131072, 256, 1)
    assert (c["rows_on_chip_8k"], c["rows_on_chip_128k"], c["rows_on_chip_1m"]) == (256, 64, 8)
    assert resident_columns(131072, 256, None)["rows_on_chip_1m"] is None     # no compiler: unknown


@pytest.mark.parametrize("B,L,want", [(1, 8192, (8, 256, 1)), (16, 8192, (8, 256, 1)), (17, 8192, (4, 512, 1)),
                                      (1, 16384, (16, 256, 1)), (16, 16384, (8, 512, 1)), (1, 65536, (16, 512, 2)),
                                      (1, 4096, (4, 256, 1)), (64, 8192, None), (1, 65537, None), (1, 2048, None)])
def test_short_rows_take_the_fewest_blocks_of_about_1k_values_one_a_sm(B, L, want):
    sc = policy.short_cluster(B, L, 2048, 132)
    assert (None if sc is None else tuple(sc)) == want
    if sc is not None:
        assert B * sc.size <= 132 and 4 * sc.regs * sc.threads * sc.size >= L      # every slice fits


def test_a_forced_short_cluster_ignores_the_sm_rule_but_not_the_cluster_limits():
    assert policy.short_cluster(64, 8192, 2048, 132, size=8) == policy.ShortCluster(8, 256, 1)
    assert policy.short_cluster(1, 1000, 2048, 132, size=8) is None            # a row of at most k
    with pytest.raises(UserError, match="4 to 16 blocks"):
        policy.short_cluster(1, 8192, 2048, 132, size=32)
