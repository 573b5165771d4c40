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
"""

from __future__ import annotations

import torch

from occtune.kernels import topk as tk

SCHEMA = ("topk(Tensor scores, SymInt k=2048, Tensor? lengths=None, Tensor? row_starts=None, "
          "SymInt? lds_budget=None, SymInt? threads=None, SymInt? bits=None, Tensor? page_table=None, "
          "SymInt page_bits=0, Tensor? offsets=None) -> Tensor")

_LIB = torch.library.Library("occtune", "DEF")      # kept alive: the op lives as long as the module
_LIB.define(SCHEMA, tags=(torch.Tag.pt2_compliant_tag,))


def topk_op(scores, k=2048, lengths=None, row_starts=None, lds_budget=None, threads=None, bits=None,
            page_table=None, page_bits=0, offsets=None):
    """The op's CUDA kernel: ``tk.topk`` with the config left unset where None."""
    config = {} if lds_budget is None and threads is None and bits is None else {
        name: v for name, v in (("lds_budget", lds_budget), ("threads", threads), ("bits", bits)) if v is not None}
    return tk.topk(scores, k, lengths, row_starts, page_table=page_table, page_bits=page_bits,
                   offsets=offsets, **config)


_LIB.impl("topk", topk_op, "CUDA")


@torch.library.register_fake("occtune::topk", lib=_LIB)
def _topk_fake(scores, k=2048, lengths=None, row_starts=None, lds_budget=None, threads=None, bits=None,
               page_table=None, page_bits=0, offsets=None):
    torch._check(scores.dim() == 2, lambda: f"scores must be [B, L], got {scores.dim()} dimensions")
    torch._check(scores.dtype == torch.float32, lambda: f"scores must be float32, got {scores.dtype}")
    torch._check(1 <= k <= tk.MAX_K, lambda: f"k must be between 1 and {tk.MAX_K}, got {k}")
    return scores.new_empty((scores.shape[0], k), dtype=torch.int32)
