"""CPU tests of the serving path of the top-k launcher (no GPU): the argument packs, the launch
plan per shape (what is packed, when it is re-packed, grid/block/shared memory per path) through
a faked device and a faked driver API, the torch fallback, and the fake implementation of
torch.ops.occtune.topk under FakeTensorMode and torch.compile."""

from __future__ import annotations

import ctypes
import types

import pytest

torch = pytest.importorskip("torch")

from occtune.build import rtc  # noqa: E402
from occtune.errors import UserError  # noqa: E402
from occtune.kernels import topk as tk  # noqa: E402
from occtune.kernels.topk import runtime as rt  # noqa: E402
from occtune.build.rtc import ArgPack, Ptr  # noqa: E402
from doubles import fake_sms  # noqa: E402

K = 2048
STREAM = 0x5157


def _read_params(address, template):
    """The values a driver reads through a ``void**`` argument array of this template."""
    arr = (ctypes.c_void_p * len(template)).from_address(address)
    return [(ctypes.c_void_p.from_address(arr[i]).value or 0) if isinstance(t, Ptr)
            else ctypes.c_int.from_address(arr[i]).value for i, t in enumerate(template)]


def test_argpack_packs_ints_once_and_binds_pointers():
    pack = ArgPack([Ptr(1), 7, -3, Ptr(0), Ptr(1), 1 << 20, True])
    assert _read_params(pack.address, pack.template) == [0, 7, -3, 0, 0, 1 << 20, 1]
    address = pack.address
    pack.bind((0x1000, 0xDEAD0000))
    assert _read_params(pack.address, pack.template) == [0xDEAD0000, 7, -3, 0x1000, 0xDEAD0000, 1 << 20, 1]
    pack.bind((0x2000, 0xBEEF0000))
    assert pack.address == address                   # the same array, rewritten in place
    assert pack.packed() == [0xBEEF0000, 7, -3, 0x2000, 0xBEEF0000, 1 << 20, 1]
    assert pack.values(("a", "b")) == ["b", 7, -3, "a", "b", 1 << 20, True]
    with pytest.raises(UserError, match="32-bit"):
        ArgPack([Ptr(0), 1 << 31])


class FakeDriver:
    """cuda.bindings.driver as far as the launcher uses it; records every launch."""

    class CUresult:
        CUDA_SUCCESS = 0

    def __init__(self):
        self.launches = []

    @staticmethod
    def CUfunction(addr):
        return ("CUfunction", addr)

    @staticmethod
    def CUstream(raw):
        return ("CUstream", raw)

    def cuLaunchKernel(self, f, gx, gy, gz, bx, by, bz, smem, stream, params, extra):
        self.launches.append({"f": f, "grid": (gx, gy, gz), "block": (bx, by, bz), "smem": smem,
                              "stream": stream, "params": params, "extra": extra})
        return (self.results.pop(0) if getattr(self, "results", None) else self.CUresult.CUDA_SUCCESS,)

    def cuDeviceGet(self, index):
        return self.CUresult.CUDA_SUCCESS, ("device", index)

    def cuDevicePrimaryCtxRetain(self, dev):
        return self.CUresult.CUDA_SUCCESS, ("primary", dev)

    def cuCtxSetCurrent(self, ctx):
        self.current = ctx
        return (self.CUresult.CUDA_SUCCESS,)


@pytest.fixture
def fake_gpu(monkeypatch):
    """132 SMs, 2 blocks/SM, plenty of resident clusters, cuda-python's driver API faked."""
    driver = FakeDriver()
    fake_sms(monkeypatch)
    monkeypatch.setattr(rtc, "occupancy_query", lambda h, thr, smem: 2)
    monkeypatch.setattr(rtc, "max_active_clusters", lambda h, grid, thr, smem: 1000)
    monkeypatch.setattr(rtc, "_driver_api", lambda: ("cuda-python", driver))
    monkeypatch.setattr(torch._C, "_cuda_getCurrentRawStream", lambda idx: STREAM, raising=False)
    clusters = {}

    def cluster_handle(handle, S, budget, threads, bits, dev, regs=0, block=0):
        extra = {"TOPK_CLUSTER": S, **({"TOPK_CLUSTER_REGS": regs} if regs else {}),
                 **({"TOPK_THREADS": block} if block else {})}
        return clusters.setdefault((S, regs, block), _kernel(tk.CLUSTER_KERNEL_NAME, {**handle.defines, **extra},
                                                             handle.dynamic_smem, 0x3000 + S + 0x100 * regs + block))
    monkeypatch.setattr(rt, "_cluster_handle", cluster_handle)
    resident = {}

    def resident_handle(handle, budget, threads, bits, dev):
        return resident.setdefault(0, _kernel(tk.RESIDENT_KERNEL_NAME, {**handle.defines, "TOPK_RESIDENT": 1},
                                              handle.dynamic_smem, 0x4000))
    monkeypatch.setattr(rt, "_resident_handle", resident_handle)
    tk.clear_plans()
    yield driver
    tk.clear_plans()


def _kernel(name, defines, smem, func_addr, launcher=None):
    """An RtcKernel as compile_kernel makes it, around a fake loaded function."""
    kern = types.SimpleNamespace(func=ctypes.c_void_p(func_addr))
    h = rtc.RtcKernel(kern, name, "90", dict(defines), [], 0.0, smem)
    h.launcher, h.fn = rtc.driver_function(kern) if launcher is None else (launcher, None)
    return h


def _main(budget=49152, threads=512, bits=12):
    return _kernel(tk.KERNEL_NAME, tk.defines(budget, threads, bits), budget, 0x1000)


def _split(threads=512, bits=12):
    return _kernel(tk.SPLIT_KERNEL_NAME, tk.defines(49152, threads, bits), 0, 0x2000)


def _decoded(driver, plan):
    """Per launch of the last call: (function, grid, block, smem, stream, what the driver read)."""
    templates = {pack.address: pack.template for *_, pack in plan.launches}
    got = driver.launches[-len(plan.launches):]
    return [(g["f"], g["grid"], g["block"], g["smem"], g["stream"], _read_params(g["params"], templates[g["params"]]))
            for g in got]


def test_one_block_path_packs_the_rows_output_and_placeholders(fake_gpu):
    main = _main()
    x = torch.zeros(4, 8192)
    out = tk.topk(x, K, kernel=main, resident=False)
    plan = tk.plan_for(x, K, kernel=main, resident=False)
    assert main.launcher == "cuda-python"
    (f, grid, block, smem, stream, params), = _decoded(fake_gpu, plan)
    assert f == ("CUfunction", 0x1000) and grid == (4, 1, 1) and block == (512, 1, 1) and smem == 49152
    assert stream == ("CUstream", STREAM)
    d, sink = plan.dummy.data_ptr(), plan.sink.data_ptr()
    #           scores        stride L     lengths  starts  K  out             mode table tstr pbits bins
    assert params == [x.data_ptr(), 8192, 8192, d, 0, d, 0, K, out.data_ptr(), 0, d, 0, 0, sink,
                      d, 0, 0, d, 0]            # no scratch list, no split record, presplit 0
    assert plan.scratch_numel == 0 and plan.ws_numel == 0 and (plan.nsplit, plan.ncluster) == (1, 0)


def test_resident_paths_one_launch_and_a_workspace_per_stream(fake_gpu, monkeypatch):
    """Rows that fit one block's budget: one block a row (the candidate list after the slice, no
    workspace), where rows are 16-byte aligned; the two-pass kernel for an odd row stride unless
    asked. Rows over several blocks: one launch of B x parts blocks and the plan's workspace, the
    same on every call of a stream (zeroed once: each call leaves it so), another stream's its own."""
    main = _main()
    odd = torch.zeros(4, 8193)[:, :8192]
    assert tk.plan_for(odd, K, kernel=main).nresident == 0
    assert tk.plan_for(odd, K, kernel=main, resident=True).nresident == 1
    x = torch.zeros(64, 8192)          # 64 rows: too many for sm_90's short-row clusters
    out = tk.topk(x, K, kernel=main)
    plan = tk.plan_for(x, K, kernel=main)
    (f, grid, block, smem, _, params), = _decoded(fake_gpu, plan)
    d = plan.dummy.data_ptr()
    assert f == ("CUfunction", 0x4000) and grid == (64, 1, 1) and block == (512, 1, 1) and smem == 49152
    assert params[:14] == [x.data_ptr(), 8192, 8192, d, 0, d, 0, K, out.data_ptr(), 0, d, 0, 0, plan.sink.data_ptr()]
    cap = (49152 - 4 * 8192) // 8
    assert params[14:] == [1, cap, 8192, d, 0] and (plan.nresident, plan.capacity, plan.ws_numel) == (1, cap, 0)
    x = torch.zeros(1, 1 << 20)
    tk.topk(x, K, kernel=main)
    plan = tk.plan_for(x, K, kernel=main)
    (f, grid, *_, params), = _decoded(fake_gpu, plan)
    parts = (1 << 20) // tk.policy.RES_SLICE         # 86 blocks fit; 128 give 8K-score slices, one a SM
    ws_row = tk.policy.resident_workspace_ints(12, 49152 // 8)
    assert grid == (parts, 1, 1) and params[14:17] == [parts, 49152 // 8, 0] and params[18] == ws_row
    assert plan.ws_numel == ws_row and plan.nresident == parts and plan.capacity == 49152 // 8
    ws = params[17]
    tk.topk(x, K, kernel=main)
    assert _decoded(fake_gpu, plan)[0][5][17] == ws             # the stream's workspace again
    monkeypatch.setattr(torch._C, "_cuda_getCurrentRawStream", lambda idx: STREAM + 1, raising=False)
    tk.topk(x, K, kernel=main)
    assert _decoded(fake_gpu, plan)[0][5][17] not in (ws, d)    # another stream: its own
    assert all(int(w.abs().sum()) == 0 for w in plan.ws_by_stream.values())


def test_lengths_starts_and_page_table_are_packed(fake_gpu):
    main = _main()
    x = torch.zeros(4, 10000)[:, :8192]               # row stride 10000
    lens = torch.full((4,), 8000, dtype=torch.int32)
    starts = torch.zeros(4, dtype=torch.int32)
    table = torch.zeros(4, 8, dtype=torch.int32)
    out = tk.topk(x, K, lens, starts, kernel=main, page_table=table, page_bits=10)
    plan = tk.plan_for(x, K, lens, starts, kernel=main, page_table=table, page_bits=10)
    (*_, params), = _decoded(fake_gpu, plan)
    assert params[:14] == [x.data_ptr(), 10000, 8192, lens.data_ptr(), 1, starts.data_ptr(), 1, K,
                           out.data_ptr(), 1, table.data_ptr(), 8, 10, plan.sink.data_ptr()]


def test_split_path_two_launches_share_the_call_buffers(fake_gpu):
    main, split = _main(), _split()
    x = torch.zeros(8, 131072)
    tk.topk(x, K, kernel=main, split_kernel=split, cluster=False)
    plan = tk.plan_for(x, K, kernel=main, split_kernel=split, cluster=False)
    prefix, scap = tk.long_row_plan(131072, K)
    (sf, sgrid, sblock, ssmem, _, sp), (mf, mgrid, mblock, msmem, _, mp) = _decoded(fake_gpu, plan)
    assert (sf, sgrid, sblock, ssmem) == (("CUfunction", 0x2000), (64, 1, 1), (512, 1, 1), 0)
    assert (mf, mgrid, mblock, msmem) == (("CUfunction", 0x1000), (8, 1, 1), (512, 1, 1), 49152)
    assert sp[:8] == mp[:8] == [x.data_ptr(), 131072, 131072, plan.dummy.data_ptr(), 0,
                                plan.dummy.data_ptr(), 0, K]
    scratch, kept = sp[8], sp[11]
    assert sp[8:] == [scratch, scap, prefix, kept, 8] and mp[14:] == [scratch, scap, prefix, kept, 1]
    assert scratch != kept and plan.dummy.data_ptr() not in (scratch, kept)
    assert plan.scratch_numel == 8 * 2 * scap and plan.ws_numel == 8 * (2 + 4096)
    assert kept == plan.ws_by_stream[STREAM].data_ptr()        # the records: the plan's, zeroed once


def test_cluster_path_one_launch_with_a_spill_list(fake_gpu):
    """One launch; the row's scratch list (spill regions of the cluster's blocks) is its last
    argument; no split record."""
    main = _main()
    x = torch.zeros(64, 131072)
    tk.topk(x, K, kernel=main)
    plan = tk.plan_for(x, K, kernel=main)
    prefix, scap = tk.long_row_plan(131072, K)
    (f, grid, block, smem, _, params), = _decoded(fake_gpu, plan)
    assert f == ("CUfunction", 0x3004) and grid == (256, 1, 1) and block == (512, 1, 1) and smem == 49152
    assert len(params) == 17 and params[-3:-1] == [scap, prefix]
    assert params[-1] not in (plan.dummy.data_ptr(), x.data_ptr())
    assert (plan.ncluster, plan.scratch_numel, plan.ws_numel) == (4, 64 * 2 * scap, 0)


def test_cluster_plans_take_the_register_path_where_slices_fit_and_clusters_stay_resident(fake_gpu, monkeypatch):
    main = _main()
    x = torch.zeros(8, 131072)
    assert tk.plan_for(x, K, kernel=main).nresident == 0          # on chip, but sm_90's cluster takes it
    assert tk.plan_for(x, K, kernel=main, resident=True).nresident == 16
    tk.topk(x, K, kernel=main, resident=False)
    plan = tk.plan_for(x, K, kernel=main, resident=False)
    (f, grid, *_), = _decoded(fake_gpu, plan)
    assert (plan.ncluster, plan.cluster_regs, f, grid) == (8, 8, ("CUfunction", 0x3808), (64, 1, 1))
    assert tk.plan_for(torch.zeros(64, 131072), K, kernel=main).cluster_regs == 0     # S = 4: 32K a slice
    # the register build takes more registers: where the driver keeps fewer of its clusters
    # resident than there are rows, the sampled build of the same size
    monkeypatch.setattr(rtc, "max_active_clusters",
                        lambda h, grid, thr, smem: 4 if "TOPK_CLUSTER_REGS" in h.defines else 1000)
    plan.launches[0][0].info.clear()              # the driver's answer is kept per kernel: ask again
    tk.clear_plans()
    plan = tk.plan_for(x, K, kernel=main, resident=False)
    assert (plan.ncluster, plan.cluster_regs, plan.launches[0][0].fn) == (8, 0, ("CUfunction", 0x3008))
    assert tk.plan_for(torch.zeros(4, 131072), K, kernel=main, resident=False).cluster_regs == 8


def test_plan_is_made_once_and_repacked_only_on_new_pointers(fake_gpu):
    main = _main()
    x1, x2 = torch.zeros(4, 8192), torch.zeros(4, 8192)
    tk.topk(x1, K, kernel=main)
    plan = tk.plan_for(x1, K, kernel=main)
    assert tk.plan_for(x2, K, kernel=main) is plan                      # same shape: same plan
    assert tk.plan_for(torch.zeros(4, 4096), K, kernel=main) is not plan
    assert tk.plan_for(x1, 1024, kernel=main) is not plan
    n = plan.repacks
    plan.bind(plan.ptrs)                                                 # nothing changed
    assert plan.repacks == n
    tk.topk(x2, K, kernel=main)                                          # new scores pointer
    assert plan.repacks == n + 1
    (*_, params), = _decoded(fake_gpu, plan)
    assert params[0] == x2.data_ptr() and plan.ptrs[tk.SCORES] == x2.data_ptr()
    before = plan.repacks
    plan.bind(tuple(plan.ptrs))
    assert plan.repacks == before


def test_a_known_plain_call_skips_the_argument_checks_but_a_changed_one_does_not(fake_gpu, monkeypatch):
    """The serving path: a call whose scores' dtype, device, shape and strides and whose k and
    options were seen before takes its plan without re-checking; anything else is checked."""
    checked = []
    monkeypatch.setattr(rt, "_check_args", lambda *a: checked.append(a[1]))
    main = _main()
    x1, x2 = torch.zeros(4, 8192), torch.zeros(4, 8192)
    tk.topk(x1, K, kernel=main)
    tk.topk(x2, K, kernel=main)                                          # new pointers, same arguments
    assert checked == [K]
    for other in (torch.zeros(4, 8192, dtype=torch.float64), torch.zeros(8192, 4).t(), torch.zeros(4, 4096)):
        tk.plan_for(other, K, kernel=main)
    tk.topk(x1, 1024, kernel=main)
    lengths = torch.full((4,), 8192, dtype=torch.int32)
    tk.topk(x1, K, lengths, kernel=main)
    tk.topk(x1, K, lengths, kernel=main)                                 # lengths are checked every call
    assert checked == [K, K, K, K, 1024, K, K]
    ids = (id(main), id(None))
    assert rt._known_plan(rt._call_key(x1, [K], ids, None, {})) == (None, None)   # unhashable: no key
    assert rt._call_key("not a tensor", K, ids, None, {}) is None and rt._known_plan(None) == (None, None)
    tk.topk(x1, K, kernel=main, threads=512)                             # another option: checked
    assert checked[-1] == K and len(checked) == 8


def test_every_launch_binds_this_calls_pointers(fake_gpu):
    """Whatever the allocator returns, the driver reads the pointers of the call it launches."""
    main = _main()
    x = torch.zeros(4, 8192)
    outs = [tk.topk(x, K, kernel=main) for _ in range(3)]                # outputs kept alive
    plan = tk.plan_for(x, K, kernel=main)
    (*_, params), = _decoded(fake_gpu, plan)
    assert params[8] == outs[-1].data_ptr()
    assert len({o.data_ptr() for o in outs}) == 3


def test_out_is_the_buffer_the_kernel_writes(fake_gpu):
    """``out=``: the call packs the caller's buffer (no allocation) and returns it, diagnostics too."""
    main = _main()
    x = torch.zeros(4, 8192)
    out = torch.empty(4, K, dtype=torch.int32)
    assert tk.topk(x, K, kernel=main, out=out) is out
    plan = tk.plan_for(x, K, kernel=main)
    (*_, params), = _decoded(fake_gpu, plan)
    assert params[0] == x.data_ptr() and params[8] == out.data_ptr()
    got, diag = tk.topk(x, K, kernel=main, out=out, return_diagnostics="lazy")
    assert got is out and _decoded(fake_gpu, plan)[0][-1][8] == out.data_ptr()


@pytest.mark.parametrize("bad, says", [
    (lambda: torch.empty(4, K, dtype=torch.int64), r"contiguous int32 tensor of shape \[4, 2048\] on cpu"),
    (lambda: torch.empty(4, K + 1, dtype=torch.int32), r"shape \[4, 2048\]"),
    (lambda: torch.empty(K, 4, dtype=torch.int32).t(), "contiguous"),
    (lambda: torch.empty(4, K, dtype=torch.int32, device="meta"), "on cpu"),
    (lambda: [[0] * K] * 4, "int32 tensor")])
def test_bad_out_is_one_error_and_nothing_launched(fake_gpu, bad, says):
    main = _main()
    x = torch.zeros(4, 8192)
    tk.topk(x, K, kernel=main)
    n = len(fake_gpu.launches)
    with pytest.raises(UserError, match=says):
        tk.topk(x, K, kernel=main, out=bad())
    assert len(fake_gpu.launches) == n


def test_out_overlapping_the_scores_is_refused(fake_gpu):
    """Any shared byte with the scores, at either end of the rows the kernel reads (row stride
    included), or with the lengths."""
    main = _main()
    base = torch.zeros(50000 + 4 * K)
    x = base[:40000].view(4, 10000)[:, :8192]               # rows of 8192 at stride 10000
    end = 3 * 10000 + 8192                                  # one past the last value read
    n = len(fake_gpu.launches)
    for start in (0, 5000, end - 4 * K, end - 1):
        with pytest.raises(UserError, match="must not overlap scores"):
            tk.topk(x, K, kernel=main, out=base[start:start + 4 * K].view(torch.int32).view(4, K))
    assert len(fake_gpu.launches) == n
    after = base[end:end + 4 * K].view(torch.int32).view(4, K)
    assert tk.topk(x, K, kernel=main, out=after) is after
    lengths = after.view(-1)[K:K + 4]                       # the lengths inside out: refused too
    with pytest.raises(UserError, match="must not overlap lengths"):
        tk.topk(x, K, lengths, kernel=main, out=after)
    assert len(fake_gpu.launches) == n + 1


def test_diagnostics_get_their_own_bin_counts(fake_gpu):
    main = _main()
    x = torch.zeros(4, 8192)
    out, diag = tk.topk(x, K, kernel=main, return_diagnostics="lazy", resident=False)
    plan = tk.plan_for(x, K, kernel=main, resident=False)
    (*_, params), = _decoded(fake_gpu, plan)
    assert params[13] == diag["bin_counts"].data_ptr() != plan.sink.data_ptr()
    assert diag["capacity"] == plan.capacity == 49152 // 8
    # per row: count(t), then the row's flags (the kernel writes bin_counts[2 * row + 1])
    assert diag["row_flags"].data_ptr() == params[13] + 4 and diag["row_flags"].stride() == (2,)
    assert tuple(plan.sink.shape) == (4, 2)


def test_flag_counts_name_every_kernel_flag():
    flags = torch.tensor([0, 1, 1 | 8, 2 | 4, 4, 0], dtype=torch.int32)
    assert tk.flag_counts(flags) == {"bin_overflow_rows": 2, "spilled_rows": 1, "replayed_rows": 2,
                                     "row_pass_rows": 1}
    assert tk.flag_counts(flags[:0]) == dict.fromkeys(tk.ROW_FLAGS, 0)
    src = tk.read_source()               # the bits are the kernel's own
    for name, bit in (("BIN_OVF", 1), ("SPILL", 2), ("REPLAY", 4), ("ROW_PASSES", 8)):
        assert f"#define TOPK_FLAG_{name} {bit} " in src, name
    assert sorted(tk.ROW_FLAGS.values()) == [1, 2, 4, 8]


def test_torch_launcher_is_the_fallback(monkeypatch):
    calls = []

    class TorchKernel:
        func = ctypes.c_void_p(0x1000)

        def __call__(self, **kw):
            calls.append(kw)
    monkeypatch.setattr(rt, "_check_args", lambda *a: None)
    monkeypatch.setattr(rtc, "_driver_api", lambda: None)
    monkeypatch.setattr(torch._C, "_cuda_getCurrentRawStream",
                        lambda idx: pytest.fail("no raw stream without a driver API"), raising=False)
    tk.clear_plans()
    h = rtc.RtcKernel(TorchKernel(), tk.KERNEL_NAME, "90", tk.defines(32768, 256, 8), [], 0.0, 32768)
    h.launcher, h.fn = rtc.driver_function(h.kernel)
    assert (h.launcher, h.fn) == ("torch", None)
    x = torch.zeros(3, 8192)
    out = tk.topk(x, K, kernel=h, resident=False)
    (kw,), plan = calls, tk.plan_for(x, K, kernel=h, resident=False)
    assert kw["grid"] == (3, 1, 1) and kw["block"] == (256, 1, 1) and kw["shared_mem"] == 32768
    assert kw["args"][0] is x and kw["args"][8] is out and kw["args"][3] is plan.dummy
    assert kw["args"][1:3] == [8192, 8192] and kw["stream"] is None
    tk.clear_plans()


def test_driver_function_by_api(monkeypatch):
    kern = types.SimpleNamespace(func=ctypes.c_void_p(0xABC))
    monkeypatch.setattr(rtc, "_driver_api", lambda: ("cuda-python", FakeDriver))
    assert rtc.driver_function(kern) == ("cuda-python", ("CUfunction", 0xABC))
    sym = types.SimpleNamespace(fromObj=lambda a: ("hipFunction_t", a))
    monkeypatch.setattr(rtc, "_driver_api", lambda: ("hip-python", types.SimpleNamespace(ihipModuleSymbol_t=sym)))
    assert rtc.driver_function(kern) == ("hip-python", ("hipFunction_t", 0xABC))
    monkeypatch.setattr(rtc, "_driver_api", lambda: None)
    assert rtc.driver_function(kern) == ("torch", None)
    monkeypatch.setattr(rtc, "_driver_api", lambda: pytest.fail("no function: no API asked"))
    assert rtc.driver_function(types.SimpleNamespace()) == ("torch", None)


def test_hip_python_argument_refusal_falls_back_to_torch(monkeypatch):
    calls = []

    class Hip:
        class hipError_t:
            hipSuccess = 0

        @staticmethod
        def hipModuleLaunchKernel(*args):
            raise TypeError("kernelParams: not a valid type")

    class TorchKernel:
        def __call__(self, **kw):
            calls.append(kw)
    monkeypatch.setattr(rtc, "_driver_api", lambda: ("hip-python", Hip))
    h = rtc.RtcKernel(TorchKernel(), tk.KERNEL_NAME, "gfx942", {}, [], 0.0, 0, launcher="hip-python", fn=7)
    x = torch.zeros(2)
    pack = ArgPack([Ptr(0), 5])
    rtc.launch_packed(h, 3, 256, 0, pack, 0, (x,))
    assert (h.launcher, h.fn) == ("torch", None) and "TypeError" in h.info["launcher_error"]
    (kw,) = calls
    assert kw["args"] == [x, 5] and kw["grid"] == (3, 1, 1)


def test_driver_api_is_native_else_cuda_python_where_importable():
    import importlib.util

    from torch.cuda import _utils

    from occtune.build import native

    rtc._driver_api.cache_clear()
    try:
        api = rtc._driver_api()
    finally:
        rtc._driver_api.cache_clear()
    if getattr(torch.version, "hip", None):
        pytest.skip("a ROCm build of torch")
    try:
        driver_lib = _utils._get_gpu_runtime_library() is not None
    except (OSError, RuntimeError):
        driver_lib = False
    has = importlib.util.find_spec("cuda") is not None and (
        importlib.util.find_spec("cuda.bindings") is not None or importlib.util.find_spec("cuda.cuda") is not None)
    want = "native" if driver_lib and native.module() is not None else "cuda-python" if has else None
    assert (api[0] if api else None) == want


def test_launch_error_is_raised(fake_gpu, monkeypatch):
    main = _main()
    monkeypatch.setattr(fake_gpu, "cuLaunchKernel", lambda *a: (700,))
    with pytest.raises(rtc.LaunchError, match="cuLaunchKernel") as e:
        tk.topk(torch.zeros(2, 8192), K, kernel=main)
    assert e.value.code == 700


def test_no_context_in_this_thread_gets_the_primary_one_and_a_second_try(fake_gpu):
    main, split = _main(), _split()
    x = torch.zeros(8, 131072)
    fake_gpu.results = [0, 201]        # the split kernel launches, the main kernel finds no context
    tk.topk(x, K, kernel=main, split_kernel=split, cluster=False)
    names = [g["f"] for g in fake_gpu.launches]
    assert names == [("CUfunction", 0x2000), ("CUfunction", 0x1000), ("CUfunction", 0x1000)]
    assert fake_gpu.current == ("primary", ("device", 0))
    fake_gpu.results = [201, 201]
    with pytest.raises(rtc.LaunchError):
        tk.topk(x, K, kernel=main, split_kernel=split, cluster=False)


# ---- torch.ops.occtune.topk: schema and fake implementation ------------------------------------
def test_op_schema_is_registered():
    import occtune.kernels.topk.op  # noqa: F401

    schema = str(torch.ops.occtune.topk.default._schema)
    assert schema.startswith("occtune::topk(Tensor scores, SymInt k=2048, Tensor? lengths=None")
    assert schema.endswith("-> Tensor")


def test_op_kernel_is_the_launcher_with_the_config_left_unset_where_none(monkeypatch):
    """The op's CUDA kernel is the launcher itself (no custom_op wrapper: its layers cost tens of
    microseconds a call) and forwards every argument; an unset config stays unset."""
    from occtune.kernels.topk import op

    assert torch._C._dispatch_has_kernel_for_dispatch_key("occtune::topk", "CUDA")
    calls = []
    monkeypatch.setattr(tk, "topk", lambda *a, **kw: calls.append((a, kw)) or "out")
    x, lens, starts, table, offs = (object() for _ in range(5))
    assert op.topk_op(x, 64) == "out"
    assert op.topk_op(x, 32, lens, starts, None, 512, None, table, 10, offs) == "out"
    assert calls == [((x, 64, None, None), {"page_table": None, "page_bits": 0, "offsets": None}),
                     ((x, 32, lens, starts), {"page_table": table, "page_bits": 10, "offsets": offs,
                                              "threads": 512})]


def test_op_fake_gives_shape_and_dtype():
    from torch._subclasses.fake_tensor import FakeTensorMode

    import occtune.kernels.topk.op  # noqa: F401

    with FakeTensorMode():
        x = torch.empty(5, 8192, device="cuda")
        y = torch.ops.occtune.topk(x, 100)
        assert (tuple(y.shape), y.dtype, y.device.type) == ((5, 100), torch.int32, "cuda")
        with pytest.raises(RuntimeError, match="float32"):
            torch.ops.occtune.topk(torch.empty(5, 8192, dtype=torch.float16, device="cuda"), 100)


@pytest.mark.parametrize("dynamic", [False, True])
def test_op_traces_as_one_node_under_torch_compile(dynamic):
    import occtune.kernels.topk.op  # noqa: F401

    seen = []

    def backend(gm, example_inputs):
        nodes = [n for n in gm.graph.nodes if n.op == "call_function"]
        seen.append([(n.target, n.meta["example_value"]) for n in nodes])
        return lambda *args: (torch.full((args[-1].shape[0], 64), 7, dtype=torch.int32),)

    torch._dynamo.reset()
    f = torch.compile(lambda x: torch.ops.occtune.topk(x, 64), backend=backend, fullgraph=True,
                      dynamic=dynamic)
    assert f(torch.randn(3, 8192)).shape == (3, 64)
    (target, val), = seen[-1]
    assert target in (torch.ops.occtune.topk, torch.ops.occtune.topk.default)
    assert val.dtype == torch.int32 and val.shape[1] == 64
    assert val.shape[0] == 3 if not dynamic else str(val.shape[0]).startswith("s")
