"""The FP8 block-scaled GEMM family: backend x Triton config on DeepSeek-V4's (n, k) shapes x M.

Backends are an axis: ``triton`` (ours, kernels/fp8_gemm/kernel.py) and the vendor paths of
backends.py. A library that cannot run here fails its build with the probe's reason, so every
sweep reports it (built_failed: "missing: ..."), never skips it silently. The Triton configs timed
for a workload are the profile's bucket for its M plus the baseline (profile.yaml); ``configs()``
lists them all. Ties inside the noise go to the library (see :meth:`Fp8GemmFamily.safety_key`).

``check`` compares with the float64 reference (reference.py states and justifies the tolerance)
on every row when M <= 256, else on a strided sample of about 256 rows that hits every 64-row
stripe (so every M tile of every config); the whole output must be finite, and ``make_inputs``
NaN-poisons the Triton kernel's output buffer, so an unwritten tile fails.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from occtune.engine.family import CheckResult, Family, Resources, key_of
from occtune.errors import UserError
from occtune.model.targets import local_target

from .backends import BACKENDS, availability, prepare, runner
from .config import (PIPES_WGMMA, TRITON_KEYS, amd_keys, baseline_config, config_problem, fp8_dtype_name, is_amd,
                     library_config, load_profile, target_problem, triton_values, validate_config, wgmma_problem,
                     workload)

CHECK_ROWS = 256


@dataclass
class GemmInputs:
    a: Any              # fp8 [M, K] row-major
    a_s: Any            # fp32 [M, ceil(K/128)], column-major (stride [1, M])
    b: Any              # fp8 [N, K] row-major
    b_s: Any            # fp32 [ceil(N/128), ceil(K/128)]
    out: Any            # bf16 [M, N], NaN-poisoned (the Triton kernel writes here)
    prep: dict = field(default_factory=dict)     # weight-side layouts per library (backends.prepare)


def _fp8_values(shape, g, device, dtype):
    import torch

    fmax = torch.finfo(dtype).max
    x = torch.randn(shape, generator=g, device=device, dtype=torch.float32) * (fmax / 4)
    return x.clamp_(-fmax, fmax).to(dtype)


def _scales(shape, g, device, lo: float, hi: float):
    import torch

    e = torch.rand(shape, generator=g, device=device, dtype=torch.float32) * (hi - lo) + lo
    return torch.exp2(e)


def make_gemm_inputs(M: int, N: int, K: int, seed: int, device: Any, fp8_dtype: str = "float8_e4m3fn",
                     exp_range: tuple = (-9.0, -5.0)) -> GemmInputs:
    """Random fp8 A, B (spread over the format's range) and power-of-two-ish scales 2**U(exp_range)."""
    import torch

    dtype = getattr(torch, fp8_dtype)
    g = torch.Generator(device=device).manual_seed(int(seed))
    kb, nb = -(-K // 128), -(-N // 128)
    a = _fp8_values((M, K), g, device, dtype)
    b = _fp8_values((N, K), g, device, dtype)
    a_s = _scales((kb, M), g, device, *exp_range).t()          # column-major, as the quantisers write it
    b_s = _scales((nb, kb), g, device, *exp_range)
    out = torch.full((M, N), float("nan"), dtype=torch.bfloat16, device=device)
    return GemmInputs(a, a_s, b, b_s, out)


def check_rows_of(M: int) -> list[int]:
    """Every row up to CHECK_ROWS, else rows 0, s, 2s, ... (s = M // CHECK_ROWS) and the last row."""
    if M <= CHECK_ROWS:
        return list(range(M))
    step = M // CHECK_ROWS
    return sorted(set(range(0, M, step)) | {M - 1})


def expected_rows(inputs: GemmInputs) -> tuple:
    """(row indices, their float64 reference): what :func:`verify` compares (reusable across backends)."""
    import torch

    from .reference import reference

    rows = torch.tensor(check_rows_of(inputs.a.shape[0]), device=inputs.a.device, dtype=torch.long)
    return rows, reference(inputs.a, inputs.a_s, inputs.b, inputs.b_s, rows)


def verify(outputs, inputs: GemmInputs, expected: tuple | None = None) -> CheckResult:
    """The family's check, usable on any output of any backend (see the module docstring);
    ``expected`` is :func:`expected_rows` of ``inputs`` when already computed."""
    import torch

    from .reference import check_rows

    if tuple(outputs.shape) != tuple(inputs.out.shape):
        return CheckResult(False, f"output shape {list(outputs.shape)}, expected {list(inputs.out.shape)}")
    if not bool(torch.isfinite(outputs).all()):
        bad = int((~torch.isfinite(outputs)).sum())
        return CheckResult(False, f"{bad} NaN/inf output element(s) (an unwritten tile, or an overflow)",
                           {"nonfinite": bad})
    rows, ref = expected if expected is not None else expected_rows(inputs)
    ok, why, diag = check_rows(outputs[rows], ref)
    diag["rows_checked"] = int(rows.numel())
    return CheckResult(ok, why, diag)


@dataclass(frozen=True)
class Fp8Built:
    config: dict
    call: Any = None          # a library's call; None for the Triton kernel


class Fp8GemmFamily(Family):
    name = "fp8_gemm"

    def __init__(self, workloads: list | None = None, target: str | None = None, backends: list | None = None,
                 profile: str | None = None, triton_configs: list | None = None, export_dir: str | None = None):
        """``triton_configs`` (dicts of the Triton axes) replaces the profile's per-M buckets: each
        is then timed on every workload. ``export_dir``: where a timed sweep writes the allow-list
        JSON and predicate (``tune fp8-gemm --export``)."""
        import dataclasses

        self.export_dir = export_dir
        self.profile = load_profile(profile)
        if triton_configs:
            cfgs = tuple({"PIPE": 0, **{k: int(c[k]) for k in TRITON_KEYS if k in c}} for c in triton_configs)
            self.profile = dataclasses.replace(self.profile, buckets=((None, cfgs),))
        self.target = target or local_target() or "sm_90"
        vendor = "amd" if is_amd(self.target) else "nvidia"
        self.backends = list(backends) if backends else [b for b in self.profile.backends if vendor in BACKENDS[b][0]]
        self._workloads = [dict(w) for w in workloads] if workloads else self.profile.workloads()
        self.fp8 = fp8_dtype_name(self.target)
        self._bucket_keys = [{key_of(c) for c in self.profile.triton_configs(self.target, b)}
                             for b in range(len(self.profile.buckets))]
        self.init_kwargs = {"workloads": self._workloads, "target": self.target, "backends": self.backends,
                            "profile": profile, "triton_configs": list(triton_configs or [])}
        self._backends_given = list(backends) if backends else None

    def for_target(self, target) -> "Fp8GemmFamily":
        """The family on ``target``: its AMD-only axes, fp8 type and vendor backends (the
        backends given to this one, else the profile's of that vendor)."""
        name = getattr(target, "name", target)
        if target_problem(name):
            raise UserError(f"fp8_gemm: {target_problem(name)}")
        if name == self.target:
            return self
        return Fp8GemmFamily(**{**self.init_kwargs, "target": name, "backends": self._backends_given})

    def with_workloads(self, workloads: list) -> "Fp8GemmFamily":
        """The family on these (M, N, K): its resources and M buckets read from them."""
        return Fp8GemmFamily(**{**self.init_kwargs, "workloads": workloads, "backends": self._backends_given},
                             export_dir=self.export_dir)

    # --- the space -------------------------------------------------------------------------
    def axes(self) -> dict[str, list]:
        cfgs = self.profile.triton_configs(self.target)
        keys = TRITON_KEYS + amd_keys(self.target)
        return {"backend": list(self.backends), **{k: sorted({c[k] for c in cfgs}) for k in keys}}

    def configs(self) -> list[dict]:
        """The configs a sweep times: the baseline, every bucket's Triton configs, one per library."""
        base = self.baseline_config()
        tri = [c for c in self.profile.triton_configs(self.target) if c != base] if "triton" in self.backends else []
        libs = [library_config(b, self.target) for b in self.backends if b != "triton"]
        return ([base] if "triton" in self.backends else []) + tri + libs

    def baseline_config(self) -> dict:
        return baseline_config(self.target)

    def workloads(self) -> list[dict]:
        return [dict(w) for w in self._workloads]

    def axis_rules(self) -> dict:
        from occtune.validate import Rule

        from .config import ALLOWED

        return {"backend": Rule(str, choices=tuple(self.backends)),
                **{k: Rule(int, choices=ALLOWED[k]) for k in TRITON_KEYS + amd_keys(self.target)}}

    def workload_rules(self) -> dict:
        from occtune.validate import POSITIVE

        return {k: POSITIVE for k in ("M", "N", "K")}

    def is_valid(self, config: dict, workload: dict) -> tuple[bool, str]:
        try:
            c = validate_config(config, self.target, self.backends)
        except UserError as e:
            return False, str(e)
        base = self.baseline_config()
        if c["backend"] != "triton":
            if triton_values(c) != triton_values(base):
                return False, f"{c['backend']} ignores the Triton axes: timed once, with the baseline's values"
            return True, ""
        why = config_problem(c, self.target)
        if why:
            return False, why
        if c["PIPE"] and workload["K"] % 16:
            return False, f"PIPE={c['PIPE']} (TMA loads) needs K % 16 == 0 (16-byte row strides), K={workload['K']}"
        if c["PIPE"] in PIPES_WGMMA:
            why = wgmma_problem(c, workload["N"])
            if why:
                return False, why
        if c == base:
            return True, ""
        b = self.profile.bucket_of(workload["M"])
        if key_of(c) not in self._bucket_keys[b]:
            m_max = self.profile.buckets[b][0]
            return False, f"not in profile.yaml's Triton configs for M <= {m_max}" if m_max else \
                "not in profile.yaml's Triton configs for the largest M bucket"
        return True, ""

    def select_analytic(self, rows: list[dict], target) -> tuple[dict | None, str]:
        """No winner (``analytic_ranks`` is False): a GEMM's speed is set by tile reuse and the
        matrix-core pipeline, which the occupancy model does not see. The rows show what fits; the
        configs are chosen by timing them on the target."""
        fit = sum(1 for r in rows if r.get("fits"))
        return None, (f"no winner: occupancy does not rank GEMM tiles ({fit} of {len(rows)} configs fit); "
                      f"until they are timed on a {target.name} (tune fp8-gemm there, per (n, k) and M) the "
                      "untuned baseline (vLLM/sglang's default) stands")

    # --- analytic and timed hooks: tune fp8-gemm's tables, allow-list and exports (cli.py) -------
    def analytic_space(self, configs: list[dict], target) -> list[dict]:
        from .cli import check_analytic_space

        check_analytic_space(self, configs, target)
        return configs

    def analytic_document(self, doc: dict, result, target) -> dict:
        doc["assumptions"].update(fp8_dtype=self.fp8, resources_workload=self._representative())
        return doc

    def analytic_json(self, result, target) -> dict:
        from .cli import analytic_json

        return analytic_json(self, result, target)

    def show_analytic(self, result, target, view, path) -> bool:
        from .cli import show_analytic

        return show_analytic(self, result, target, view, path)

    def timed_plan(self, target, view, device: str = "cuda"):
        from .cli import timed_plan

        return timed_plan(self, target, view, device)

    def safety_key(self, config: dict) -> float:
        """The library is safer than our kernel (it wins any tie): the vendor validates it across
        driver and toolkit updates, it needs no JIT compile at server start and no per-shape tuned
        config to keep in sync, and it is what sglang now runs on every shape. Among Triton
        configs, less shared memory per block (fewer and smaller stages) is safer: it fits on more
        targets and leaves room for more blocks; pointer loads (PIPE 0) are safer than TMA
        descriptors (PIPE 1-3: sm_90+ only, a global scratch allocator, newer Triton features), and
        those are safer than the Gluon wgmma kernels (PIPE 4-7: Triton's experimental dialect)."""
        if config.get("backend") != "triton":
            return 1.0
        smem = (config["BLOCK_M"] + config["BLOCK_N"]) * config["BLOCK_K"] * config["num_stages"]
        return -smem / 2.0 ** 20 - config.get("PIPE", 0)

    # --- build and resources -----------------------------------------------------------------
    def macros(self, config: dict) -> dict[str, int]:
        c = validate_config(config, self.target, list(BACKENDS))
        out = {"OCCTUNE_FP8_GEMM_BACKEND": list(BACKENDS).index(c["backend"])}
        out.update({f"OCCTUNE_FP8_GEMM_{k.upper()}": c[k] for k in TRITON_KEYS + amd_keys(self.target)})
        return out

    def source_hash(self) -> str:
        h = hashlib.sha256()
        for name in ("kernel.py", "wgmma.py", "backends.py", "reference.py"):
            h.update((Path(__file__).parent / name).read_bytes())
        return h.hexdigest()[:16]

    def build(self, config: dict, device: Any) -> Fp8Built:
        c = validate_config(config, self.target, self.backends)
        if c["backend"] == "triton":
            return Fp8Built(c)
        return Fp8Built(c, runner(c["backend"], str(device), self.fp8))

    def _representative(self) -> dict:
        return max(self._workloads, key=lambda w: (w["M"], w["N"] * w["K"]))

    def built_resources(self, built: Fp8Built, config: dict) -> Resources | None:
        local = local_target()
        if built.call is not None or local is None:
            return None
        from .resources import compiled_resources

        return compiled_resources(built.config, local, self._representative())

    def resources(self, config: dict, target) -> Resources | None:
        if config.get("backend") != "triton":
            return None
        from .resources import compiled_resources

        c = validate_config(config, target.name, list(BACKENDS))
        return compiled_resources(c, target.name, self._representative())

    # --- run and check -----------------------------------------------------------------------
    def make_inputs(self, workload: dict, seed: int, device: Any) -> GemmInputs:
        inp = make_gemm_inputs(workload["M"], workload["N"], workload["K"], seed, device, self.fp8)
        self._prepare(inp, device)
        return inp

    def _prepare(self, inp: GemmInputs, device) -> None:
        for b in self.backends:
            if b != "triton" and availability(b, str(device), self.fp8).ok:
                prepare(b, inp)

    def adversarial_inputs(self, workload: dict, device: Any):
        N, K = workload["N"], workload["K"]
        yield "one row (M=1)", self.make_inputs(workload_m(workload, 1), 101, device)
        inp = make_gemm_inputs(37, N, K, 102, device, self.fp8, exp_range=(-20.0, 20.0))
        _extremes(inp)
        self._prepare(inp, device)
        yield "M=37 (ragged tile), scales 2^-20..2^20, fp8 at +-max, all-zero blocks", inp

    def run(self, built: Fp8Built, inputs: GemmInputs) -> Any:
        """One call as serving code makes it: a library's call, or ``fp8_gemm`` (its launch plan,
        made on the first call of a config and shape) into the inputs' output buffer."""
        if built.call is not None:
            return built.call(inputs)
        from . import fp8_gemm

        return fp8_gemm(inputs.a, inputs.a_s, inputs.b, inputs.b_s, triton_values(built.config), out=inputs.out)

    def check(self, outputs: Any, inputs: GemmInputs, workload: dict) -> CheckResult:
        return verify(outputs, inputs)

    # --- roofline ----------------------------------------------------------------------------
    def bytes_moved(self, workload: dict) -> int:
        M, N, K = workload["M"], workload["N"], workload["K"]
        kb, nb = -(-K // 128), -(-N // 128)
        return M * K + N * K + 4 * (M * kb + nb * kb) + 2 * M * N

    def flops(self, workload: dict) -> int:
        return 2 * workload["M"] * workload["N"] * workload["K"]


def workload_m(w: dict, M: int) -> dict:
    return workload(M, w["N"], w["K"])


def _extremes(inp: GemmInputs) -> None:
    """Row 0 of A and B at +-max of the format, a zeroed 128-column group of A (row 1) and B (block 0)."""
    import torch

    fmax = torch.finfo(inp.a.dtype).max
    sign = torch.where(torch.arange(inp.a.shape[1], device=inp.a.device) % 2 == 0, 1.0, -1.0)
    inp.a[0] = (sign * fmax).to(inp.a.dtype)
    inp.b[0] = (sign * fmax).to(inp.b.dtype)
    inp.a[1, :128] = 0
    inp.b[:128, :128] = 0


FAMILY = Fp8GemmFamily
COMMANDS = {"fp8-gemm": "cli:command"}
EXPORTS = {"allowlist-json": "allowlist:render_json", "predicate": "allowlist:render_predicate"}
