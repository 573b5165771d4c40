"""occtune.build.compiled: the compiler probes (clang HIP, NVRTC, Triton) on the CPU, their disk cache and
errors, and the occupancy checks that rest on them: LLVM's remark equals our LLVM model for every
compiled top-k and RoPE config of the default sweep spaces; sm_90 top-k at 512 threads is 2 blocks/SM."""

import os

os.environ.setdefault("TRITON_INTERPRET", "1")

from concurrent.futures import ThreadPoolExecutor  # noqa: E402

import pytest  # noqa: E402

from occtune.build import compiled  # noqa: E402
from occtune.engine.analytic import llvm_model_waves, occupancy_row  # noqa: E402
from occtune.model.targets import load_target  # noqa: E402

AMD = ("gfx942", "gfx950", "gfx1250")

# A static LDS array sized so that rounding it to the target's allocation granule would change the
# workgroups per CU (LLVM >= 24 rounds; earlier ones do not): the remark then says which rule ran.
LDS_PROBE = {"gfx942": 21800, "gfx950": 32700, "gfx1250": 46000}
HIP = """
extern "C" __attribute__((global)) __attribute__((amdgpu_flat_work_group_size(1, 256)))
void probe_kernel(float* out) {
  __attribute__((shared)) static float s[N];
  int t = __builtin_amdgcn_workitem_id_x();
  s[t % N] = out[t];
  __builtin_amdgcn_s_barrier();
  out[t] = s[(t + 1) % N];
}
"""
CUDA = """
extern "C" __global__ void __launch_bounds__(256) probe_kernel(float* out) {
  __shared__ float s[N];
  s[threadIdx.x % N] = out[threadIdx.x];
  __syncthreads();
  out[threadIdx.x] = s[(threadIdx.x + 1) % N];
}
"""


def _or_skip(fn, *args, **kw):
    try:
        return fn(*args, **kw)
    except compiled.NoCompilerError as e:
        pytest.skip(f"no compiler here: {e}")


# ------------------------------------------------------------------------------------ parsing

def test_parse_ptxas_nvrtc_and_nvcc_formats():
    nvrtc = ("ptxas info    : Compiling entry function 'a' for 'sm_90'\n"
             "ptxas         .     8 bytes stack frame, 4 bytes spill stores, 4 bytes spill loads\n"
             "ptxas info    : Used 58 registers, used 1 barriers, 3104 bytes smem\n"
             "ptxas info    : Compiling entry function 'b' for 'sm_90'\n"
             "    0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads\n"
             "ptxas info    : Used 12 registers, 356 bytes cmem[0]\n")
    assert compiled.parse_ptxas(nvrtc) == {"a": {"regs": 58, "smem": 3104, "stack": 8, "spill_stores": 4},
                                           "b": {"regs": 12, "smem": 0, "stack": 0, "spill_stores": 0}}


def test_llvm_major_of_a_source_label():
    assert compiled.llvm_major_of("compiled: clang 22.1.8 gfx950") == 22
    assert compiled.llvm_major_of("compiled: triton 3.9.0 (LLVM 24) gfx942") == 24
    assert compiled.llvm_major_of("compiled: nvrtc 12.9 sm_90") is None
    assert compiled.llvm_major_of("assumed: no compiler") is None


# ------------------------------------------------------------------------------- clang (HIP)

@pytest.mark.parametrize("target", AMD)
def test_hip_probe(target, tmp_path, monkeypatch):
    monkeypatch.setenv("OCCTUNE_CACHE_DIR", str(tmp_path))
    lds = LDS_PROBE[target]
    res = _or_skip(compiled.hip_resources, HIP, "probe_kernel", {"N": lds // 4}, target, threads=256)
    comp = compiled.compile_hip(HIP, target, {"N": lds // 4})[0]
    assert res.source == f"compiled: clang {comp.version} {target}"
    assert res.static_lds == lds and res.vgprs > 0 and res.sgprs > 0 and res.scratch_bytes == 0
    tgt = load_target(target)
    assert 1 <= res.compiler_occupancy <= tgt.max_waves_per_simd
    # our reproduction of LLVM's estimate, for this LLVM's major version, equals its remark
    assert llvm_model_waves(tgt, res) == res.compiler_occupancy


def test_hip_probe_is_cached_on_disk_by_source_macros_and_target(tmp_path, monkeypatch):
    monkeypatch.setenv("OCCTUNE_CACHE_DIR", str(tmp_path))
    first = _or_skip(compiled.hip_resources, HIP, "probe_kernel", {"N": 300}, "gfx942", threads=256)
    assert list((tmp_path / "compiled").glob("*.json"))

    def no_compiler(*a, **kw):
        raise AssertionError("compiled again")

    monkeypatch.setattr(compiled, "_clang_build", no_compiler)
    assert compiled.hip_resources(HIP, "probe_kernel", {"N": 300}, "gfx942", threads=256) == first
    with pytest.raises(AssertionError):      # another macro value is another key
        compiled.hip_resources(HIP, "probe_kernel", {"N": 301}, "gfx942", threads=256)


def test_hip_errors_are_typed_and_one_line(tmp_path, monkeypatch):
    monkeypatch.setenv("OCCTUNE_CACHE_DIR", str(tmp_path))
    with pytest.raises(compiled.CompileError) as e:
        _or_skip(compiled.compile_hip, "extern \"C\" __attribute__((global)) void k( {", "gfx942", {})
    assert "\n" not in str(e.value) and "gfx942" in str(e.value) and "error" in str(e.value)
    with pytest.raises(compiled.CompileError, match="without a kernel 'nope'"):
        _or_skip(compiled.hip_resources, HIP, "nope", {"N": 300}, "gfx942", threads=256)
    if not compiled.clang_compilers():
        pytest.skip("no clang here")
    with pytest.raises(compiled.NoCompilerError, match="cannot target gfx9999"):
        compiled.compile_hip(HIP, "gfx9999", {"N": 300})


def test_no_compilers_env_hides_every_compiler(monkeypatch):
    monkeypatch.setenv(compiled.NO_COMPILERS_ENV, "1")
    with pytest.raises(compiled.NoCompilerError):
        compiled.compile_hip(HIP, "gfx950", {"N": 300})
    with pytest.raises(compiled.NoCompilerError):
        compiled.compile_cuda(CUDA, "sm_90", {"N": 300})
    from occtune.kernels.rope.resources import compiled_resources

    with pytest.raises(compiled.NoCompilerError):
        compiled_resources({"variant": "flat", "BLOCK_M": 16, "num_warps": 1}, "gfx942")


# ------------------------------------------------------------------------------ NVRTC / nvcc

def test_nvrtc_probe(tmp_path, monkeypatch):
    monkeypatch.setenv("OCCTUNE_CACHE_DIR", str(tmp_path))
    comps = compiled.nvidia_compilers()
    if not comps or comps[0].kind != "nvrtc":
        pytest.skip("NVRTC not installed (pip install -e '.[test]' brings it on Linux x86_64)")
    res = compiled.cuda_resources(CUDA, "probe_kernel", {"N": 300}, "sm_90", threads=256)
    assert res.source == f"compiled: nvrtc {comps[0].version} sm_90"
    assert res.static_lds == 1200 and 0 < res.regs <= 255 and res.scratch_bytes == 0
    with pytest.raises(compiled.CompileError) as e:
        compiled.compile_cuda(CUDA + "\nint broken(", "sm_90", {"N": 300})
    assert "\n" not in str(e.value) and "sm_90" in str(e.value)


# ------------------------------------------------------------------------------------ Triton

@pytest.mark.parametrize("target", ["gfx942", "sm_90"])
def test_triton_probe(target, tmp_path, monkeypatch):
    import triton

    from occtune.kernels.rope.resources import compiled_resources

    monkeypatch.setenv("OCCTUNE_CACHE_DIR", str(tmp_path))
    res = _or_skip(compiled_resources, {"variant": "batched", "BLOCK_M": 32, "num_warps": 4}, target)
    assert res.scratch_bytes == 0 and res.dynamic_lds == 0
    llvm = f" (LLVM {compiled.triton_llvm_major()})" if target.startswith("gfx") else ""
    assert res.source == f"compiled: triton {triton.__version__}{llvm} {target}"
    assert res.threads == 4 * (64 if target.startswith("gfx") else 32)
    assert (res.vgprs if target.startswith("gfx") else res.regs) > 0


# -------------------------------------------------- LLVM's remark = our model, every config

def _amd_resources(family, configs):
    """(target, config, resources) for every AMD target a compiler here builds for."""
    jobs = [(load_target(t), c) for t in AMD for c in configs]
    with ThreadPoolExecutor(os.cpu_count() or 1) as pool:
        res = list(pool.map(lambda j: family.resources(j[1], j[0]), jobs))
    return [(t, c, r) for (t, c), r in zip(jobs, res) if r.source.startswith("compiled: ")]


def test_llvm_model_equals_the_remark_for_every_compiled_topk_config():
    from occtune.engine.sweep import default_configs
    from occtune.kernels.topk.family import TopkFamily

    fam = TopkFamily()
    done = _amd_resources(fam, default_configs(fam))
    if not done:
        pytest.skip("no clang for any AMD target here")
    for target, config, res in done:
        assert res.compiler_occupancy is not None, (target.name, config)
        assert llvm_model_waves(target, res) == res.compiler_occupancy, (target.name, config, res)


def _rope_resources(job):
    from occtune.engine.registry import get_family

    target, config = job
    try:
        return get_family("rope").resources(config, load_target(target))
    except compiled.NoCompilerError:
        return None


def test_llvm_model_equals_the_remark_for_every_compiled_rope_config():
    """Every config of the family's default space (what ``tune sweep rope`` sweeps), compiled by
    Triton in worker processes (Triton compiles hold the GIL)."""
    import multiprocessing

    from occtune.engine.sweep import default_configs
    from occtune.kernels.rope.family import RopeFamily

    fam = RopeFamily()
    configs = [c for c in default_configs(fam) if any(fam.is_valid(c, w)[0] for w in fam.workloads())]
    jobs = [(t, c) for t in AMD for c in configs]
    with multiprocessing.get_context("fork").Pool(os.cpu_count() or 1) as pool:
        results = pool.map(_rope_resources, jobs, chunksize=8)
    if all(r is None for r in results):
        pytest.skip("this Triton cannot compile for AMD targets")
    assert len(configs) > 50
    for (target, config), res in zip(jobs, results):
        assert res is not None and res.compiler_occupancy is not None, (target, config)
        assert llvm_model_waves(load_target(target), res) == res.compiler_occupancy, (target, config, res)


# ----------------------------------------------------------------------- NVIDIA: the driver

def test_analytic_sm90_topk_is_two_blocks_per_sm_at_512_threads():
    """The H200 driver allows 2 blocks/SM at 512 threads (58 registers, 3,104 B static shared
    memory: shared/facts/toolchain.md); registers bind, not shared memory."""
    from occtune.kernels.topk.family import TopkFamily

    sm90 = load_target("sm_90")
    fam = TopkFamily()
    for budget in (32768, 40960, 49152):
        cfg = {"lds_budget": budget, "threads": 512, "bits": 8}
        res = fam.resources(cfg, sm90)
        if not res.source.startswith("compiled: "):
            pytest.skip(f"no CUDA compiler here ({res.source})")
        row = occupancy_row(sm90, cfg, res)
        assert res.static_lds == 3104 and 32 < res.regs <= 64, res
        assert (row["blocks_per_cu"], row["limiter"]) == (2, "registers"), row


def test_launcher_signature_specialises_ints_as_tritons_launcher_does():
    from occtune.build.tritonxc import launcher_signature

    sig, cx, attrs = launcher_signature({"x": "*fp32", "y": "*bf16"},
                                        {"one": 1, "n16": 4096, "odd": 100, "big": 1 << 33, "M": 1, "S": 32},
                                        {"BLOCK": 64}, not_specialised=("M", "S"))
    assert list(sig) == ["x", "y", "one", "n16", "odd", "big", "M", "S", "BLOCK"]     # parameter order kept
    assert [sig[k] for k in ("one", "n16", "odd", "big", "M", "S", "BLOCK")] == [
        "constexpr", "i32", "i32", "i64", "i32", "i32", "constexpr"]               # M, S: not specialised
    assert cx == {"one": 1, "BLOCK": 64}
    # pointers and the specialised multiples of 16 (not S: not specialised) are marked divisible
    assert sorted(i for (i,) in attrs) == [0, 1, 3, 5]
    assert all(v == [["tt.divisibility", 16]] for v in attrs.values())
