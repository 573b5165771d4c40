"""A new family is one package: written into a temporary folder, found by the registry through
$OCCTUNE_FAMILY_PATH, verified and swept by `tune sweep` on the CPU (TRITON_INTERPRET=1), with no
edit anywhere else. Also: the engine and CLI never name a shipped family."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

import yaml

from clihelp import REPO


TOY = textwrap.dedent('''
    """A toy family: y = alpha * x, one Triton kernel, two axes (BLOCK, num_warps)."""
    import hashlib
    import inspect

    import triton
    import triton.language as tl

    from occtune.engine.family import CheckResult, Family


    @triton.jit
    def scale_kernel(x_ptr, y_ptr, n, alpha, BLOCK: tl.constexpr):
        offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
        mask = offs < n
        tl.store(y_ptr + offs, tl.load(x_ptr + offs, mask=mask) * alpha, mask=mask)


    class ToyFamily(Family):
        name = "toyvec"

        def axes(self):
            return {"BLOCK": [32, 64, 128], "num_warps": [1, 2]}

        def baseline_config(self):
            return {"BLOCK": 32, "num_warps": 1}

        def workloads(self):
            return [{"n": 1000}, {"n": 4099}]

        def is_valid(self, config, workload):
            return (config["BLOCK"] <= 64 or workload["n"] > 2000), "BLOCK 128 only for long vectors"

        def macros(self, config):
            return {"TOY_BLOCK": config["BLOCK"], "TOY_NUM_WARPS": config["num_warps"]}

        def source_hash(self):
            return hashlib.sha256(inspect.getsource(scale_kernel.fn if hasattr(scale_kernel, "fn")
                                                    else scale_kernel).encode()).hexdigest()[:16]

        def build(self, config, device):
            return dict(config)

        def make_inputs(self, workload, seed, device):
            import torch

            g = torch.Generator().manual_seed(seed)
            x = torch.randn(workload["n"], generator=g).to(device)
            return {"x": x, "y": torch.full_like(x, float("nan"))}

        def run(self, built, inputs):
            n = inputs["x"].numel()
            BLOCK = built["BLOCK"]
            # the BLOCK=64 build has a bug: it skips the last block (verification must catch it)
            grid = (triton.cdiv(n, BLOCK) - (1 if BLOCK == 64 else 0),)
            scale_kernel[grid](inputs["x"], inputs["y"], n, 2.0, BLOCK=BLOCK, num_warps=built["num_warps"])
            return inputs["y"]

        def check(self, outputs, inputs, workload):
            import torch

            ok = bool(torch.equal(outputs, inputs["x"] * 2.0))
            return CheckResult(ok, "" if ok else "y != 2x")

        def bytes_moved(self, workload):
            return 8 * workload["n"]


    FAMILY = ToyFamily
''')


def _tune(args, tmp_path, **env):
    e = dict(os.environ, OCCTUNE_FAMILY_PATH=str(tmp_path / "families"), OCCTUNE_CACHE_DIR=str(tmp_path / "cache"),
             TRITON_INTERPRET="1", **env)
    return subprocess.run([sys.executable, "-m", "occtune", *args], capture_output=True, text=True, env=e,
                          timeout=300, cwd=tmp_path)


def test_a_family_package_in_a_folder_is_found_verified_and_swept(tmp_path):
    pkg = tmp_path / "families" / "toyvec"
    pkg.mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "family.py").write_text(TOY)

    listed = _tune(["sweep", "--list", "--json"], tmp_path)
    assert listed.returncode == 0, listed.stderr
    names = {f["name"]: f for f in json.loads(listed.stdout)["families"]}
    assert {"toyvec", "topk", "rope"} <= set(names) and names["toyvec"]["origin"] == str(tmp_path / "families")

    r = _tune(["sweep", "toyvec", "--device", "cpu", "--out", "res", "--rep-ms", "2", "--warmup-ms", "1",
               "--json"], tmp_path)
    assert r.returncode == 0, r.stderr
    doc = json.loads(r.stdout)
    by = {(row["config"]["BLOCK"], row["config"]["num_warps"], row["workload"]["n"]): row for row in doc["rows"]}
    assert len(by) == 12
    assert by[(128, 1, 1000)]["status"] == "skipped"            # is_valid pruned it
    assert all(by[(64, w, n)]["status"] == "wrong" for w in (1, 2) for n in (1000, 4099))   # the bug is caught
    assert all(by[(b, w, 4099)]["status"] == "ok" for b in (32, 128) for w in (1, 2))
    assert doc["winner"]["config"]["BLOCK"] != 64
    saved = yaml.safe_load((tmp_path / "res" / "cpu" / "toyvec.yaml").read_text())
    assert saved["family"] == "toyvec" and saved["winner"]["config"] == doc["winner"]["config"]
    assert saved["provenance"]["git_revision"] is not None or saved["provenance"]["git_revision_why"]

    bad = _tune(["sweep", "toyvec", "--device", "cpu", "--set", "BLOCKS=1"], tmp_path)
    assert bad.returncode == 2 and "BLOCKS" in bad.stderr and "Traceback" not in bad.stderr


def test_engine_and_cli_never_name_a_shipped_family():
    hits = []
    for path in (REPO / "tuner").rglob("*.py"):
        for i, line in enumerate(path.read_text().splitlines(), 1):
            if ("kernels.topk" in line or "kernels.rope" in line) and path.name != "registry.py":
                hits.append(f"{path.relative_to(REPO)}:{i}: {line.strip()}")
    assert hits == []
