"""CPU tests of ``torch.ops.occtune.topk``'s C++ kernel (``op_native.cpp``): it builds with this
machine's C++ compiler against the installed torch and loads (in a child process, so that its
CUDA kernel does not replace the Python one in this process), its helper ops agree with op.py,
and ``runtime.native_description`` gives exactly the launches and arguments the Python launcher
makes (the faked native device of test_native_launch). The C++ launches themselves run in the
GPU tests (test_topk_serving_gpu.py)."""

from __future__ import annotations

import os

import pytest

torch = pytest.importorskip("torch")

from occtune.kernels import topk as tk  # noqa: E402
from occtune.kernels.topk import op, runtime  # noqa: E402

from childproc import built_ops  # noqa: E402
from test_native_launch import _decoded, driver, native_gpu, stub  # noqa: E402,F401
from test_topk_serving import K, _main, _split, fake_gpu  # noqa: E402,F401

CHILD = r"""
import json, sys, torch
from occtune.build import native
from occtune.kernels.topk import op
path, why = native.torch_library(op.NATIVE_SOURCE)
if path is None:
    print(json.dumps({"error": why})); sys.exit(0)
torch.ops.load_library(str(path))
schema = lambda name: [(a.name, str(a.type)) for a in getattr(torch.ops.occtune, name).default._schema.arguments]
print(json.dumps({"stats": list(torch.ops.occtune._topk_native_stats()), "py": schema("_topk_py"),
                  "describe": schema("_topk_describe"), "topk": schema("topk"), "path": str(path)}))
"""


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    return built_ops(CHILD, tmp_path_factory.mktemp("cache"))


def test_the_cpp_op_builds_loads_and_starts_with_no_plans(built):
    assert built["stats"] == [0, 0, 0, 0, 0]
    assert os.path.exists(built["path"]) and built["path"].endswith("op_native.so")


def test_the_python_fallback_op_takes_the_ops_arguments_in_order(built):
    """The C++ kernel hands a call to _topk_py and _topk_describe argument for argument."""
    names = [n for n, _ in built["topk"]]
    assert [n for n, _ in built["py"]] == names
    assert [n for n, _ in built["describe"]] == names[:7]
    assert [t.replace("SymInt", "int") for _, t in built["topk"]] == [t for _, t in built["py"]]


def test_description_is_the_plans_launches_argument_for_argument(native_gpu):
    x = torch.zeros(8, 131072)
    main, split = _main(), _split()
    tk.topk(x, K, kernel=main, split_kernel=split, cluster=False)
    plan = tk.plan_for(x, K, kernel=main, split_kernel=split, cluster=False)
    d = runtime.native_description(plan)
    assert d[:6] == [runtime.NATIVE_FORMAT, 8, K, plan.ws_numel, plan.scratch_numel, 2]
    i = 6
    for h, grid, block, smem, pack in plan.launches:
        n = len(pack.template)
        assert d[i:i + 7] == [h.fn, grid, 1, 1, block, smem, n]
        pairs = list(zip(d[i + 7:i + 7 + 2 * n:2], d[i + 8:i + 7 + 2 * n:2]))
        assert pairs == [(1, t.index) if isinstance(t, runtime.rtc.Ptr) else (0, t) for t in pack.template]
        i += 7 + 2 * n
    assert i == len(d)


def test_description_gives_what_the_driver_read_from_the_python_launcher(native_gpu):
    """Each launch's parameters, rebuilt from the description and the call's pointers as the C++
    kernel builds them, are what the driver read when Python launched the call."""
    x = torch.zeros(8, 131072)
    main, split = _main(), _split()
    tk.topk(x, K, kernel=main, split_kernel=split, cluster=False)
    plan = tk.plan_for(x, K, kernel=main, split_kernel=split, cluster=False)
    d, i, rebuilt = runtime.native_description(plan), 6, []
    for _ in range(d[5]):
        n = d[i + 6]
        pairs = zip(d[i + 7:i + 7 + 2 * n:2], d[i + 8:i + 7 + 2 * n:2])
        rebuilt.append((d[i], d[i + 1], d[i + 4], d[i + 5], [plan.ptrs[v] if kind else v for kind, v in pairs]))
        i += 7 + 2 * n
    read = [(f, g, b, smem, params) for f, g, b, smem, _, params in _decoded(native_gpu, plan)]
    assert rebuilt == read and len(read) == 2


def test_description_is_empty_where_python_launches(fake_gpu):
    x = torch.zeros(2, 8192)
    tk.topk(x, K, kernel=_main())
    assert runtime.native_description(tk.plan_for(x, K, kernel=_main())) == []


def test_no_gpu_keeps_the_python_kernel():
    if torch.cuda.is_available():
        pytest.skip("a GPU machine: the GPU tests check the C++ kernels")
    assert op.native_error() in ("no GPU", "OCCTUNE_NATIVE_OP=0")
