"""``torch.ops.occtune.fp8_gemm``: the FP8 block-scaled GEMM as a torch operator.

Importing this module defines two ops (``torch.library.Library``: the schema, ``fp8_gemm`` as the
CUDA kernel and, for the interpreter's tests, the CPU one, and a fake implementation that gives
the output's shape and dtype), so that ``torch.compile(fullgraph=True)`` traces a call as one node
and a captured CUDA graph holds its launches::

    import occtune.kernels.fp8_gemm.op  # noqa: F401  (registers the ops)
    c = torch.ops.occtune.fp8_gemm(a, a_s, b, b_s)                     # bf16 [M, N]
    torch.ops.occtune.fp8_gemm_out(a, a_s, b, b_s, c)                  # into the caller's buffer
    c = torch.ops.occtune.fp8_gemm(a, a_s, b, b_s, [16, 64, 128, 1, 4, 4, 8])   # a config

``config``: the Triton axes' values in config.TRITON_KEYS order (a profile row), or None for
``fp8_gemm.default_config``. The ops are defined with ``Library.define``/``impl`` rather than
``torch.library.custom_op``, whose Python wrapper layers cost tens of microseconds of host time
per eager call; here the dispatcher calls the launch plan directly. fp8 inputs: nothing to
differentiate.

On a GPU machine with a C++ compiler the ops' CUDA kernels are C++ (``op_native.cpp``, built once
for the torch in use): a repeated call of a known plan costs the dispatcher, the output's
allocation and the launches, with no Python, at every PIPE (PIPE 4-7 and 10's host TMA
descriptors are encoded in C++, through the driver's cuTensorMapEncodeTiled, again only when a
tensor moved); the first call of a plan and captured calls run the Python kernel (``_run``).
``fp8_gemm()`` itself calls these ops on a GPU where the C++ kernels are in use (its first GPU
call imports this module), so the plain function costs what the op costs.
``native_error()`` says why the C++ kernels are not in use where they are not
(``OCCTUNE_NATIVE_OP=0`` turns them off).
"""

from __future__ import annotations

from pathlib import Path

import torch

from occtune.build import native, rtc
from occtune.kernels import fp8_gemm as family_api
from occtune.kernels.fp8_gemm import _run, plan as plans
from occtune.kernels.fp8_gemm.launcher import direct_layout

SCHEMA = "fp8_gemm(Tensor a, Tensor a_s, Tensor b, Tensor b_s, int[]? config=None) -> Tensor"
SCHEMA_OUT = "fp8_gemm_out(Tensor a, Tensor a_s, Tensor b, Tensor b_s, Tensor(a!) out, int[]? config=None) -> ()"

_LIB = torch.library.Library("occtune", "FRAGMENT")      # kept alive: the ops live as long as the module
_LIB.define(SCHEMA, tags=(torch.Tag.pt2_compliant_tag,))
_LIB.define(SCHEMA_OUT, tags=(torch.Tag.pt2_compliant_tag,))


def fp8_gemm_op(a, a_s, b, b_s, config=None):
    return _run(a, a_s, b, b_s, None if config is None else tuple(config))


def fp8_gemm_out_op(a, a_s, b, b_s, out, config=None):
    _run(a, a_s, b, b_s, None if config is None else tuple(config), out=out)


def describe_op(a, a_s, b, b_s, config=None, out=None) -> list[int]:
    """The plan of a call (made already by the Python kernel) as the C++ kernels launch it."""
    p = plans.PLANS.get(plans.plan_key(None if config is None else tuple(config), a, a_s, b, b_s, out))
    return [] if p is None else plans.native_description(p)


def _load_native() -> str | None:
    """Load ``op_native.cpp`` (built once) as the ops' CUDA kernels; None when in use, else why not."""
    why = native.load_op_library(NATIVE_SOURCE, "_fp8_gemm_native_init")
    if why is None:
        encode = rtc.driver_function_address("cuTensorMapEncodeTiled")
        if encode is not None and not getattr(torch.version, "hip", None):
            torch.ops.occtune._fp8_gemm_native_tma(encode)      # else PIPE 4-7 and 10 plans run in Python
        _LIB.impl("_fp8_gemm_py", fp8_gemm_op, "CUDA")
        _LIB.impl("_fp8_gemm_out_py", fp8_gemm_out_op, "CUDA")
        _LIB.impl("_fp8_gemm_describe", describe_op, "CUDA")
        if encode is not None and not getattr(torch.version, "hip", None) and direct_layout():
            # the C++ kernels launch every PIPE's plans here: fp8_gemm() takes this way too
            family_api._ROUTE["cuda"] = (torch.ops.occtune.fp8_gemm.default, torch.ops.occtune.fp8_gemm_out.default)
    return why


NATIVE_SOURCE = Path(__file__).with_name("op_native.cpp")
_NATIVE_ERROR = _load_native()
for _name in ("fp8_gemm", "fp8_gemm_out"):      # fp8 in, nothing to differentiate: no grad_fn on the output
    _LIB.impl(_name, torch.library.fallthrough_kernel, "Autograd")
for _key in ("CUDA", "CPU") if _NATIVE_ERROR is not None else ("CPU",):
    _LIB.impl("fp8_gemm", fp8_gemm_op, _key)
    _LIB.impl("fp8_gemm_out", fp8_gemm_out_op, _key)


def native_error() -> str | None:
    """Why the ops' CUDA kernels are Python's (None: the C++ ones of ``op_native.cpp`` are in use)."""
    return _NATIVE_ERROR


def _check_fake(a, b):
    torch._check(a.dim() == 2 and b.dim() == 2, lambda: "a and b must be 2-D ([M, K] and [N, K])")
    torch._check(a.shape[1] == b.shape[1], lambda: f"a and b must share K, got {a.shape[1]} and {b.shape[1]}")


@torch.library.register_fake("occtune::fp8_gemm", lib=_LIB)
def _fp8_gemm_fake(a, a_s, b, b_s, config=None):
    _check_fake(a, b)
    return a.new_empty((a.shape[0], b.shape[0]), dtype=torch.bfloat16)


@torch.library.register_fake("occtune::fp8_gemm_out", lib=_LIB)
def _fp8_gemm_out_fake(a, a_s, b, b_s, out, config=None):
    _check_fake(a, b)
