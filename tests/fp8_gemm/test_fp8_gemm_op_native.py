"""CPU tests of the FP8 GEMM ops' C++ kernels (``op_native.cpp``): the library builds against the
installed torch and loads (in a child process, so that its CUDA kernels do not replace the Python
ones here) with schemas that agree with op.py; ``plan.native_description`` maps each launch's
arguments onto the kernel's parameters (pointer slots, 32- and 64-bit ints, Triton's two scratch
pointers) and checks their number against a real cross-compiled kernel's PTX; host TMA descriptors
(PIPE 4-7, 10) describe as the record plan_launch.h encodes, checked against a cross-compiled
PIPE 10 kernel's PTX; plans the C++ side cannot launch (another launcher, clusters, a descriptor
Triton did not lower) describe as empty. The C++ launches run
in the GPU tests (test_fp8_gemm_gpu.py)."""

from __future__ import annotations

import os
import types

os.environ.setdefault("TRITON_INTERPRET", "1")      # as the other CPU tests of the family (one process)

import pytest  # noqa: E402

torch = pytest.importorskip("torch")

from occtune.kernels.fp8_gemm import DECODE_TRITON as DEC, op, plan as plans, splitk  # noqa: E402
from occtune.kernels.fp8_gemm.family import make_gemm_inputs  # noqa: E402

from childproc import built_ops, child_json  # noqa: E402

CHILD = r"""
import json, torch
from occtune.build import native
from occtune.kernels.fp8_gemm import op
path, why = native.torch_library(op.NATIVE_SOURCE)
if path is None:
    print(json.dumps({"error": why})); raise SystemExit(0)
torch.ops.load_library(str(path))
args = lambda name: [(a.name, str(a.type)) for a in getattr(torch.ops.occtune, name).default._schema.arguments]
print(json.dumps({"stats": list(torch.ops.occtune._fp8_gemm_native_stats()), **{n: args(n) for n in (
    "fp8_gemm", "fp8_gemm_out", "_fp8_gemm_py", "_fp8_gemm_out_py", "_fp8_gemm_describe")}}))
"""


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    return built_ops(CHILD, tmp_path_factory.mktemp("cache"))


def test_the_cpp_ops_build_load_and_match_the_python_schemas(built):
    assert built["stats"] == [0, 0, 0, 0, 0]
    assert built["_fp8_gemm_py"] == built["fp8_gemm"] and built["_fp8_gemm_out_py"] == built["fp8_gemm_out"]
    assert [n for n, _ in built["_fp8_gemm_describe"]] == ["a", "a_s", "b", "b_s", "config", "out"]


def _ptx(params: int) -> str:
    body = ",\n".join(f"  .param .u64 k_param_{i}" for i in range(params))
    return f".visible .entry k(\n{body}\n)\n{{\n  ret;\n}}\n"


def _fake_launcher(signature: dict, ptx_params: int, **launcher):
    """Stands in for Triton 3.6's direct launcher over a compiled kernel of this signature."""
    kernel = types.SimpleNamespace(src=types.SimpleNamespace(signature=signature), asm={"ptx": _ptx(ptx_params)},
                                   metadata=types.SimpleNamespace(num_warps=4, shared=9216, num_ctas=1))
    L = types.SimpleNamespace(kernel=kernel, function=0xF00, direct=True, flags=(0, 0), scratch_bytes=0)
    vars(L).update(launcher)
    return L


def _fake_step(signature: dict, roles: tuple, tail: tuple, ptx_params: int, **launcher):
    fn = types.SimpleNamespace(arg_names=list(signature))
    return plans.Step(_fake_launcher(signature, ptx_params, **launcher), fn, (3, 2, 1), roles, tail, {}, {})


SIG = {"a_ptr": "*fp8e4nv", "c_ptr": "*bf16", "M": "i32", "big": "i64", "one": "constexpr", "BLOCK": "constexpr"}


def test_a_launch_maps_pointers_ints_and_the_scratch_pointers():
    step = _fake_step(SIG, (0, 4), (8, 1 << 40, 1, 64), ptx_params=6)
    assert plans._native_launch(step) == [0xF00, 3, 2, 1, 128, 9216, 6,
                                          1, 0, 1, 4, 0, 8, 2, 1 << 40, 3, 0, 3, 0]


def test_global_scratch_is_the_workspace_slot():
    """PIPE 1-3's in-kernel TMA descriptors live in Triton's global scratch: the call's workspace."""
    step = _fake_step(SIG, (0, 4), (8, 1 << 40, 1, 64), ptx_params=6, scratch_bytes=128)
    step.scratch = True
    assert plans._native_launch(step)[-4:] == [1, plans.ROLES.index("ws"), 3, 0]


@pytest.mark.parametrize("change", [
    {"ptx_params": 5},                                    # the PTX entry disagrees: Python launches it
    {"direct": False}, {"flags": (0, 1)},
])
def test_a_launch_the_cpp_side_cannot_make_describes_as_none(change):
    ptx = change.pop("ptx_params", 6)
    assert plans._native_launch(_fake_step(SIG, (0, 4), (8, 1 << 40, 1, 64), ptx_params=ptx, **change)) is None


DESC_SIG = {"w_desc": "tensordesc<fp8e4nv[64, 128],layout>", "c_ptr": "*bf16", "M": "i32", "BLOCK": "constexpr"}
META = {"swizzle": 3, "elem_size": 1, "elem_type": 9, "block_size": [64, 128], "fp4_padded": False}


def _desc_step(meta=META, ptx_params=9, **desc):
    step = _fake_step(DESC_SIG, (2, 4), (8, 64), ptx_params=ptx_params, desc_meta=[meta])
    step.descs = {0: types.SimpleNamespace(**{"shape": [256, 512], "strides": [512, 1], **desc})}
    return step


def test_a_host_descriptor_describes_as_a_tensor_map_then_its_shape_and_strides():
    """PIPE 4-7 and 10: Triton 3.6 passes a descriptor as the CUtensorMap, the shape (32-bit) and
    the strides (64-bit): five PTX parameters of nine here, the first with the record plan_launch.h
    encodes (host data type: Triton's device 9 is CUtensorMapDataType 8)."""
    rec = [4, 2, 8, 1, 3, 0, 2, 64, 128, 256, 512, 512, 1]
    assert plans._native_launch(_desc_step()) == [0xF00, 3, 2, 1, 128, 9216, 9,
                                                  *rec, 0, 256, 0, 512, 2, 512, 2, 1, 1, 4, 0, 8, 3, 0, 3, 0]
    assert plans._native_launch(_desc_step(padding="nan"))[12] == 1


@pytest.mark.parametrize("meta", [None, {**META, "fp4_padded": True}])
def test_a_descriptor_triton_did_not_lower_to_a_tensor_map_describes_as_none(meta):
    assert plans._native_launch(_desc_step(meta=meta)) is None


def test_a_descriptor_the_ptx_disagrees_with_describes_as_none():
    assert plans._native_launch(_desc_step(ptx_params=7)) is None


def test_an_unknown_parameter_type_describes_as_none():
    step = _fake_step({**SIG, "alpha": "fp32"}, (0, 4), (8, 1 << 40, 1, 64, 0.5), ptx_params=7)
    assert plans._native_launch(step) is None


def test_a_split_k_plan_describes_its_two_launches(monkeypatch):
    """PIPE 8 with a split: the partials' kernel then the reduction, each mapped from the plan."""
    monkeypatch.setattr(splitk, "split_of", lambda M, N, K, config, sms: 2)
    monkeypatch.setattr(plans, "current_stream", lambda index: 0)
    inp = make_gemm_inputs(8, 256, 512, 13, "cpu")
    cfg = {**DEC, "BLOCK_N": 64, "PIPE": 8}
    made = []

    def compile_kernel(fn, grid, args, kw):
        sig = {n: ("constexpr" if n in kw or n in ("BLOCK_M", "BLOCK", "EVEN_K", "SCALE", "PARTIAL", "ONE_PASS")
                   else "*fp32" if n.endswith("_ptr") else "i32") for n in fn.arg_names}
        nparams = sum(t != "constexpr" for t in sig.values()) + 2
        made.append(nparams)
        return _fake_launcher(sig, nparams)

    p = plans.build(inp.a, inp.a_s, inp.b, inp.b_s, inp.out, cfg, compile_kernel=compile_kernel)
    d = plans.native_description(p)
    assert d[:6] == [plans.NATIVE_FORMAT, 8, 256, p.need, 0, 2] and p.need == p.ws_bytes == 4 * 2 * 8 * 256
    first = d[6:]
    assert first[:7] == [0xF00, 1, 4, 2, 128, 9216, made[0]]
    pointers = first[7:7 + 2 * made[0]]
    assert [v for k, v in zip(pointers[::2], pointers[1::2]) if k == 1] == [0, 2, 4, 1, 3, 5, 4]   # a b out as bs ws (cnt: out)


def test_no_gpu_keeps_the_python_kernels():
    if torch.cuda.is_available():
        pytest.skip("a GPU machine: the GPU tests check the C++ kernels")
    assert op.native_error() in ("no GPU", "OCCTUNE_NATIVE_OP=0")


XC_CHILD = r"""
import json, triton
from occtune.build.tritonxc import compilable_module, gpu_target
from occtune.kernels.fp8_gemm import DECODE_TRITON as DEC, plan as plans, splitk
from occtune.kernels.fp8_gemm.resources import signature
fn = compilable_module(splitk, "fp8_gemm_splitk_kernel").fp8_gemm_splitk_kernel
k = triton.compile(triton.compiler.ASTSource(fn, *signature("sm_90", 8, 4096, 7168, {**DEC, "PIPE": 9})),
                   target=gpu_target("sm_90"), options={"num_warps": 4, "num_stages": 3})
print(json.dumps({"args": [n for n, t in k.src.signature.items() if t != "constexpr"], "ptx": plans._ptx_params(k)}))
"""


def test_a_cross_compiled_kernels_ptx_has_its_arguments_and_two_scratch_pointers():
    """What native_description assumes of Triton's ABI, on the split-K kernel compiled for sm_90
    by the installed Triton (in a child process: this one's interpreter runs leave Triton's jit
    helpers unfit to compile): one PTX parameter per non-constexpr argument, then two."""
    got = child_json(XC_CHILD, drop=("TRITON_INTERPRET",))
    assert "ws_ptr" in got["args"] and "steps" in got["args"] and "stride_ak" not in got["args"]   # 1: a constant
    assert got["ptx"] == len(got["args"]) + 2


XC_GLUON_CHILD = r"""
import json, types, torch, triton
from triton.experimental.gluon._runtime import GluonASTSource
from occtune.build.tritonxc import compilable_module, gpu_target
from occtune.kernels.fp8_gemm import plan as plans, splitk, splitk_wgmma
from occtune.kernels.fp8_gemm.config import PIPE_SPLITK_WGMMA
from occtune.kernels.fp8_gemm.family import make_gemm_inputs
cfg = {"BLOCK_M": 16, "BLOCK_N": 64, "BLOCK_K": 128, "GROUP_M": 1, "num_warps": 4, "num_stages": 4,
       "PIPE": PIPE_SPLITK_WGMMA}
splitk.split_of = lambda M, N, K, config, sms: 2
name = "fp8_gemm_splitk_wgmma_kernel"
xfn = getattr(compilable_module(splitk_wgmma, name), name)
def compile_kernel(fn, grid, args, kw):
    k = triton.compile(GluonASTSource(xfn, *splitk_wgmma.signature(cfg, 2)), target=gpu_target("sm_90"),
                       options={"num_warps": 4})
    return types.SimpleNamespace(kernel=k, function=0xF00, direct=True, flags=(0, 0), scratch_bytes=0,
                                 desc_meta=k.metadata.tensordesc_meta)
inp = make_gemm_inputs(8, 256, 512, 13, "cpu")
p = plans.build(inp.a, inp.a_s, inp.b, inp.b_s, inp.out, cfg, compile_kernel=compile_kernel)
print(json.dumps({"d": plans.native_description(p), "ptx": plans._ptx_params(p.steps[0].launcher.kernel)}))
"""


def test_a_cross_compiled_gluon_split_k_kernel_describes_its_two_descriptors():
    """PIPE 10 compiled for sm_90 by the installed Triton: its description has one parameter per
    PTX parameter (checked inside), the weights' descriptor (b, 64 x 128 fp8) then the tokens' (a,
    16 x 128), each with the 128-byte swizzle Triton chose and its tensor's shape and strides."""
    got = child_json(XC_GLUON_CHILD, drop=("TRITON_INTERPRET",))
    d = got["d"]
    assert d[:6] == [plans.NATIVE_FORMAT, 8, 256, 4 * 2 * 8 * 256, 4, 1] and d[12] == got["ptx"]
    params = d[13:]
    assert params[:13] == [4, 2, 0, 1, 3, 0, 2, 64, 128, 256, 512, 512, 1]    # fp8 as uint8 (0)
    assert params[13:21] == [0, 256, 0, 512, 2, 512, 2, 1]
    assert params[21:34] == [4, 0, 0, 1, 3, 0, 2, 16, 128, 8, 512, 512, 1]
