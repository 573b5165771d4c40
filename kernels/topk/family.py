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
from occtune.kernels.topk import runtime as rt
from occtune.kernels.topk import reference as ref
from occtune.engine.family import CheckResult, Family, Resources, phase
from occtune.model.occupancy import max_lds_per_block
from occtune.errors import UserError
from occtune.validate import POSITIVE

K = 2048
NOT_COMPILED = "not compiled"     # the source of a budget's resources that no compile could change


class TopkFamily(Family):
    name = "topk"
    inputs_reusable = True      # run never writes its inputs; outputs are allocated by the launcher
    # The analytic verdict ranks budgets at one block size: the most blocks per CU/SM among those
    # whose candidate list covers the required context (analysis.select_analytic).
    analytic_ranks = True

    def __init__(self, budgets=None, threads=None, bits=None, k: int = K, sweep=None,
                 static_lds: int | None = None, profile=None, scores=None, evidence_dir=None):
        """Axes not given come from the profile (kernels/topk/profile.yaml, or ``profile``, a loaded
        :class:`occtune.kernels.topk.profile.TopkProfile`). ``sweep``: the settings
        (:class:`occtune.kernels.topk.analysis.TopkSweep`: required context, headroom, a measured
        bound, the profile's static LDS for the assumed path); default: the profile's. ``static_lds``:
        replace the compiled static LDS (``tune topk --static-lds``). ``scores``: (file, its
        :class:`occtune.kernels.topk.ties.TieStats`) behind a measured bound (``--scores``).
        ``evidence_dir``: a folder whose timed ``*/topk.yaml`` results refute budgets whose rows
        overflowed (``tune topk`` passes its timed results folder)."""
        self._profile = profile
        self._threads_from_profile = threads is None
        if None in (budgets, threads, bits):
            prof = self.profile
            budgets = prof.budgets if budgets is None else budgets
            threads = prof.threads if threads is None else threads
            bits = (prof.coarse_bits,) if bits is None else bits
        self._axes = {"lds_budget": list(budgets), "threads": list(threads), "bits": list(bits)}
        self.k = int(k)
        self._sweep = sweep
        self._analytic = None
        self.static_lds = static_lds
        self.scores, self.evidence_dir = scores, evidence_dir

    @property
    def profile(self):
        if self._profile is None:
            from .profile import load_topk_profile

            self._profile = load_topk_profile()
        return self._profile

    # --- the space -----------------------------------------------------------------------------
    def axes(self):
        return {a: list(v) for a, v in self._axes.items()}

    def baseline_config(self):
        return {"lds_budget": tk.DEFAULT_BUDGET, "threads": 512, "bits": 8}

    def workloads(self):
        return [{"B": B, "L": L, "K": self.k} for B in (1, 8, 64, 256)
                for L in (8192, 65536, 131072, 1048576)]

    def axis_rules(self):
        return {"lds_budget": tk.BUDGET_RULE, "threads": tk.THREADS_RULE, "bits": tk.BITS_RULE}

    def workload_rules(self):
        return {"B": POSITIVE, "L": POSITIVE, "K": tk.K_RULE}

    def is_valid(self, config, workload):
        try:
            tk.defines(config["lds_budget"], config["threads"], config["bits"])
        except UserError as e:        # the kernel's rules (defines raises nothing else on purpose)
            return False, str(e)
        return True, ""

    def safety_key(self, config):
        return float(config["lds_budget"])   # more candidate headroom is safer

    def admissible(self, config, workload):
        """The timed selection's hard constraint: the budget's candidate list covers the required
        context (the settings' bound: the measured one with --scores, else the uniform estimate)."""
        from occtune.kernels.topk.analysis import capacity_for

        cap = capacity_for(self.settings(), int(config["lds_budget"]), int(config["bits"]))
        return cap.covers_context, ("" if cap.covers_context else
                                    f"tie capacity {cap.entries} entries does not cover the required context")

    # --- build and resources ------------------------------------------------------------------
    def macros(self, config):
        return tk.defines(config["lds_budget"], config["threads"], config["bits"])

    def source_hash(self):
        return hashlib.sha256(tk.read_source().encode()).hexdigest()[:16]

    def build(self, config, device):
        return tk.build(config["lds_budget"], config["threads"], config["bits"], device)

    def warm(self, built, workload, device):
        """Compile the derived kernels (short-row cluster, resident kernel, split main pass, cluster kernel) that
        ``tk.topk`` picks for this workload's shape and for its adversarial sets (at most 8 rows),
        without running: the launcher's own planning, so the same kernels and the same driver
        answers are cached (``occtune.build.rtc`` compiles a kernel once however many build threads ask
        for it)."""
        import torch

        from occtune.kernels.topk.options import TopkOptions

        L, k = int(workload["L"]), int(workload.get("K", self.k))
        _, scap = tk.long_row_plan(L, k)
        if not torch.cuda.is_available():
            return
        dev = torch.device(device)
        dev = dev if dev.index is not None else torch.device("cuda", torch.cuda.current_device())
        nsms = torch.cuda.get_device_properties(dev).multi_processor_count
        b, t, bits = built.defines["SGL_TOPK_DYNAMIC_SMEM_BYTES"], built.defines["TOPK_THREADS"], \
            built.defines["TOPK_COARSE_BITS"]
        opts = TopkOptions().with_config(b, t, bits)

        def plan(B):
            torch.cuda.set_device(dev)     # this thread needs the device's context for the driver's answers
            shape = rt._Shape(B, L, L, k, False, False, 0, 0)
            sc = rt._short_cluster_choice(built, dev, shape, opts)
            if sc is not None:
                rt._cluster_handle(built, sc.size, b, t, bits, dev, sc.regs, sc.threads)
                return
            if rt._resident_choice(built, dev, shape, opts) is not None:
                rt._resident_handle(built, b, t, bits, dev)
                return
            if not scap:
                return
            S = rt._cluster_plan(built, B, L, k, scap, nsms, None, None, b, t, bits, dev)
            if S:
                rt._cluster_kernel(built, S, B, L, b, t, bits, dev)    # the register build, where it applies
            elif B < nsms:
                rt._split_handle(built, b, t, bits, dev)
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
        most = max_lds_per_block(target)
        if budget > most:            # no fit whatever the kernel: not worth a compile (nor always compilable)
            return Resources(threads=threads, static_lds=self.static_lds or 0, dynamic_lds=budget,
                             source=f"{NOT_COMPILED}: the budget alone exceeds {target.name}'s LDS "
                                    f"({most} B per {'workgroup' if target.is_amd else 'block'})")
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
        return self.settings().static_lds

    # --- settings -----------------------------------------------------------------------------
    def settings(self):
        """The sweep's settings (see ``__init__``): the verb's, else the profile's at this
        family's first block size and key width."""
        if self._sweep is None:
            from occtune.kernels.topk.analysis import TopkSweep

            p = self.profile
            self._sweep = TopkSweep(budgets=tuple(self._axes["lds_budget"]), threads=self._axes["threads"][0],
                                    static_lds=p.static_lds, bytes_per_entry=p.bytes_per_entry,
                                    bits=self._axes["bits"][0], required_context=p.required_context,
                                    headroom=p.headroom)
        return self._sweep

    def sweep(self):
        """The analytic settings: :meth:`settings` with the default capacity bound (the worst of
        the uniform estimate and synthetic rows) unless a measured one is given, and the
        overflowed rows of timed results under ``evidence_dir`` as refutations. Made once."""
        if self._analytic is None:
            from dataclasses import replace as _replace

            from occtune.kernels.topk.analysis import timed_overflows, with_default_bound

            s = self.settings()
            if s.max_candidates is None and s.synthetic is None:
                s = with_default_bound(s, self.k)
            if self.evidence_dir is not None:
                s = _replace(s, timed_overflow=timed_overflows(self.evidence_dir, s.required_context))
            self._analytic = s
        return self._analytic

    def scores_stats(self):
        """The tie statistics of ``--scores`` rows, or None."""
        return self.scores[1] if self.scores else None

    # --- analytic hooks: the budgets rank (tune topk's table and document: cli.py) -------------
    def resources_workers(self, target) -> int:
        """clang runs as a process per config: compile the budgets side by side (cached on disk)."""
        import os

        return (os.cpu_count() or 1) if target.is_amd else 1

    def analytic_columns(self, config, target):
        from occtune.kernels.topk.analysis import capacity_columns, resident_columns

        budget, bits = int(config["lds_budget"]), int(config["bits"])
        units = target.compute_units if target.is_amd else target.sms
        out = {**capacity_columns(self.sweep(), budget, bits),
               **resident_columns(budget, units, self._resident_blocks(config, target))}
        stats = self.scores_stats()
        if stats is not None:       # the measured bound: how many of the file's rows overflow this budget
            out.update(rows_overflowing=int(stats.overflow_rows(bits, budget, self.settings().bytes_per_entry)),
                       rows_measured=int(stats.rows))
        return out

    def analytic_space(self, configs, target):
        """One block size: the profile's list (512,1024), where no threads were given to this
        family, narrows to its first; several sizes asked for are refused (blocks per CU/SM do not
        compare across sizes)."""
        from .cli import check_one_block_size

        threads = list(dict.fromkeys(int(c["threads"]) for c in configs))
        if self._threads_from_profile and threads == list(self.profile.threads) and len(threads) > 1:
            configs = [c for c in configs if int(c["threads"]) == threads[0]]
        check_one_block_size(configs, target)
        return configs

    def check_analytic_result(self, result, target):
        from .cli import require_every_budget

        require_every_budget(result, target)

    def _resident_blocks(self, config, target) -> int | None:
        """Blocks of the resident kernel per CU/SM on ``target``: its own compile's resources, the
        budget as its dynamic LDS; None where no compiler builds for the target."""
        from occtune.build import compiled
        from occtune.model.occupancy import Resources, occupancy

        if int(config["lds_budget"]) > max_lds_per_block(target):
            return 0                 # no fit whatever the kernel (and not always compilable)
        probe = compiled.hip_resources if target.is_amd else compiled.cuda_resources
        threads = int(config["threads"])
        try:
            r = probe(tk.read_source(), tk.RESIDENT_KERNEL_NAME, {**self.macros(config), "TOPK_RESIDENT": 1},
                      target.name, threads=threads, name=tk.SOURCE_PATH.name, shipped=tk.PRECOMPUTED)
        except (compiled.NoCompilerError, compiled.CompileError):
            return None
        occ = occupancy(target, Resources(threads=threads, static_lds=r.static_lds, dynamic_lds=int(config["lds_budget"]),
                                          vgprs=r.vgprs, agprs=r.agprs, sgprs=r.sgprs, regs=r.regs))
        return occ.blocks_per_cu if occ.fits else 0

    def select_analytic(self, rows, target):
        from .cli import select_analytic

        return select_analytic(self, rows, target)

    def analytic_document(self, doc, result, target):
        from .cli import analytic_document

        return analytic_document(self, doc, result, target)

    def analytic_json(self, result, target):
        return {"configs": result.rows}

    def show_analytic(self, result, target, view, path):
        from .cli import show_analytic

        return show_analytic(self, result, target, view, path)

    def timed_plan(self, target, view, device="cuda"):
        from .cli import timed_plan

        return timed_plan(self, target)

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
