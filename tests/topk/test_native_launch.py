"""CPU tests of occtune's native launcher (``occtune.build.native``, ``native_launch.c``): the module is
built with this machine's C compiler and drives a stand-in for the driver's launch function (a
small C library that records what it was given), so the same C path that calls cuLaunchKernel /
hipModuleLaunchKernel on a GPU machine runs here, argument for argument."""

from __future__ import annotations

import ctypes
import subprocess
import types

import pytest

torch = pytest.importorskip("torch")

from occtune.build import native, rtc  # noqa: E402
from occtune.kernels import topk as tk  # noqa: E402

# the faked device of the serving tests (its fixture too), for topk calls through the native launcher
from test_topk_serving import K, STREAM, _main, _read_params, _split, fake_gpu  # noqa: E402,F401

# The driver's launch function as this test wants it: records up to 16 launches, and returns
# fail_code from launch number fail_at on (counting from 0; -1: never).
STUB = r"""
#include <stdint.h>
uint64_t rec[16][11];
int calls = 0, fail_at = -1, fail_code = 0;
int fake_launch(void *f, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by, unsigned bz,
                unsigned smem, void *stream, void **params, void **extra) {
  if (calls < 16) {
    uint64_t v[11] = {(uint64_t)(uintptr_t)f, gx, gy, gz, bx, by, bz, smem, (uint64_t)(uintptr_t)stream,
                      (uint64_t)(uintptr_t)params, (uint64_t)(uintptr_t)extra};
    for (int i = 0; i < 11; ++i) rec[calls][i] = v[i];
  }
  const int n = calls++;
  return (fail_at >= 0 && n >= fail_at) ? fail_code : 0;
}
"""


@pytest.fixture(scope="module")
def stub(tmp_path_factory):
    d = tmp_path_factory.mktemp("stub")
    (d / "stub.c").write_text(STUB)
    subprocess.run([*native.compiler(), "-O2", "-shared", "-fPIC", str(d / "stub.c"), "-o", str(d / "stub.so")],
                   check=True, capture_output=True)
    lib = ctypes.CDLL(str(d / "stub.so"))
    lib.address = ctypes.cast(lib.fake_launch, ctypes.c_void_p).value
    return lib


@pytest.fixture
def driver(stub):
    """The stub, reset: ``driver.launches()`` lists what it was given."""
    mod = native.module()
    assert mod is not None, native.error()
    for name, v in (("calls", 0), ("fail_at", -1), ("fail_code", 0)):
        ctypes.c_int.in_dll(stub, name).value = v
    rec = ((ctypes.c_uint64 * 11) * 16).in_dll(stub, "rec")
    keys = ("f", "gx", "gy", "gz", "bx", "by", "bz", "smem", "stream", "params", "extra")
    stub.launches = lambda: [dict(zip(keys, rec[i])) for i in range(min(16, ctypes.c_int.in_dll(stub, "calls").value))]
    stub.fail = lambda at, code: (setattr(ctypes.c_int.in_dll(stub, "fail_at"), "value", at),
                                  setattr(ctypes.c_int.in_dll(stub, "fail_code"), "value", code))
    stub.launcher = rtc.NativeLauncher(mod.launch_all, stub.address)
    return stub


def test_launch_all_passes_every_argument_in_order(driver):
    nat = driver.launcher
    params = (ctypes.c_void_p * 2)(0x11, 0x22)
    todo = ((0xF00D, 64, 512, 0, ctypes.addressof(params)), (0xBEEF, 8, 1024, 49152, 0x1234))
    assert nat.launch_all(nat.function, todo, STREAM) is None
    a, b = driver.launches()
    assert (a["f"], a["gx"], a["gy"], a["gz"], a["bx"], a["by"], a["bz"], a["smem"]) == (0xF00D, 64, 1, 1, 512, 1, 1, 0)
    assert (a["stream"], a["params"], a["extra"]) == (STREAM, ctypes.addressof(params), 0)
    assert (b["f"], b["gx"], b["bx"], b["smem"], b["params"]) == (0xBEEF, 8, 1024, 49152, 0x1234)
    assert nat.launch_all(nat.function, (), 0) is None and len(driver.launches()) == 2


def test_the_first_failed_launch_stops_the_rest_and_says_which(driver):
    nat = driver.launcher
    driver.fail(1, 700)
    todo = tuple((0x100 + i, 1, 64, 0, 0) for i in range(3))
    assert nat.launch_all(nat.function, todo, 0) == (1, 700)
    assert [g["f"] for g in driver.launches()] == [0x100, 0x101]


@pytest.mark.parametrize("args,error", [
    ((0, (), 0), ValueError),                          # no launch function
    ((1, [(1, 1, 1, 0, 0)], 0), TypeError),            # launches not a tuple
    ((1, ((1, 1, 1, 0),), 0), TypeError),              # a launch of 4 fields
    ((1, ((1, 1 << 32, 1, 0, 0),), 0), OverflowError),  # grid over 32 bits
    ((1, ((1, -1, 1, 0, 0),), 0), OverflowError),
    ((1, ((1, "8", 1, 0, 0),), 0), TypeError),
    ((1, ()), TypeError),                               # two arguments
])
def test_bad_arguments_raise_before_any_launch(driver, args, error):
    with pytest.raises(error):
        native.module().launch_all(*args)
    assert driver.launches() == []


@pytest.fixture
def native_gpu(fake_gpu, driver, monkeypatch):
    """test_topk_serving's faked device, launching through the native launcher and the stub."""
    monkeypatch.setattr(rtc, "_driver_api", lambda: ("native", driver.launcher))
    return driver


def _decoded(driver, plan):
    """Per launch: (function, grid, block, smem, stream, what the driver read through params)."""
    templates = {pack.address: pack.template for *_, pack in plan.launches}
    return [(g["f"], g["gx"], g["bx"], g["smem"], g["stream"], _read_params(g["params"], templates[g["params"]]))
            for g in driver.launches()]


def test_a_split_call_is_one_native_call_of_both_kernels(native_gpu):
    main, split = _main(), _split()
    assert (main.launcher, main.fn, split.fn) == ("native", 0x1000, 0x2000)
    x = torch.zeros(8, 131072)
    out = tk.topk(x, K, kernel=main, split_kernel=split, cluster=False)
    plan = tk.plan_for(x, K, kernel=main, split_kernel=split, cluster=False)
    assert plan.native == ((0x2000, 64, 512, 0, plan.launches[0][4].address),
                           (0x1000, 8, 512, 49152, plan.launches[1][4].address))
    (sf, sg, sb, ss, sst, sp), (mf, mg, mb, ms, mst, mp) = _decoded(native_gpu, plan)
    assert (sf, sg, sb, ss, sst) == (0x2000, 64, 512, 0, STREAM) and (mf, mg, mb, ms, mst) == (0x1000, 8, 512, 49152, STREAM)
    assert sp[:8] == mp[:8] == [x.data_ptr(), 131072, 131072, plan.dummy.data_ptr(), 0, plan.dummy.data_ptr(), 0, K]
    assert mp[8] == out.data_ptr() and sp[8] == mp[14] != plan.dummy.data_ptr()     # the call's scratch list
    out2 = tk.topk(x, K, kernel=main, split_kernel=split, cluster=False)
    assert _read_params(native_gpu.launches()[-1]["params"], plan.launches[1][4].template)[8] == out2.data_ptr()


def test_a_launch_with_no_context_gets_the_primary_one_and_a_second_try(native_gpu, monkeypatch):
    main, split = _main(), _split()
    made = []
    monkeypatch.setattr(rtc, "make_context_current", lambda index: made.append(index))
    x = torch.zeros(8, 131072)
    native_gpu.fail(1, 201)                       # from the main kernel on: no context, every try
    with pytest.raises(rtc.LaunchError, match="error 201") as e:
        tk.topk(x, K, kernel=main, split_kernel=split, cluster=False)
    assert e.value.code == 201 and made == [0]
    # the split kernel once; the main kernel in the C call, once more alone, then after the context
    assert [g["f"] for g in native_gpu.launches()] == [0x2000, 0x1000, 0x1000, 0x1000]


def test_a_launch_error_is_raised_with_its_code(native_gpu):
    native_gpu.fail(0, 700)
    with pytest.raises(rtc.LaunchError, match="700") as e:
        tk.topk(torch.zeros(2, 8192), K, kernel=_main())
    assert e.value.code == 700


def test_a_missing_compiler_or_the_switch_falls_back_and_says_why(monkeypatch, tmp_path):
    monkeypatch.setenv("OCCTUNE_CACHE_DIR", str(tmp_path))
    monkeypatch.setattr(native, "_STATE", {})
    monkeypatch.setenv("CC", str(tmp_path / "no-such-cc"))
    assert native.module() is None and "no-such-cc" in native.error()
    assert not native.built_path().exists() and not list(tmp_path.rglob("*.tmp"))
    monkeypatch.setattr(native, "_STATE", {})
    monkeypatch.setenv("CC", "false")                 # a compiler that fails
    assert native.module() is None and native.error().startswith("false failed")
    monkeypatch.setattr(native, "_STATE", {})
    monkeypatch.setenv("OCCTUNE_NATIVE_LAUNCH", "0")
    assert native.module() is None and native.error() == "OCCTUNE_NATIVE_LAUNCH=0"
    rtc._driver_api.cache_clear()
    try:
        api = rtc._driver_api()
    finally:
        rtc._driver_api.cache_clear()
    assert api is None or api[0] != "native"


def test_a_built_module_is_reused_from_the_cache(monkeypatch, tmp_path):
    monkeypatch.setenv("OCCTUNE_CACHE_DIR", str(tmp_path))
    monkeypatch.setattr(native, "_STATE", {})
    assert native.module() is not None, native.error()
    path = native.built_path()
    assert path.is_file() and path.is_relative_to(tmp_path)
    stamp = path.stat().st_mtime_ns
    monkeypatch.setattr(native, "_STATE", {})
    monkeypatch.setattr(native, "build", lambda p: pytest.fail("built again"))
    assert native.module() is not None and path.stat().st_mtime_ns == stamp


def test_the_driver_api_is_native_where_the_driver_library_loads(monkeypatch):
    """_driver_api binds the native launcher to the launch function of the library torch loaded."""
    from torch.cuda import _utils

    lib = types.SimpleNamespace(cuLaunchKernel=ctypes.CFUNCTYPE(ctypes.c_int)(lambda: 0),
                                hipModuleLaunchKernel=ctypes.CFUNCTYPE(ctypes.c_int)(lambda: 0))
    monkeypatch.setattr(_utils, "_get_gpu_runtime_library", lambda: lib)
    for hip, name in ((None, "cuLaunchKernel"), ("6.2", "hipModuleLaunchKernel")):
        monkeypatch.setattr(torch.version, "hip", hip)
        rtc._driver_api.cache_clear()
        try:
            api = rtc._driver_api()
        finally:
            rtc._driver_api.cache_clear()
        assert api[0] == "native" and api[1].launch_all is native.module().launch_all
        assert api[1].function == ctypes.cast(getattr(lib, name), ctypes.c_void_p).value


def test_a_cache_folder_that_cannot_be_made_is_no_crash(monkeypatch, tmp_path):
    """The cache folder cannot be created (here: a file stands where a folder should be; a
    read-only home does the same): no native launcher, and a reason, not an exception."""
    blocker = tmp_path / "file"
    blocker.write_text("")
    monkeypatch.setenv("OCCTUNE_CACHE_DIR", str(blocker))
    monkeypatch.setattr(native, "_STATE", {})
    assert native.module() is None and str(blocker) in native.error()


def test_a_damaged_module_file_is_built_afresh(monkeypatch, tmp_path):
    monkeypatch.setenv("OCCTUNE_CACHE_DIR", str(tmp_path))
    monkeypatch.setattr(native, "_STATE", {})
    path = native.built_path()
    path.parent.mkdir(parents=True)
    path.write_bytes(b"not a shared object")
    assert native.module() is not None, native.error()
    assert path.read_bytes()[:4] == b"\x7fELF"
