"""RopeFamily through the engine on the CPU (TRITON_INTERPRET=1, tiny shapes, fake timer), and the
compiler-reported resources of the kernels cross-compiled for NVIDIA and AMD targets."""

import os

os.environ.setdefault("TRITON_INTERPRET", "1")

import pytest  # noqa: E402
import torch  # noqa: E402

if os.environ["TRITON_INTERPRET"] != "1":
    pytest.skip("CPU tests: run with TRITON_INTERPRET=1", allow_module_level=True)

from occtune.kernels.rope.family import RopeBuilt, RopeFamily, deepseek_workload  # noqa: E402
from occtune.kernels.rope.resources import compiled_resources  # noqa: E402
from occtune.engine.registry import get_family  # noqa: E402
from occtune.errors import UserError  # noqa: E402

SMALL = [deepseek_workload(T, H=4, head_dim=96) for T in (1, 21)]


def test_registered_and_shaped_like_deepseek():
    fam = get_family("rope")
    assert isinstance(fam, RopeFamily)
    ws = fam.workloads()
    assert [w["T"] for w in ws] == [1, 64, 1024, 8192, 32768]
    assert all(w["H"] == 128 and w["D"] == 64 and w["head_dim"] == 512 and w["inverse"] for w in ws)
    assert fam.baseline_config() == {"variant": "batched", "BLOCK_M": 32, "num_warps": 4}
    # bf16 [8192, 128, 64]: read + write 2 x 128 MiB, plus freqs rows and positions
    assert fam.bytes_moved(ws[3]) == 2 * 8192 * 128 * 64 * 2 + 8192 * 64 * 4 + 8192 * 8


@pytest.mark.parametrize("config", [
    {"variant": "flat", "BLOCK_M": 16, "num_warps": 1},
    {"variant": "tile", "BLOCK_M": 8, "num_warps": 2},
    {"variant": "heads", "BLOCK_M": 2, "num_warps": 1},
])
def test_run_is_repeatable_and_checked(config):
    fam = RopeFamily(SMALL)
    built = fam.build(config, "cpu")
    inputs = fam.make_inputs(SMALL[1], 3, "cpu")
    assert torch.isnan(inputs.out).all()                       # poisoned before the run
    first = fam.run(built, inputs).clone()
    assert fam.check(first, inputs, SMALL[1]).ok
    assert torch.equal(fam.run(built, inputs), first)          # the input is never modified
    for name, adv in fam.adversarial_inputs(SMALL[1], "cpu"):
        assert fam.check(fam.run(built, adv), adv, SMALL[1]).ok, name


def test_check_rejects_wrong_nan_and_stray_writes():
    fam = RopeFamily(SMALL)
    w = SMALL[1]
    built = fam.build({"variant": "flat", "BLOCK_M": 8, "num_warps": 1}, "cpu")
    inp = fam.make_inputs(w, 1, "cpu")
    assert not fam.check(inp.out, inp, w).ok                   # untouched poison: NaN
    fam.run(built, inp)
    inp.out[3, 1, 5] += 0.5
    assert not fam.check(inp.out, inp, w).ok                   # one wrong element
    inp = fam.make_inputs(w, 1, "cpu")
    fam.run(built, inp)
    inp.dst[0, 0, 0] = 0.0
    assert "outside" in fam.check(inp.out, inp, w).reason       # a write outside the columns
    inp = fam.make_inputs({**w, "inverse": False}, 1, "cpu")
    fam.run(RopeBuilt({"variant": "flat", "BLOCK_M": 8, "num_warps": 1}), inp)
    inp.inverse = True                                          # forward result vs inverse reference
    assert not fam.check(inp.out, inp, w).ok


def test_reused_inputs_keep_one_reference_and_are_re_poisoned():
    fam = RopeFamily(SMALL)
    w = SMALL[1]
    built = fam.build({"variant": "flat", "BLOCK_M": 8, "num_warps": 1}, "cpu")
    inp = fam.make_inputs(w, 1, "cpu")
    assert fam.check(fam.run(built, inp), inp, w).ok
    ref = inp.ref
    fam.reset_outputs(inp)                                       # the next config's turn
    assert torch.isnan(inp.dst).all()
    assert not fam.check(inp.out, inp, w).ok                     # writes nothing: caught
    assert fam.check(fam.run(built, inp), inp, w).ok and inp.ref is ref


@pytest.mark.parametrize("variant", ["token", "flat", "heads"])
def test_warm_compiles_exactly_what_the_launch_passes(variant):
    """warm() hands Triton the launch's own ints and dtypes, so its compiles are the ones used."""
    from occtune.kernels.rope.kernels import launch_args, warm_args

    fam = RopeFamily(SMALL)
    cfg = {"variant": variant, "BLOCK_M": 8, "num_warps": 2}
    for (w, seed), (_, inp) in zip(fam._shapes(SMALL[1]), [(None, fam.make_inputs(SMALL[1], 1, "cpu")),
                                                           *fam.adversarial_inputs(SMALL[1], "cpu")]):
        args, kwargs, grid = launch_args(variant, inp.x, inp.out, inp.f2, inp.positions, inp.inverse, 8, 2)
        wargs, wkwargs, wgrid = warm_args(w, cfg, inp.x.dtype)
        assert [a.dtype if hasattr(a, "dtype") else a for a in args] == list(wargs)
        assert all(a.data_ptr() % 16 == 0 for a in args[:4])       # Triton's mock assumes aligned
        assert (kwargs, grid) == (wkwargs, wgrid)


def test_naive_run_passes_the_same_check():
    fam = RopeFamily(SMALL)
    inp = fam.make_inputs(SMALL[1], 5, "cpu")
    assert fam.check(fam.run_naive(inp), inp, SMALL[1]).ok


def test_sweep_through_the_engine():
    from occtune.engine.sweep import run_sweep
    from doubles import FakeTimer

    fam = RopeFamily(SMALL)
    configs = [fam.baseline_config(), {"variant": "flat", "BLOCK_M": 8, "num_warps": 1},
               {"variant": "token", "BLOCK_M": 16, "num_warps": 1}]
    res = run_sweep(fam, configs, SMALL, device="cpu", timer=FakeTimer(), cache=False, progress=False)
    status = {(r["config"]["variant"], r["workload"]["T"]): r["status"] for r in res.rows}
    assert status[("batched", 21)] == "ok" and status[("flat", 1)] == "ok"
    assert status[("token", 21)] == "skipped"                  # token ignores BLOCK_M


@pytest.mark.parametrize("target,key", [("sm_80", "regs"), ("sm_90", "regs"), ("sm_100", "regs"),
                                        ("gfx942", "vgprs"), ("gfx950", "vgprs")])
def test_resources_from_the_compiled_kernel(target, key):
    small = compiled_resources({"variant": "flat", "BLOCK_M": 8, "num_warps": 4}, target)
    big = compiled_resources({"variant": "flat", "BLOCK_M": 128, "num_warps": 1}, target)
    warp = 64 if target.startswith("gfx") else 32
    assert small.threads == 4 * warp and big.threads == warp
    assert 0 < getattr(small, key) < getattr(big, key)        # 16x the tile on a quarter of the threads
    r = compiled_resources({"variant": "batched", "BLOCK_M": 32, "num_warps": 4}, target)
    assert r.source.startswith("compiled: triton ") and r.source.endswith(f" {target}")
    assert (r.regs or r.vgprs) > 0
    if target.startswith("gfx"):
        assert "(LLVM " in r.source and r.sgprs > 0 and 1 <= small.compiler_occupancy <= 10


def test_unknown_target_is_a_user_error():
    with pytest.raises(UserError):
        compiled_resources({"variant": "flat", "BLOCK_M": 8, "num_warps": 1}, "h200")


def test_tokens_not_specialised_so_one_compile_serves_every_T():
    """T=1 (decode) and T=64..32768 give the launcher one specialisation (the sweep compiled each
    config twice before); the other ints keep theirs (H=1, a 2D input, is still folded to a constant)."""
    from occtune.kernels.rope.resources import _signature

    cfg = {"variant": "flat", "BLOCK_M": 16, "num_warps": 4}
    one, many = _signature({"T": 1}, cfg), _signature({"T": 64}, cfg)
    assert one == many and one[0]["T"] == "i32"
    assert _signature({"T": 64, "H": 1}, cfg)[1].get("H") == 1


def test_adversarial_odd_set_runs_the_binary_being_timed():
    """The odd set (rope_dim not a power of two, odd T, shuffled positions) launches the very
    specialisation of the workload it guards: verification covers the timed binary, no extra compile."""
    from occtune.kernels.rope.family import RopeFamily, odd_rope_dim
    from occtune.kernels.rope.resources import _signature

    cfg = {"variant": "batched", "BLOCK_M": 32, "num_warps": 2}
    for D in (64, 128):
        main, odd, one = (w for w, _ in RopeFamily()._shapes(deepseek_workload(8192, D=D)))
        assert odd["D"] & (odd["D"] - 1) and odd["D"] < D and odd["T"] % 2
        assert _signature(odd, cfg) == _signature(main, cfg) == _signature(one, cfg)
    assert odd_rope_dim(32) == 30      # no such D below 32: its own specialisation
