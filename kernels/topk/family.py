"""The top-k family for the tuning engine: LDS-budget sweep of ``topk.cuh``.

Resources per target come from the compiled kernel (:mod:`occtune.build.compiled`: clang's AMDGPU
backend for gfx targets, NVRTC or nvcc for sm targets). ``topk.cuh`` also defines the split and
cluster kernels the launcher uses for long rows on few rows; the occupancy verdict is for the main
kernel, ``topk_transform_kernel``, the one every row runs through.
"""

from __future__ import annotations

import hashlib
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace

import numpy as np

from occtune.kernels import topk as tk
from occtune.kernels.topk import reference as ref
from occtune.engine.family import CheckResult, Family, Resources, phase
from occtune.errors import UserError

K = 2048


class TopkFamily(Family):
    name = "topk"
    inputs_reusable = True      # run never writes its inputs; outputs are allocated by the launcher

    def __init__(self, budgets=None, threads=None, bits=None, k: int = K, sweep=None,
                 static_lds: int | None = None):
        """Axes not given come from the profile (kernels/topk/profile.yaml). ``sweep``: the analytic settings (:class:`occtune.kernels.topk.analysis.TopkSweep`:
        capacity bound, required context, the profile's static LDS for the assumed path); default:
        the profile's, with the synthetic capacity bound. ``static_lds``: replace the compiled
        static LDS (``tune topk --static-lds``)."""
        if None in (budgets, threads, bits):
            from .profile import load_topk_profile

            prof = load_topk_profile()
            budgets = prof.budgets if budgets is None else budgets
            threads = (prof.threads,) if threads is None else threads
            bits = (prof.coarse_bits,) if bits is None else bits
        self._axes = {"lds_budget": list(budgets), "threads": list(threads), "bits": list(bits)}
        self.k = int(k)
        self._sweep = sweep
        self.static_lds = static_lds

    # --- the space -----------------------------------------------------------------------------
    def axes(self):
        return {a: list(v) for a, v in self._axes.items()}

    def baseline_config(self):
        return {"lds_budget": tk.DEFAULT_BUDGET, "threads": 512, "bits": 8}

    def workloads(self):
        return [{"B": B, "L": L, "K": self.k} for B in (1, 8, 64, 256)
                for L in (8192, 65536, 131072, 1048576)]

    def is_valid(self, config, workload):
        try:
            tk.defines(config["lds_budget"], config["threads"], config["bits"])
        except UserError as e:        # the kernel's rules (defines raises nothing else on purpose)
            return False, str(e)
        return True, ""

    def safety_key(self, config):
        return float(config["lds_budget"])   # more candidate headroom is safer

    # --- build and resources ------------------------------------------------------------------
    def macros(self, config):
        return tk.defines(config["lds_budget"], config["threads"], config["bits"])

    def source_hash(self):
        return hashlib.sha256(tk.read_source().encode()).hexdigest()[:16]

    def build(self, config, device):
        return tk.build(config["lds_budget"], config["threads"], config["bits"], device)

    def warm(self, built, workload, device):
        """Compile the derived kernels (split main pass, cluster kernel) that ``tk.topk`` picks
        for this workload's shape and for its adversarial sets (at most 8 rows), without running:
        the launcher's own planning, so the same kernels and the same driver answers are cached
        (``occtune.build.rtc`` compiles a kernel once however many build threads ask for it)."""
        import torch

        L, k = int(workload["L"]), int(workload.get("K", self.k))
        _, scap = tk.long_row_plan(L, k)
        if not scap or not torch.cuda.is_available():
            return
        dev = torch.device(device)
        dev = dev if dev.index is not None else torch.device("cuda", torch.cuda.current_device())
        nsms = torch.cuda.get_device_properties(dev).multi_processor_count
        b, t, bits = built.defines["SGL_TOPK_DYNAMIC_SMEM_BYTES"], built.defines["TOPK_THREADS"], \
            built.defines["TOPK_COARSE_BITS"]

        def plan(B):
            torch.cuda.set_device(dev)     # this thread needs the device's context for the driver's answers
            S = tk._cluster_plan(built, B, L, k, scap, nsms, None, None, b, t, bits, dev)
            if S:
                tk._cluster_kernel(built, S, B, L, b, t, bits, dev)    # the register build, where it applies
            elif B < nsms:
                tk._split_handle(built, b, t, bits, dev)
        # the workload's rows and its adversarial sets' (at most 8) side by side: each plan may
        # wait seconds for a compile, and the second would otherwise start its own only then
        with ThreadPoolExecutor(2, thread_name_prefix="occtune-plan") as pool:
            list(pool.map(plan, sorted({int(workload["B"]), min(int(workload["B"]), 8)})))

    def built_resources(self, built, config):
        info = getattr(built, "info", {}) or {}
        if "static_smem" not in info:
            return None          # the driver did not say (e.g. attribute query unavailable)
        return Resources(threads=config["threads"], static_lds=info["static_smem"],
                         dynamic_lds=config["lds_budget"], regs=info.get("num_regs"),
                         source="driver")

    def resources(self, config, target):
        """The main kernel compiled for ``target``; the budget is its dynamic LDS. Without a compiler
        for the target: the profile's static LDS and unknown registers, marked assumed."""
        from occtune.build import compiled

        probe = compiled.hip_resources if target.is_amd else compiled.cuda_resources
        budget, threads = int(config["lds_budget"]), int(config["threads"])
        try:
            res = probe(tk.read_source(), tk.KERNEL_NAME, self.macros(config), target.name, threads=threads,
                        name=tk.SOURCE_PATH.name, shipped=tk.PRECOMPUTED)
        except compiled.NoCompilerError as e:
            static = self.static_lds if self.static_lds is not None else self._profile_static_lds()
            return Resources(threads=threads, static_lds=static, dynamic_lds=budget,
                             source=f"assumed: {e}; static LDS {static} B from the profile, registers unknown")
        res = replace(res, dynamic_lds=budget)
        if self.static_lds is not None:
            res = replace(res, static_lds=self.static_lds, source=f"{res.source}; static LDS {self.static_lds} B "
                                                                  "given by --static-lds")
        return res

    def _profile_static_lds(self) -> int:
        from occtune.kernels.topk.profile import load_topk_profile

        return self._sweep.static_lds if self._sweep is not None else load_topk_profile().static_lds

    # --- analytic hooks -----------------------------------------------------------------------
    def sweep(self):
        """The analytic settings (see ``__init__``), built from the profile on first use."""
        if self._sweep is None:
            from occtune.kernels.topk.analysis import TopkSweep, with_default_bound
            from occtune.kernels.topk.profile import load_topk_profile

            p = load_topk_profile()
            self._sweep = with_default_bound(TopkSweep(
                budgets=tuple(self._axes["lds_budget"]), threads=self._axes["threads"][0], static_lds=p.static_lds,
                bytes_per_entry=p.bytes_per_entry, bits=self._axes["bits"][0], required_context=p.required_context,
                headroom=p.headroom), self.k)
        return self._sweep

    def analytic_columns(self, config, target):
        from occtune.kernels.topk.analysis import capacity_columns

        return capacity_columns(self.sweep(), int(config["lds_budget"]), int(config["bits"]))

    def select_analytic(self, rows, target):
        from occtune.kernels.topk.analysis import select_analytic

        return select_analytic(rows)

    # --- run and check ------------------------------------------------------------------------
    def _to_inputs(self, scores, lengths, device, workload):
        import torch

        return {"scores": torch.from_numpy(scores).to(device),
                "lengths": torch.from_numpy(np.asarray(lengths, np.int32)).to(device),
                "k": int(workload.get("K", self.k))}

    def make_inputs(self, workload, seed, device):
        # Random normal rows drawn by torch on the target device (seeded per point): a 256 x 1M
        # input takes ~10 s to draw with numpy on a CPU core and is drawn twice per point (verify,
        # then time), which made a timed sweep CPU-bound. The adversarial sets stay numpy.
        import torch

        B, L = int(workload["B"]), int(workload["L"])
        g = torch.Generator(device=device)
        g.manual_seed(int(seed))
        return {"scores": torch.randn(B, L, generator=g, device=device, dtype=torch.float32),
                "lengths": torch.full((B,), L, dtype=torch.int32, device=device),
                "k": int(workload.get("K", self.k))}

    def adversarial_inputs(self, workload, device):
        # Keep verification affordable: at most 8 rows per case, full row length.
        B = min(int(workload["B"]), 8)
        for name, s, lens in ref.adversarial_cases(B, int(workload["L"]), workload.get("K", self.k)):
            yield name, self._to_inputs(s, lens, device, workload)

    def reset_outputs(self, inputs):
        """The launcher allocates the output; on reused inputs the allocator may hand a config the
        very block that holds its predecessor's (correct) answer. Poison that block first: a
        [B, k] int32 tensor of -2 allocated and freed just before the run is, in torch's caching
        allocator, the block the run's own output of that size gets next (best fit, lowest
        address). Best effort: the adversarial sets, run in between, differ from each other."""
        import torch

        B = inputs["scores"].shape[0]
        torch.full((B, int(inputs["k"])), -2, dtype=torch.int32, device=inputs["scores"].device)

    def run(self, built, inputs):
        out, diag = tk.topk(inputs["scores"], inputs["k"], inputs["lengths"], kernel=built,
                            return_diagnostics="lazy")   # lazy: no host sync inside the timed call
        return {"out": out, "diag": diag}

    def check(self, outputs, inputs, workload):
        """Tie-aware, on the inputs' device; the reference keys are kept in ``inputs`` (made once
        per input set, reused by every config). The CPU check is the fallback when the device
        has no room for it."""
        import torch

        k = inputs["k"]
        try:
            if "_want" not in inputs:
                with phase("reference"):
                    inputs["_want"] = ref.reference_keys(inputs["scores"], inputs["lengths"], k)
            ok, why = ref.check_topk_torch(inputs["scores"], inputs["lengths"], k, outputs["out"],
                                           want=inputs["_want"])
        except torch.cuda.OutOfMemoryError:
            ok, why = ref.check_topk(inputs["scores"].cpu(), inputs["lengths"].cpu(), k, outputs["out"].cpu())
        diag = outputs["diag"]
        overflow = int((diag["bin_counts"] > diag["capacity"]).sum().item())
        flags = tk.flag_counts(diag["row_flags"]) if "row_flags" in diag else {}
        return CheckResult(ok, why, {"overflow_rows": overflow,
                                     "capacity": diag["capacity"],
                                     "max_threshold_bin": int(diag["bin_counts"].max().item())
                                     if diag["bin_counts"].numel() else 0,
                                     **{name: n for name, n in flags.items() if n}})

    # --- roofline -----------------------------------------------------------------------------
    def bytes_moved(self, workload):
        k = workload.get("K", self.k)
        return workload["B"] * workload["L"] * 4 + workload["B"] * k * 4


FAMILY = TopkFamily
COMMANDS = {"topk": "cli:command", "ties": "ties_cli:command"}
