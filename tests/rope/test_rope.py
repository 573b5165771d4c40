"""RoPE kernels against the float64 complex-multiply reference, on the CPU (TRITON_INTERPRET=1).

Shapes are tiny: the interpreter runs every program in Python.
"""

import os

os.environ.setdefault("TRITON_INTERPRET", "1")

import pytest  # noqa: E402
import torch  # noqa: E402

if os.environ["TRITON_INTERPRET"] != "1" and not torch.cuda.is_available():
    pytest.skip("needs TRITON_INTERPRET=1 or a GPU", allow_module_level=True)

from occtune.kernels.rope import (apply_rope, naive_torch_rope, reference_rope,  # noqa: E402
                          tuned_config, default_config, VARIANT_NAMES)
from occtune.errors import UserError  # noqa: E402

DEV = "cuda" if torch.cuda.is_available() and os.environ["TRITON_INTERPRET"] != "1" else "cpu"
# rounding of one result to the output type, relative: half an ulp on a GPU (round to nearest);
# a whole ulp under the interpreter, whose fp32 -> bf16 conversion truncates.
ROUNDING = {torch.bfloat16: 2.0**-8, torch.float16: 2.0**-11, torch.float32: 2.0**-24}
if DEV == "cpu":
    ROUNDING = {k: 2 * v for k, v in ROUNDING.items()}


def freqs(S, D, seed=0):
    g = torch.Generator().manual_seed(seed)
    ang = torch.rand(S, D // 2, generator=g, dtype=torch.float64) * 6.283
    return torch.polar(torch.ones_like(ang), ang).to(torch.complex64).to(DEV)


def rand(shape, dtype, seed=1):
    g = torch.Generator().manual_seed(seed)
    return (torch.randn(shape, generator=g) * 2).to(dtype).to(DEV)


def assert_matches(out, ref, x):
    """Every element within one rounding of the output type plus fp32 math error."""
    assert not torch.isnan(out).any()
    err = (out.double() - ref).abs()
    bound = ROUNDING[out.dtype] * ref.abs() + 1e-5 * x.double().abs().max() + 1e-30
    assert (err <= bound).all(), f"max err {err.max().item():.3g} (worst excess {(err - bound).max().item():.3g})"


def cfg(variant, bm=8, nw=1):
    return {"variant": variant, "BLOCK_M": bm, "num_warps": nw}


@pytest.mark.parametrize("variant", VARIANT_NAMES)
@pytest.mark.parametrize("D", [32, 64, 96])
@pytest.mark.parametrize("T", [1, 13])
def test_strided_slice_positions_inverse(variant, D, T):
    """The DeepSeek-V4 case in small: inverse rope on the last D columns of wider heads, with
    shuffled positions, written out of place into the slice of a poisoned tensor."""
    H, head = 3, D + 40
    f = freqs(40, D)
    big = rand((T, H, head), torch.bfloat16)
    x = big[..., -D:]
    pos = torch.randperm(40, generator=torch.Generator().manual_seed(T))[:T].to(DEV)
    dst = torch.full_like(big, float("nan"))
    y = apply_rope(x, f, pos, inverse=True, out=dst[..., -D:], config=cfg(variant))
    assert y.data_ptr() == dst[..., -D:].data_ptr()
    assert_matches(y, reference_rope(x, f, pos, inverse=True), x)
    assert torch.isnan(dst[..., :-D]).all(), "wrote outside the rope columns"


@pytest.mark.parametrize("variant", VARIANT_NAMES)
def test_2d_forward_no_positions_fp16(variant):
    f = freqs(20, 64)
    x = rand((11, 64), torch.float16)
    y = apply_rope(x, f, config=cfg(variant, bm=4, nw=2))
    assert y.dtype == torch.float16 and y.shape == x.shape
    assert_matches(y, reference_rope(x, f), x)


@pytest.mark.parametrize("variant", VARIANT_NAMES)
def test_inverse_undoes_forward_fp32(variant):
    f = freqs(16, 96)
    x = rand((9, 2, 96), torch.float32)
    pos = torch.tensor([3, 0, 15, 7, 7, 1, 2, 9, 4], dtype=torch.int32, device=DEV)
    y = apply_rope(x, f, pos, config=cfg(variant, bm=4))
    assert (y - x).abs().max() > 0.1      # it did rotate
    z = apply_rope(y, f, pos, inverse=True, config=cfg(variant, bm=4))
    torch.testing.assert_close(z, x, atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("out_dtype", [torch.float32, torch.float16, torch.bfloat16])
def test_results_cast_to_output_dtype(out_dtype):
    f = freqs(8, 32)
    x = rand((8, 2, 32), torch.bfloat16)
    out = torch.empty(x.shape, dtype=out_dtype, device=DEV)
    y = apply_rope(x, f, out=out, config=cfg("batched"))
    assert y is out and y.dtype == out_dtype
    assert_matches(y, reference_rope(x, f), x)


def test_inplace_equals_out_of_place():
    f = freqs(8, 64)
    big = rand((5, 2, 128), torch.bfloat16)
    expect = apply_rope(big[..., -64:], f, inverse=True, config=cfg("flat"))
    head = big[..., :-64].clone()
    y = apply_rope(big[..., -64:], f, inverse=True, inplace=True, config=cfg("flat"))
    assert y.data_ptr() == big[..., -64:].data_ptr()
    assert torch.equal(big[..., -64:], expect) and torch.equal(big[..., :-64], head)


def test_non_unit_last_stride_is_copied():
    f = freqs(6, 32)
    base = rand((6, 64), torch.float32)
    x = base[:, ::2]                       # last-dim stride 2
    ref = reference_rope(x, f)
    assert_matches(apply_rope(x, f, config=cfg("tile")), ref, x)
    apply_rope(x, f, inplace=True, config=cfg("tile"))
    assert_matches(base[:, ::2], ref, base)


def test_freqs_fp32_view_equals_complex():
    f = freqs(8, 64)
    x = rand((8, 64), torch.bfloat16)
    a = apply_rope(x, f, config=cfg("tile"))
    b = apply_rope(x, torch.view_as_real(f).reshape(8, 64), config=cfg("tile"))
    assert torch.equal(a, b)


def test_default_and_tuned_config_paths_run():
    f = freqs(8, 64)
    x = rand((8, 4, 64), torch.bfloat16)
    assert_matches(apply_rope(x, f), reference_rope(x, f), x)                     # config=None
    assert_matches(apply_rope(x, f, variant="heads"), reference_rope(x, f), x)    # variant override


def test_naive_torch_matches_reference():
    f = freqs(8, 64)
    x = rand((8, 3, 128), torch.bfloat16)[..., -64:]
    pos = torch.tensor([7, 6, 5, 4, 3, 2, 1, 0], device=DEV)
    assert_matches(naive_torch_rope(x, f, pos, inverse=True), reference_rope(x, f, pos, inverse=True), x)


@pytest.mark.parametrize("call", [
    lambda x, f: apply_rope(x[..., :63], f),                                   # odd rope_dim
    lambda x, f: apply_rope(x, f[:, :16]),                                     # freqs too narrow
    lambda x, f: apply_rope(x, f.real),                                        # fp32 of wrong width
    lambda x, f: apply_rope(x, f, torch.zeros(3, dtype=torch.long)),           # positions length
    lambda x, f: apply_rope(x, f, torch.zeros(4)),                             # positions dtype
    lambda x, f: apply_rope(x, f[:2]),                                         # T > max_seq
    lambda x, f: apply_rope(x, f, config={"variant": "fast"}),
    lambda x, f: apply_rope(x, f, config={"BLOCK_M": 12}),
    lambda x, f: apply_rope(x, f, config={"num_warps": 3}),
    lambda x, f: apply_rope(x, f, config={"BLOCKM": 16}),
    lambda x, f: apply_rope(x, f, out=torch.empty(4, 2, 64), inplace=True),
    lambda x, f: apply_rope(x, f, out=torch.empty(4, 2, 32)),
    lambda x, f: apply_rope(x.long(), f),
])
def test_bad_input_is_a_user_error(call):
    with pytest.raises(UserError):
        call(torch.randn(4, 2, 64).to(torch.bfloat16), freqs(4, 64).cpu())


def test_zero_tokens_is_a_no_op():
    x = torch.empty(0, 2, 64, dtype=torch.bfloat16, device=DEV)
    assert apply_rope(x, freqs(4, 64), config=cfg("flat")).shape == (0, 2, 64)


# --- tuned config lookup -------------------------------------------------------------------------
def _write(tmp_path, target, text):
    (tmp_path / target).mkdir(parents=True, exist_ok=True)
    (tmp_path / target / "rope.yaml").write_text(text)


def test_tuned_config_is_read_from_results(tmp_path, monkeypatch):
    monkeypatch.setenv("OCCTUNE_RESULTS", str(tmp_path))
    _write(tmp_path, "sm_90", "winner:\n  config: {variant: tile, BLOCK_M: 64, num_warps: 8}\n  time_us: 70\n")
    assert tuned_config("sm_90") == {"variant": "tile", "BLOCK_M": 64, "num_warps": 8}
    assert tuned_config("gfx942") == default_config()       # no file for that target


@pytest.mark.parametrize("text", [
    "", "winner: 3\n", "[1, 2]\n", "winner:\n  config: {variant: nope, BLOCK_M: 8, num_warps: 1}\n",
    "winner:\n  config: {variant: tile, BLOCK_M: 12, num_warps: 1}\n", ": : not yaml [\n",
])
def test_corrupt_tuned_results_are_reported_not_replaced_by_the_default(tmp_path, monkeypatch, text):
    monkeypatch.setenv("OCCTUNE_RESULTS", str(tmp_path))
    _write(tmp_path, "sm_90", text)
    with pytest.raises(UserError, match="rope.yaml") as e:
        tuned_config("sm_90")
    assert "\n" not in str(e.value)
