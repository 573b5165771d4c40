"""``torch.ops.occtune.topk``: the top-k launcher as a torch custom op.

Importing this module registers the op (``torch.library.custom_op``) with a fake implementation
that gives the output's shape and dtype, so that ``torch.compile(fullgraph=True)`` traces it as
one node, and the real implementation is ``occtune.kernels.topk.topk`` (capturable in a CUDA
graph, like the plain function, which stays the fastest eager entry point)::

    import occtune.kernels.topk.op  # noqa: F401  (registers torch.ops.occtune.topk)
    idx = torch.ops.occtune.topk(scores, 2048)          # int32 [B, 2048]

``lds_budget``/``threads``/``bits`` left as None take ``topk``'s own defaults.
"""

from __future__ import annotations

from typing import Optional

import torch

from occtune.kernels import topk as tk


@torch.library.custom_op("occtune::topk", mutates_args=(), device_types="cuda")
def topk_op(scores: torch.Tensor, k: int = 2048, lengths: Optional[torch.Tensor] = None,
            row_starts: Optional[torch.Tensor] = None, lds_budget: Optional[int] = None,
            threads: Optional[int] = None, bits: Optional[int] = None,
            page_table: Optional[torch.Tensor] = None, page_bits: int = 0,
            offsets: Optional[torch.Tensor] = None) -> torch.Tensor:
    config = {name: v for name, v in (("lds_budget", lds_budget), ("threads", threads), ("bits", bits))
              if v is not None}
    return tk.topk(scores, k, lengths, row_starts, page_table=page_table, page_bits=page_bits,
                   offsets=offsets, **config)


@topk_op.register_fake
def _topk_fake(scores, k=2048, lengths=None, row_starts=None, lds_budget=None, threads=None, bits=None,
               page_table=None, page_bits=0, offsets=None):
    torch._check(scores.dim() == 2, lambda: f"scores must be [B, L], got {scores.dim()} dimensions")
    torch._check(scores.dtype == torch.float32, lambda: f"scores must be float32, got {scores.dtype}")
    torch._check(1 <= k <= tk.MAX_K, lambda: f"k must be between 1 and {tk.MAX_K}, got {k}")
    return scores.new_empty((scores.shape[0], k), dtype=torch.int32)
