"""The RoPE kernel family for the tuning engine: variant x BLOCK_M x num_warps on DeepSeek-V4's
real shapes (inverse rope on the last 64 columns of a bf16 ``[T, 128, 512]`` attention output).

``run`` writes out of place into the matching slice of a second ``[T, H, head_dim]`` tensor, so
the input is never modified and the engine may rerun a config as often as it likes, with the
same strided store pattern as the in-place call. That tensor is NaN-poisoned by ``make_inputs``:
``check`` fails on any NaN in the rope columns and on any write outside them.

The engine makes each workload's inputs once and reuses them for every config
(``inputs_reusable``): ``reset_outputs`` re-poisons ``dst`` before each verification run, and
``check`` keeps the reference (computed on the inputs' device, float64 math) in the inputs.
``warm`` compiles the Triton specialisations a workload and its adversarial sets need, ahead.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from occtune.engine.family import CheckResult, Family, Resources, phase

from .config import AXIS_RULES, BASELINE_CONFIG, VARIANT_NAMES, WORKLOAD_RULES, local_target, validate_config

DEEPSEEK_TOKENS = (1, 64, 1024, 8192, 32768)
_ESIZE = {"bf16": 2, "fp16": 2, "fp32": 4}
# check bounds per dtype: relative L2 error, and max-abs error relative to max |reference|
_TOL = {"bf16": (1e-2, 2.0**-7), "fp16": (2e-3, 2.0**-10), "fp32": (1e-5, 1e-5)}


def deepseek_workload(T: int, H: int = 128, D: int = 64, head_dim: int = 512, dtype: str = "bf16",
                      inverse: bool = True, positions: bool = True) -> dict:
    return {"T": T, "H": H, "D": D, "head_dim": head_dim, "dtype": dtype, "inverse": inverse,
            "positions": positions}


def odd_rope_dim(D: int) -> int:
    """The adversarial set's rope_dim for workloads of rope_dim ``D``: not a power of two, so the
    tile's last columns are masked, yet the kernel binary the workload itself runs (the same
    BLOCK_D and 16-divisibility: D - 16, e.g. 48 for 64) where there is one, so verification
    covers the binary being timed and adds no compile; else D - 2 (its own specialisation)."""
    d, block_d = D - 16, max(2, 1 << (D - 1).bit_length())
    return d if 2 * d > block_d and d & (d - 1) else max(2, D - 2)


@dataclass
class RopeInputs:
    x: Any            # [T, H, D] strided view (the rope columns of ``src``)
    freqs: Any        # complex64 [S, D/2]
    f2: Any           # its fp32 [S, D] view
    positions: Any    # int64 [T] or None
    inverse: bool
    dst: Any          # [T, H, head_dim], NaN-poisoned
    out: Any          # dst[..., -D:]
    ref: Any = None   # the reference rotation (fp32 for 16-bit outputs, else fp64), made by check


@dataclass(frozen=True)
class RopeBuilt:
    config: dict


class RopeFamily(Family):
    name = "rope"
    inputs_reusable = True
    compile_processes = True      # Triton's compiler holds the GIL; its disk cache carries the result

    def __init__(self, workloads: list | None = None):
        self._workloads = [dict(w) for w in workloads] if workloads else [deepseek_workload(t) for t in DEEPSEEK_TOKENS]
        self.init_kwargs = {"workloads": self._workloads} if workloads else {}

    # --- the space -------------------------------------------------------------------------
    def axes(self) -> dict[str, list]:
        return {"variant": list(VARIANT_NAMES), "BLOCK_M": [8, 16, 32, 64, 128], "num_warps": [1, 2, 4, 8]}

    def baseline_config(self) -> dict:
        return dict(BASELINE_CONFIG)

    def workloads(self) -> list[dict]:
        return [dict(w) for w in self._workloads]

    def axis_rules(self) -> dict:
        return dict(AXIS_RULES)

    def workload_rules(self) -> dict:
        return dict(WORKLOAD_RULES)

    def is_valid(self, config: dict, workload: dict) -> tuple[bool, str]:
        if config["variant"] == "token" and config["BLOCK_M"] != 8:
            return False, "the token kernel ignores BLOCK_M: swept at BLOCK_M=8 only"
        if config["variant"] == "heads" and config["BLOCK_M"] > max(8, 2 * workload.get("H", 1)):
            return False, "heads kernel: BLOCK_M far above the head count leaves the tile empty"
        return True, ""

    def safety_key(self, config: dict) -> float:
        """Fewer elements per thread (less register pressure, no spills on other targets) is safer."""
        per_program = 1 if config["variant"] == "token" else config["BLOCK_M"]
        return -per_program / config["num_warps"]

    # --- build and resources -----------------------------------------------------------------
    def macros(self, config: dict) -> dict[str, int]:
        """Integers only: the variant is its index in VARIANT_NAMES (the export names the constants)."""
        c = validate_config(config)
        return {"OCCTUNE_ROPE_VARIANT": VARIANT_NAMES.index(c["variant"]), "OCCTUNE_ROPE_BLOCK_M": c["BLOCK_M"],
                "OCCTUNE_ROPE_NUM_WARPS": c["num_warps"]}

    def macro_constants(self) -> dict[str, int]:
        return {f"OCCTUNE_ROPE_VARIANT_{name.upper()}": i for i, name in enumerate(VARIANT_NAMES)}

    def source_hash(self) -> str:
        h = hashlib.sha256()
        for name in ("kernels.py", "__init__.py"):
            h.update((Path(__file__).parent / name).read_bytes())
        return h.hexdigest()[:16]

    def build(self, config: dict, device: Any) -> RopeBuilt:
        return RopeBuilt(validate_config(config))

    def warm(self, built: RopeBuilt, workload: dict, device: Any) -> None:
        """Compile (Triton ``warmup``: no launch) the kernel specialisations this workload and its
        adversarial sets will launch; nothing under Triton's interpreter."""
        import torch

        from .kernels import VARIANTS, warm_args

        kernel = VARIANTS[built.config["variant"]][0]
        if not hasattr(kernel, "warmup") or not str(device).startswith("cuda"):
            return
        for w, _ in self._shapes(workload):
            args, kwargs, grid = warm_args(w, built.config, {"bf16": torch.bfloat16, "fp16": torch.float16,
                                                             "fp32": torch.float32}[w["dtype"]])
            kernel.warmup(*args, grid=grid, **kwargs)

    def _shapes(self, workload: dict):
        """(workload, seed) of the random set and of each adversarial set."""
        w = {**deepseek_workload(1), **workload}
        yield w, None
        d = odd_rope_dim(int(w["D"]))
        yield {**w, "T": 37, "D": d, "head_dim": d + 112, "positions": True}, 7
        yield {**w, "T": 1}, 8

    def built_resources(self, built: RopeBuilt, config: dict) -> Resources | None:
        from .resources import compiled_resources

        target = local_target()
        return compiled_resources(built.config, target) if target else None

    def with_workloads(self, workloads: list) -> "RopeFamily":
        return RopeFamily(workloads=workloads)

    def representative(self) -> dict:
        """The workload whose specialisation resources are read from: the largest T."""
        return max(self._workloads, key=lambda w: w["T"])

    def resources(self, config: dict, target) -> Resources | None:
        """Cross-compiled by Triton for ``target`` at the largest T (the launcher's specialisation)."""
        from .resources import compiled_resources

        return compiled_resources(validate_config(config), target.name, self.representative())

    # --- analytic and timed hooks: tune rope's tables and plan (cli.py) ------------------------
    # analytic_ranks stays False: a memory-bound kernel's speed is not set by how many blocks fit,
    # so the analytic run shows every config's resources and occupancy and crowns none.
    def analytic_document(self, doc: dict, result, target) -> dict:
        doc["assumptions"]["resources_workload"] = self.representative()
        return doc

    def analytic_json(self, result, target) -> dict:
        from .cli import analytic_json

        return analytic_json(self, result, target)

    def show_analytic(self, result, target, view, path) -> bool:
        from .cli import show_analytic

        return show_analytic(self, result, target, view, path)

    def timed_plan(self, target, view, device="cuda"):
        from .cli import timed_plan

        return timed_plan(self, target)

    # --- run and check -----------------------------------------------------------------------
    def make_inputs(self, workload: dict, seed: int, device: Any) -> RopeInputs:
        import torch

        w = {**deepseek_workload(1), **workload}
        T, H, D, hd = w["T"], w["H"], w["D"], w["head_dim"]
        dtype = {"bf16": torch.bfloat16, "fp16": torch.float16, "fp32": torch.float32}[w["dtype"]]
        g = torch.Generator(device=device).manual_seed(seed)
        src = torch.randn((T, H, hd), generator=g, device=device, dtype=dtype)
        S = T + 17
        ang = torch.rand((S, D // 2), generator=g, device=device, dtype=torch.float32) * 6.2831853
        freqs = torch.polar(torch.ones_like(ang), ang)
        pos = torch.randperm(S, generator=g, device=device)[:T] if w["positions"] else None
        dst = torch.full_like(src, float("nan"))
        return RopeInputs(src[..., -D:], freqs, torch.view_as_real(freqs).reshape(S, D), pos,
                          bool(w["inverse"]), dst, dst[..., -D:])

    def adversarial_inputs(self, workload: dict, device: Any):
        names = ("odd T=37, rope_dim {D} (not a power of two), shuffled positions", "one token")
        for name, (w, seed) in zip(names, list(self._shapes(workload))[1:]):
            yield name.format(D=w["D"]), self.make_inputs(w, seed, device)

    def reset_outputs(self, inputs: RopeInputs) -> None:
        inputs.dst.fill_(float("nan"))

    def run(self, built: RopeBuilt, inputs: RopeInputs) -> Any:
        from .kernels import launch

        c = built.config
        launch(c["variant"], inputs.x, inputs.out, inputs.f2, inputs.positions, inputs.inverse,
               c["BLOCK_M"], c["num_warps"])
        return inputs.out

    def run_naive(self, inputs: RopeInputs) -> Any:
        """The plain torch path, for the benchmark's comparison (same inputs, same output slice)."""
        from . import naive_torch_rope

        return inputs.out.copy_(naive_torch_rope(inputs.x, inputs.freqs, inputs.positions, inputs.inverse))

    def check(self, outputs: Any, inputs: RopeInputs, workload: dict) -> CheckResult:
        """Against the float64 rotation on the inputs' device (kept in ``inputs.ref``); one host
        synchronisation for all the numbers."""
        import torch

        dtype = {torch.bfloat16: "bf16", torch.float16: "fp16", torch.float32: "fp32"}[inputs.out.dtype]
        rel_tol, abs_tol = _TOL[dtype]
        D = inputs.x.shape[-1]
        if inputs.ref is None:
            with phase("reference"):
                inputs.ref = self._reference(inputs, torch.float64 if dtype == "fp32" else torch.float32)
        zero = torch.zeros((), dtype=torch.float64, device=inputs.x.device)
        num, den, max_err, max_ref, nan_out = zero.clone(), zero.clone(), zero.clone(), zero.clone(), zero.clone()
        for t0 in range(0, inputs.x.shape[0], 1024):    # in chunks: bounded memory
            ref = inputs.ref[t0:t0 + 1024].double()
            out = outputs[t0:t0 + 1024].double()
            nan_out += torch.isnan(out).sum()
            diff = out - ref
            num += (diff * diff).nansum()
            den += (ref * ref).sum()
            max_err = torch.maximum(max_err, diff.abs().nan_to_num(0.0).max())
            max_ref = torch.maximum(max_ref, ref.abs().max())
        outside_ok = torch.isnan(inputs.dst[..., :-D]).all().double()
        outside_ok, nan_out, num, den, max_err, max_ref = torch.stack(
            [outside_ok, nan_out, num, den, max_err, max_ref]).tolist()
        if not outside_ok:
            return CheckResult(False, "wrote outside the rope columns (missing column mask?)")
        if nan_out:
            return CheckResult(False, "NaN in the output (a row or column left unwritten?)")
        rel = (num / den) ** 0.5 if den > 0 else float(num > 0)
        diag = {"rel_l2": rel, "max_abs_err": max_err}
        if not rel < rel_tol:
            return CheckResult(False, f"relative L2 error {rel:.3g} >= {rel_tol:g}", diag)
        if not max_err <= abs_tol * max_ref:
            return CheckResult(False, f"max abs error {max_err:.3g} > {abs_tol:.3g} x max|ref| {max_ref:.3g}", diag)
        return CheckResult(True, "", diag)

    @staticmethod
    def _reference(inputs: RopeInputs, dtype):
        """The float64 rotation of ``inputs``, stored as ``dtype``, computed in chunks on the device."""
        import torch

        from . import reference_rope

        T = inputs.x.shape[0]
        ref = torch.empty(inputs.x.shape, dtype=dtype, device=inputs.x.device)
        for t0 in range(0, T, 1024):
            sl = slice(t0, t0 + 1024)
            pos = inputs.positions[sl] if inputs.positions is not None else torch.arange(
                t0, min(t0 + 1024, T), device=inputs.x.device)
            ref[sl] = reference_rope(inputs.x[sl], inputs.freqs, pos, inputs.inverse)
        return ref

    # --- roofline ----------------------------------------------------------------------------
    def bytes_moved(self, workload: dict) -> int:
        w = {**deepseek_workload(1), **workload}
        T, H, D = w["T"], w["H"], w["D"]
        return 2 * T * H * D * _ESIZE[w["dtype"]] + T * D * 4 + (T * 8 if w["positions"] else 0)

    def flops(self, workload: dict) -> int:
        return 3 * workload["T"] * workload["H"] * workload["D"]     # 4 mul + 2 add per pair


FAMILY = RopeFamily
COMMANDS = {"rope": "cli:command"}
