"""``torch.ops.occtune.topk``: the top-k launcher as a torch operator.

Importing this module defines the op (``torch.library.Library``: the schema, the launcher as its
CUDA kernel, and a fake implementation that gives the output's shape and dtype), so that
``torch.compile(fullgraph=True)`` traces it as one node and a captured CUDA graph holds its
launches; the plain function ``occtune.kernels.topk.topk`` stays::

    import occtune.kernels.topk.op  # noqa: F401  (registers torch.ops.occtune.topk)
    idx = torch.ops.occtune.topk(scores, 2048)          # int32 [B, 2048]

``lds_budget``/``threads``/``bits`` left as None take ``topk``'s own defaults. The op is defined
with ``Library.define``/``impl`` rather than ``torch.library.custom_op``, whose Python wrapper
layers (autograd, aliasing checks) cost tens of microseconds of host time per eager call; here
the dispatcher calls the launcher directly. Its output is int32 indices: nothing to differentiate.

On a GPU machine with a C++ compiler the op's CUDA kernel is C++ (``op_native.cpp``, built once
for the torch in use and cached like the other native code, about 20 s the first time): a
repeated call of a known plan costs the dispatcher, the output's allocation and the launches,
with no Python. The first call of each plan, captured calls and calls with a page table or
offsets still run ``tk.topk`` (Python). ``native_error()`` says why the C++ kernel is not in use
where it is not (``OCCTUNE_NATIVE_OP=0`` turns it off).
"""

from __future__ import annotations

from pathlib import Path

import torch

from occtune.build import native
from occtune.kernels import topk as tk
from occtune.kernels.topk import runtime

SCHEMA = ("topk(Tensor scores, SymInt k=2048, Tensor? lengths=None, Tensor? row_starts=None, "
          "SymInt? lds_budget=None, SymInt? threads=None, SymInt? bits=None, Tensor? page_table=None, "
          "SymInt page_bits=0, Tensor? offsets=None) -> Tensor")

_LIB = torch.library.Library("occtune", "DEF")      # kept alive: the op lives as long as the module
_LIB.define(SCHEMA, tags=(torch.Tag.pt2_compliant_tag,))
NATIVE_SOURCE = Path(__file__).with_name("op_native.cpp")


def _config(lds_budget, threads, bits) -> dict:
    return {name: v for name, v in (("lds_budget", lds_budget), ("threads", threads), ("bits", bits)) if v is not None}


def topk_op(scores, k=2048, lengths=None, row_starts=None, lds_budget=None, threads=None, bits=None,
            page_table=None, page_bits=0, offsets=None):
    """The op's kernel in Python: ``tk.topk`` with the config left unset where None."""
    return tk.topk(scores, k, lengths, row_starts, page_table=page_table, page_bits=page_bits,
                   offsets=offsets, **_config(lds_budget, threads, bits))


def describe_op(scores, k, lengths, row_starts, lds_budget, threads, bits) -> list[int]:
    """The plan of a call (made already by ``topk_op``) as the C++ kernel launches it."""
    plan = tk.plan_for(scores, k, lengths, row_starts, **_config(lds_budget, threads, bits))
    return runtime.native_description(plan)


def _load_native() -> str | None:
    """Load ``op_native.cpp`` (built once) as the op's CUDA kernel; None when it is in use, else why
    not (then ``topk_op`` is)."""
    why = native.load_op_library(NATIVE_SOURCE, "_topk_native_init")
    if why is None:
        _LIB.impl("_topk_py", topk_op, "CUDA")
        _LIB.impl("_topk_describe", describe_op, "CUDA")
    return why


_NATIVE_ERROR = _load_native()
if _NATIVE_ERROR is not None:
    _LIB.impl("topk", topk_op, "CUDA")


def native_error() -> str | None:
    """Why the op's CUDA kernel is Python's (None: the C++ one of ``op_native.cpp`` is in use)."""
    return _NATIVE_ERROR


@torch.library.register_fake("occtune::topk", lib=_LIB)
def _topk_fake(scores, k=2048, lengths=None, row_starts=None, lds_budget=None, threads=None, bits=None,
               page_table=None, page_bits=0, offsets=None):
    torch._check(scores.dim() == 2, lambda: f"scores must be [B, L], got {scores.dim()} dimensions")
    torch._check(scores.dtype == torch.float32, lambda: f"scores must be float32, got {scores.dtype}")
    torch._check(1 <= k <= tk.MAX_K, lambda: f"k must be between 1 and {tk.MAX_K}, got {k}")
    return scores.new_empty((scores.shape[0], k), dtype=torch.int32)
