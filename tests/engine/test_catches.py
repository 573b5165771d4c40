"""Each catch names the failure it expects and reports it; a bug is not turned into a default."""

import ctypes
import warnings

import pytest

from doubles import FakeTimer, FaultFamily
from occtune.engine.sweep import run_sweep
from occtune.errors import UserError


class _ResourcesBug(FaultFamily):
    def built_resources(self, built, config):
        raise TypeError("a bug in the family's lookup")


def test_a_failed_resources_lookup_is_in_every_row():
    res = run_sweep(_ResourcesBug(n=2), timer=FakeTimer(), progress=False, cache=False)
    assert res.rows and all(r["resources"] == {"error": "built_resources failed: TypeError: a bug in the family's "
                                                         "lookup"} for r in res.rows)
    assert all(r["status"] == "ok" for r in res.rows)       # the points are still verified and timed


def test_topk_is_valid_reports_the_kernel_rules_and_lets_bugs_through():
    from occtune.kernels.topk.family import TopkFamily

    fam, w = TopkFamily(), {"B": 1, "L": 8192, "K": 2048}
    assert fam.is_valid({"lds_budget": 40960, "threads": 512, "bits": 8}, w) == (True, "")
    ok, why = fam.is_valid({"lds_budget": 40960, "threads": 500, "bits": 8}, w)
    assert not ok and "threads must be" in why
    with pytest.raises(KeyError):                       # a malformed config is a bug, not "invalid"
        fam.is_valid({"lds_budget": 40960}, w)


def test_cuobjdump_failure_is_reported(monkeypatch):
    from occtune.build import tritonxc

    monkeypatch.setattr(tritonxc, "cuobjdump", lambda: "/bin/false")
    with pytest.raises(UserError, match="dump-resource-usage failed"):
        tritonxc.nvidia_numbers(b"not a cubin")
    monkeypatch.setattr(tritonxc, "cuobjdump", lambda: None)      # no tool at all: no numbers
    assert tritonxc.nvidia_numbers(b"") == {}


class _Lib:
    def __init__(self, error):
        self.error = error

    def _raise(self, *a):
        raise self.error

    cuFuncGetAttribute = cuOccupancyMaxActiveBlocksPerMultiprocessor = _raise


class _Handle:
    class kernel:
        func = object()


@pytest.fixture
def driver(monkeypatch):
    from torch.cuda import _utils

    def use(error):
        monkeypatch.setattr(_utils, "_get_gpu_runtime_library", lambda: _Lib(error))
    return use


def test_driver_abi_mismatch_is_reported(driver):
    from occtune.build import rtc

    driver(ctypes.ArgumentError("argument 2: wrong type"))
    info = rtc.kernel_attributes(_Handle())
    assert "ArgumentError" in info["error"]
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        assert rtc.occupancy_query(_Handle(), 256, 0) is None
    assert "could not be called" in str(seen[0].message)


def test_a_bug_in_a_driver_query_is_not_swallowed(driver):
    from occtune.build import rtc

    driver(ZeroDivisionError("a bug"))
    with pytest.raises(ZeroDivisionError):
        rtc.kernel_attributes(_Handle())
    with pytest.raises(ZeroDivisionError):
        rtc.occupancy_query(_Handle(), 256, 0)
