"""One compiled Triton kernel launched with Triton's own C launcher, the Python layers skipped.

``kernel[grid](...)`` costs tens of microseconds of host time per call: Triton binds and
specialises the arguments, looks the kernel up, builds launch metadata, asks the allocator for
global scratch and, for a kernel with host TMA descriptors (Gluon, PIPE 4-7 and 10), encodes every
descriptor again (``cuTensorMapEncodeTiled``). :class:`Launcher` does that work once, when a
launch plan is made (plan.py), and then calls the compiled kernel's C launcher directly:

- pointers go in as integers (the launcher then skips ``data_ptr()`` and its driver query);
- a host TMA descriptor is encoded once per base pointer (:meth:`Launcher.descriptor`), so a
  call re-encodes only the descriptors whose tensor moved;
- global scratch (PIPE 1-3's in-kernel descriptors) comes from the caller (workspace.py).

The C launcher's argument layout is Triton's own and changes between releases. The direct call is
used only for the layout it was written for (Triton 3.6's: ``_BASE_ARGS_FORMAT == "iiiKKppOOOOOO"``);
on any other Triton :attr:`Launcher.direct` is False and the call goes through the compiled
kernel's Python launcher (right, slower: it encodes descriptors and allocates scratch itself).
Triton's launch hooks (``knobs.runtime.launch_enter_hook``, used by profilers) are not called on
the direct path.
"""

from __future__ import annotations

DIRECT_FORMAT = "iiiKKppOOOOOO"      # Triton 3.6's C launcher: grid, stream, function, flags, scratch, metadata, hooks


def _driver_module():
    import triton.backends.nvidia.driver as drv

    return drv


def direct_layout() -> bool:
    """Whether this Triton's NVIDIA launcher has the layout the direct launch (and the ops' C++
    kernels) are written for."""
    try:
        return getattr(_driver_module(), "_BASE_ARGS_FORMAT", None) == DIRECT_FORMAT
    except ImportError:          # not an NVIDIA build of Triton
        return False


def _raw_launch(launcher):
    """The C launch function under a CudaLauncher's ``launch`` (Triton wraps it in a closure that
    encodes tensor descriptors when the kernel takes any), or None when it is not recognised."""
    fn = getattr(launcher, "launch", None)
    if fn is None:
        return None
    code = getattr(fn, "__code__", None)
    if code is None:                  # the C function itself: no descriptors to encode
        return fn
    cells = dict(zip(code.co_freevars, (c.cell_contents for c in fn.__closure__ or ())))
    raw = cells.get("launcher")
    return raw if raw is not None and getattr(raw, "__code__", None) is None else None


class _Address:
    """A device address where Triton's descriptor encoder wants a tensor (it calls data_ptr())."""

    __slots__ = ("ptr",)

    def __init__(self, ptr: int):
        self.ptr = ptr

    def data_ptr(self) -> int:
        return self.ptr


class Launcher:
    """A compiled kernel (``triton.compile`` / ``JITFunction.warmup``'s result), ready to launch."""

    def __init__(self, kernel):
        kernel._init_handles()
        self.kernel = kernel
        self.run = kernel.run                            # Triton's Python launcher (CudaLauncher)
        self.function = kernel.function
        self.metadata = kernel.packed_metadata
        self.desc_meta = getattr(kernel.metadata, "tensordesc_meta", None) or ()
        self.scratch_bytes = int(getattr(self.run, "global_scratch_size", 0) or 0) * \
            int(getattr(self.run, "num_ctas", 1) or 1)
        self.raw = _raw_launch(self.run) if direct_layout() and not getattr(self.run, "profile_scratch_size", 0) \
            else None
        self.direct = self.raw is not None
        self.flags = (int(bool(getattr(self.run, "launch_cooperative_grid", False))),
                      int(bool(getattr(self.run, "launch_pdl", False))))

    def descriptor(self, index: int, ptr: int, shape: tuple, strides: tuple) -> list:
        """The direct launch's arguments for host descriptor number ``index`` over the tensor at
        ``ptr`` (encoded now, by Triton's own ``make_tensordesc_arg``: call it once per base
        pointer and keep the result)."""
        from types import SimpleNamespace

        meta = self.desc_meta[index] if index < len(self.desc_meta) else None
        arg = SimpleNamespace(base=_Address(ptr), shape=list(shape), strides=list(strides), padding="zero")
        return list(_driver_module().make_tensordesc_arg(arg, meta))

    def __call__(self, grid: tuple, stream: int, args: tuple, scratch: int | None = None) -> None:
        """Launch on ``grid`` (3 ints) on ``stream`` (a raw CUstream). ``args``: every kernel
        parameter in order (constexprs too), pointers as ints, host descriptors already expanded
        by :meth:`descriptor` when :attr:`direct`, else as descriptor objects; ``scratch``: the
        address of ``grid size x scratch_bytes`` of global scratch when the kernel needs any."""
        g0, g1, g2 = grid
        if self.raw is not None:
            self.raw(g0, g1, g2, stream, self.function, *self.flags, scratch, None, self.metadata, None, None,
                     None, *args)
        else:
            self.run(g0, g1, g2, stream, self.function, self.metadata, None, None, None, *args)
