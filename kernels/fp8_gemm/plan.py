"""Launch plans: the host work of an FP8 GEMM call, done once per (config, shapes, strides, dtypes,
devices), so that a repeated call costs a dictionary lookup, a few ``data_ptr()`` and the launch.

The first call of a key checks the arguments (``__init__._check``), resolves and validates the
config for the device's target, compiles (or finds) the kernels, and builds a :class:`Plan`: per
launch a :class:`~.launcher.Launcher`, its grid and its argument list with the tensors' slots
marked. A later call with the same key:

- fills the slots with the tensors' addresses and launches through the C launcher, on the current
  stream (a call whose pointers are not 16-byte aligned, which the compiled kernel assumes, goes
  through Triton's own launcher instead, ``kernel.launch``, which specialises again);
- re-encodes a host TMA descriptor (PIPE 4-7, 10) only when its tensor's address changed;
- takes split-K partials and Triton's global scratch from workspace.py (no allocation per call,
  except the output when the caller passes no ``out=``).

No target detection, YAML or config validation runs on a repeated call. Under ``TRITON_INTERPRET=1``
a plan launches through the interpreter (Triton's JIT path), with the same keys and slots.
"""

from __future__ import annotations

from . import workspace
from .config import PIPES_DEVICE_TMA, PIPES_ONE_PASS

PLANS: dict = {}           # plan_key -> Plan (fp8_gemm looks a call up here)
_TORCH: list = []          # the torch module, once a plan was built (no import statement per call)
ROLES = ("a", "a_s", "b", "b_s", "out", "ws", "cnt")    # what fills a tensor slot of a launch's arguments


def plan_key(config, a, a_s, b, b_s, out) -> tuple:
    """What decides a plan: the config (a dict, or a sequence of the Triton axes' values) and every
    tensor's shape, strides, dtype and device (``out``'s too when given), and whether one tensor is
    both ``a`` and ``b`` (or ``a_s`` and ``b_s``): a plan's pointer slots are filled by the tensor
    (``build``), so an aliased call's plan fills both from one. Raises TypeError or
    AttributeError when an argument is not a tensor or the config is not hashable."""
    cfg = None if config is None else tuple(config.items()) if isinstance(config, dict) else tuple(config)
    o = None if out is None else (out.shape, out.stride(), out.dtype, out.get_device())
    key = (cfg, a.shape, a.stride(), a.dtype, a.get_device(), a_s.shape, a_s.stride(), a_s.dtype, a_s.get_device(),
           b.shape, b.stride(), b.dtype, b.get_device(), b_s.shape, b_s.stride(), b_s.dtype, b_s.get_device(), o,
           a is b, a_s is b_s)      # one tensor in two roles: its plan's slots follow the tensor (build)
    hash(key)
    return key


def cached(key):
    return PLANS.get(key)


def clear_plans() -> None:
    """Forget every plan (the next call of each key plans again) and the kept workspaces, and those
    of the ops' C++ kernels (op.py) where they are loaded."""
    import sys

    from . import workspace

    PLANS.clear()
    workspace.clear()
    op = sys.modules.get("occtune.kernels.fp8_gemm.op")
    if op is not None and op.native_error() is None:
        import torch

        torch.ops.occtune._fp8_gemm_native_clear()


class Step:
    """One launch of a plan: the launcher (None: through Triton's JIT, under the interpreter), its
    grid, and its arguments as a head of tensor slots (the role filling each one: ROLES' index)
    followed by a constant tail. ``descs``: the head positions that hold host TMA descriptors
    (PIPE 4-7, 10), with the descriptor objects made at plan time (their block shape and layout)."""

    __slots__ = ("launcher", "fn", "grid", "roles", "head", "tail", "kwargs", "descs", "scratch")

    def __init__(self, launcher, fn, grid, roles, tail, kwargs, descs):
        from operator import itemgetter

        self.launcher, self.fn, self.grid, self.roles, self.tail = launcher, fn, grid, roles, tail
        self.head = itemgetter(*roles) if len(roles) > 1 else (lambda p, r=roles[0]: (p[r],))
        self.kwargs, self.descs = kwargs, descs
        self.scratch = bool(launcher is not None and launcher.scratch_bytes)

    def desc_index(self, j: int) -> int:
        """The number of host descriptors before head position ``j``: its index in the compiled
        kernel's ``tensordesc_meta``."""
        return sum(k < j for k in self.descs)


class Plan:
    """The launches of one key (see the module docstring); call it with the tensors."""

    def __init__(self, config: dict, device, M: int, N: int, steps: list, ws_bytes: int, cnt_numel: int,
                 fast: bool, cnt_for_graphs=None):
        self.config, self.device, self.index = config, device, device.index
        self.out_shape = (M, N)
        self.steps, self.fast = steps, fast
        scratch = max((s.launcher.scratch_bytes * _size(s.grid) for s in steps if s.scratch), default=0)
        self.ws_bytes, self.need, self.cnt_numel = ws_bytes, max(ws_bytes, scratch), cnt_numel
        self.cnt_for_graphs = cnt_for_graphs      # PIPE 9's zeroed tickets for captured calls (workspace.counters)
        self._last = {}           # (step, head position) -> (address, the descriptor's launch arguments)

    def new_output(self):
        """A bf16 tensor for the call's result (torch's caching allocator, on the current stream)."""
        torch = _TORCH[0]
        return torch.empty(self.out_shape, dtype=torch.bfloat16, device=self.device)

    def __call__(self, a, a_s, b, b_s, out) -> None:
        ptrs = (a.data_ptr(), a_s.data_ptr(), b.data_ptr(), b_s.data_ptr(), out.data_ptr())
        if not self.fast or (ptrs[0] | ptrs[1] | ptrs[2] | ptrs[3] | ptrs[4]) & 15:
            return self._through_jit(a, a_s, b, b_s, out)        # the kernels assume 16-byte alignment
        stream = current_stream(self.index)
        ws = cnt = 0
        keep = None
        if self.need:
            ws, keep = workspace.scratch(self.device, stream, self.need)
            if self.cnt_numel:
                cnt, keep = workspace.counters(self.device, stream, self.cnt_numel, self.cnt_for_graphs, keep)
        ptrs += (ws, cnt)
        for i, s in enumerate(self.steps):
            args = self._with_descriptors(i, s, ptrs, (a, a_s, b, b_s, out)) if s.descs else s.head(ptrs) + s.tail
            s.launcher(s.grid, stream, args, ws if s.scratch else None)
        del keep

    def _with_descriptors(self, i: int, s: Step, ptrs: tuple, tensors: tuple) -> tuple:
        head = []
        for j, r in enumerate(s.roles):
            if j in s.descs:
                head.extend(self._descriptor(i, j, s.descs[j], s.launcher, ptrs[r], tensors[r]))
            else:
                head.append(ptrs[r])
        return tuple(head) + s.tail

    def _descriptor(self, i: int, j: int, desc, launcher, ptr: int, t) -> list:
        """Head position ``j`` of step ``i``, a TMA descriptor: encoded again only when its tensor
        moved (``desc``: the plan-time descriptor, for its block shape and layout)."""
        last = self._last.get((i, j))
        if last is None or last[0] != ptr:
            if launcher.direct:
                enc = launcher.descriptor(self.steps[i].desc_index(j), ptr, tuple(t.shape), t.stride())
            else:
                enc = [type(desc)(t, list(t.shape), list(t.stride()), desc.block_shape, desc.layout)]
            last = self._last[(i, j)] = (ptr, enc)
        return last[1]

    def _through_jit(self, a, a_s, b, b_s, out) -> None:
        """The launches through ``fn[grid](...)`` with tensors: under the interpreter, and for a
        call whose pointers are not 16-byte aligned (Triton specialises it again)."""
        if self.fast:
            from .kernel import launch

            return launch(a, a_s, b, b_s, out, self.config)
        torch = _TORCH[0]
        tensors = [a, a_s, b, b_s, out, None, None]
        if self.ws_bytes:
            tensors[5] = torch.empty(self.ws_bytes // 4, dtype=torch.float32, device=self.device)
        if self.cnt_numel:
            tensors[6] = torch.zeros(self.cnt_numel, dtype=torch.int32, device=self.device)
        for s in self.steps:
            s.fn[s.grid](*[tensors[r] for r in s.roles], *s.tail, **s.kwargs)


def current_stream(index: int) -> int:
    """The raw CUstream torch launches on for device ``index`` (what Triton's launcher uses)."""
    return _TORCH[0]._C._cuda_getCurrentRawStream(index)


NATIVE_FORMAT = 2          # the layout of native_description (op_native.cpp's FORMAT)
TENSOR_MAP = 4             # plan_launch.h's kind of a host TMA descriptor parameter


def native_description(p: Plan) -> list[int]:
    """``p`` as op_native.cpp's C++ kernels of the ops launch it: FORMAT, M, N, workspace bytes,
    ticket ints, then its launches as ``occtune/build/plan_launch.h`` reads them (their number; per
    launch the CUfunction, grid x, y, z, block, dynamic shared bytes, parameter count and each
    parameter as (kind, value): 0 a 32-bit int, 1 the pointer of ROLES[value], 2 a 64-bit int,
    3 a null pointer, 4 a host TMA descriptor over ROLES[value], followed by its record
    (:func:`_tensor_map`)). The workspace bytes cover the split-K partials and Triton's global
    scratch (PIPE 1-3's in-kernel descriptors), which share one buffer as in ``Plan.__call__``.
    ``[]`` where a launch is not one the C++ kernel can make (Python runs every call of the plan
    then): a launcher other than Triton 3.6's direct one, clusters, a descriptor Triton did not
    lower to a CUtensorMap, or a parameter list that does not match the kernel's PTX."""
    if not p.fast or not p.steps:
        return []
    d = [NATIVE_FORMAT, *p.out_shape, p.need, p.cnt_numel, len(p.steps)]
    for s in p.steps:
        launch = _native_launch(s)
        if launch is None:
            return []
        d += launch
    return d


def _native_launch(s: Step) -> list[int] | None:
    """One step as plan_launch.h's launch, or None (see native_description)."""
    L = s.launcher
    if not getattr(L, "direct", False) or any(L.flags):
        return None
    k = L.kernel
    meta, sig = k.metadata, getattr(k.src, "signature", None)
    if getattr(meta, "num_ctas", 1) != 1 or not isinstance(sig, dict):
        return None
    params, count = [], 0
    for j, name in enumerate(s.fn.arg_names):
        ty = sig.get(name)
        value = s.roles[j] if j < len(s.roles) else s.tail[j - len(s.roles)]
        if ty == "constexpr":
            continue
        if j in s.descs:
            rec = _tensor_map(L, s.desc_index(j), s.descs[j], value)
            if rec is None:
                return None
            params += rec[0]
            count += rec[1]
            continue
        if str(ty).startswith("*") and j < len(s.roles):
            params += [1, value]
        elif ty == "i32" and isinstance(value, int):
            params += [0, int(value)]
        elif ty == "i64" and isinstance(value, int):
            params += [2, int(value)]
        else:
            return None
        count += 1
    # Triton's global scratch (PIPE 1-3's in-kernel descriptors: the call's workspace, as __call__
    # passes it) and profile scratch (none)
    params += [1, ROLES.index("ws"), 3, 0] if s.scratch else [3, 0, 3, 0]
    count += 2
    if _ptx_params(k) != count:
        return None
    return [int(L.function), *s.grid, 32 * int(meta.num_warps), int(meta.shared), count, *params]


def _tensor_map(L, index: int, desc, role: int) -> tuple[list[int], int] | None:
    """Host descriptor number ``index`` of a launch over ROLES[role], as Triton 3.6's launcher
    expands it (``make_tensordesc_arg``: the CUtensorMap, then the shape as 32-bit and the strides
    as 64-bit ints): (its parameters, their number), or None where Triton did not lower it to a
    CUtensorMap. The CUtensorMap's record: CUtensorMapDataType, element bytes, swizzle, padding
    (1: NaN), rank, block, shape, strides (elements), what plan_launch.h's TensorMap encodes."""
    meta = L.desc_meta[index] if index < len(L.desc_meta) else None
    if not meta or meta.get("fp4_padded"):
        return None
    from triton.backends.nvidia.driver import TMA_DTYPE_DEVICE_TO_HOST

    shape, strides, block = list(desc.shape), list(desc.strides), list(meta["block_size"])
    if len(block) != len(shape) or strides[-1] != 1:
        return None
    nan = int(getattr(desc, "padding", "zero") == "nan")
    rec = [TENSOR_MAP, role, TMA_DTYPE_DEVICE_TO_HOST[meta["elem_type"]], meta["elem_size"], meta["swizzle"], nan,
           len(shape), *block, *shape, *strides]
    for v in shape:
        rec += [0, int(v)]
    for v in strides:
        rec += [2, int(v)]
    return rec, 1 + 2 * len(shape)


def _ptx_params(kernel) -> int:
    """The number of parameters of the kernel's PTX entry (-1 where there is no PTX)."""
    import re

    ptx = (getattr(kernel, "asm", None) or {}).get("ptx")
    m = re.search(r"\.entry\s+\w+\s*\(([^)]*)\)", ptx or "")
    return len(re.findall(r"\.param\b", m.group(1))) if m else -1


def _size(grid) -> int:
    n = 1
    for g in grid:
        n *= g
    return n


def build(a, a_s, b, b_s, out, config: dict, compile_kernel=None) -> Plan:
    """The plan of a checked call (``out``: the call's output or a stand-in of its shape); the
    kernels are compiled here (``compile_kernel(fn, grid, args, kwargs)`` -> a Launcher: Triton's
    by default; a test passes its own, which makes the plan launch through it on any device)."""
    import os

    import torch

    from . import splitk
    from .kernel import launches, split_of

    _TORCH[:] = [torch]
    M, K = a.shape
    N = b.shape[0]
    fast = compile_kernel is not None or (a.device.type == "cuda"
                                          and os.environ.get("TRITON_INTERPRET", "0") in ("", "0"))
    if M == 0 or N == 0:
        return Plan(config, a.device, M, N, [], 0, 0, fast)
    if fast and config.get("PIPE", 0) in PIPES_DEVICE_TMA:
        from .kernel import _use_scratch

        _use_scratch()          # Triton's own launcher (not the direct one) allocates PIPE 1-3's scratch
    split = split_of(M, N, K, config, a.device)
    ws_numel = splitk.workspace_numel(M, N, split)
    cnt_numel = splitk.tiles(M, N, config) if ws_numel and config["PIPE"] in PIPES_ONE_PASS else 0
    ws = torch.empty(ws_numel, dtype=torch.float32, device=a.device) if ws_numel else None
    cnt = torch.zeros(cnt_numel, dtype=torch.int32, device=a.device) if cnt_numel else None
    roles = {id(t): r for r, t in enumerate((a, a_s, b, b_s, out, ws, cnt)) if t is not None}
    compile_kernel = compile_kernel or _compile
    steps = []
    for fn, grid, args, kw in launches(a, a_s, b, b_s, out, config, ws, cnt):
        grid = tuple(grid) + (1,) * (3 - len(grid))
        head = _head(args, roles)
        descs = {j: x for j, x in enumerate(args[:len(head)]) if hasattr(x, "block_shape")}
        launcher = compile_kernel(fn, grid, args, kw) if fast else None
        tail = _full_args(fn, args, kw)[len(head):] if fast else tuple(args[len(head):])
        steps.append(Step(launcher, fn, grid, head, tail, kw, descs))
    graphs = cnt if cnt is not None and not workspace.capturing(a.device) else None
    return Plan(config, a.device, M, N, steps, 4 * ws_numel, cnt_numel, fast, graphs)


def _head(args: tuple, roles: dict) -> tuple:
    """The roles of the leading tensor (or descriptor) arguments; none may follow them."""
    import torch

    head = []
    for x in args:
        t = x.base if hasattr(x, "block_shape") else x
        if not isinstance(t, torch.Tensor):
            break
        head.append(roles[id(t)])
    if any(isinstance(x, torch.Tensor) or hasattr(x, "block_shape") for x in args[len(head):]):
        raise AssertionError("a kernel's tensor arguments must lead its argument list")
    return tuple(head)


def _full_args(fn, args: tuple, kw: dict) -> tuple:
    """Every parameter of ``fn`` in order, constexprs included: what Triton's launcher takes."""
    named = dict(zip(fn.arg_names, args))
    named.update({k: v for k, v in kw.items() if k in fn.arg_names})
    return tuple(named[n] for n in fn.arg_names)


def _compile(fn, grid, args, kw):
    from .launcher import Launcher

    return Launcher(fn.warmup(*args, grid=grid, **kw))
