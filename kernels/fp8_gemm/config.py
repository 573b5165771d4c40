"""FP8 GEMM configs, workloads and the sweep profile (profile.yaml).

A config is a flat dict: ``backend`` plus the Triton axes (``BLOCK_M BLOCK_N BLOCK_K GROUP_M
num_warps num_stages``) and, on AMD targets only, ``matrix_instr_nonkdim waves_per_eu`` (and
``kpack`` on gfx942). A library backend's config carries the baseline's Triton values, which it
ignores, so that every config has the same keys (tables, caches and exports stay uniform).
A workload is ``{"M": int, "N": int, "K": int}``.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from pathlib import Path

from occtune.errors import UserError

SCALE_GROUP = 128      # the quantisation group along K (1 x 128 for A, 128 x 128 for B)
TRITON_KEYS = ("BLOCK_M", "BLOCK_N", "BLOCK_K", "GROUP_M", "num_warps", "num_stages", "PIPE")
AMD_KEYS = ("matrix_instr_nonkdim", "waves_per_eu", "kpack")
ALLOWED = {"BLOCK_M": (16, 32, 64, 128, 256), "BLOCK_N": (16, 32, 64, 128, 256), "BLOCK_K": (32, 64, 128),
           "GROUP_M": (1, 2, 4, 8, 16, 32, 64), "num_warps": (1, 2, 4, 8, 16), "num_stages": (1, 2, 3, 4, 5, 6),
           "PIPE": (0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10), "matrix_instr_nonkdim": (0, 16, 32), "waves_per_eu": (0, 1, 2, 3, 4), "kpack": (1, 2)}
# PIPE (kernel.py): 0 pointer loads (every target), 1 TMA descriptors, 2 TMA + warp specialisation,
# 3 persistent + TMA + warp specialisation (1-3: NVIDIA sm_90+ only); 4-7 the Gluon wgmma kernel
# (wgmma.py: the scaling one step behind the MMA), one program per tile, persistent, persistent
# with a TMA producer warp, and the same with each consumer warp group a partition of its own
# (sm_90 only: wgmma is Hopper's instruction); 8 and 9 the decode kernel (splitk.py, every
# target): split-K over the SMs for small M, weight rows as the MMA's M dimension (BLOCK_N <= 128,
# a divisor of the scale block), the fp32 partials added in a fixed order by a second small kernel
# (8) or by the last program of each tile (9); GROUP_M is unused there; 10 the decode kernel
# written in Gluon (splitk_wgmma.py, sm_90 only: TMA ring filled up front, wgmma with the scaling
# one step behind, partials as PIPE 9). A profile row or --triton value list may leave it out
# (then 0).
PIPES_NVIDIA_ONLY = (1, 2, 3, 4, 5, 6, 7, 10)
PIPES_DEVICE_TMA = (1, 2, 3)          # in-kernel TMA descriptors: Triton's global scratch
PIPES_WGMMA = (4, 5, 6, 7)
PIPES_SPLITK = (8, 9, 10)
PIPES_ONE_PASS = (9, 10)              # split-K partials added by each tile's last program (tickets)
PIPE_SPLITK_WGMMA = 10
PIPES_SM90_ONLY = (*PIPES_WGMMA, PIPE_SPLITK_WGMMA)

# vLLM's and sglang's untuned default for the block-scaled Triton GEMM (the config used when no
# tuned file exists for a shape): 64 x 128 x 128 tiles, GROUP_SIZE_M 32, 4 warps, 2 stages.
BASELINE_TRITON = {"BLOCK_M": 64, "BLOCK_N": 128, "BLOCK_K": 128, "GROUP_M": 32, "num_warps": 4, "num_stages": 2,
                   "PIPE": 0}
# The decode kernel's default (PIPE 9, splitk.py): what fp8_gemm() runs for M <= 64 without a config
# (BLOCK_M and BLOCK_N follow M: fp8_gemm.default_config), on every target but sm_90.
DECODE_TRITON = {"BLOCK_M": 16, "BLOCK_N": 128, "BLOCK_K": 128, "GROUP_M": 1, "num_warps": 4, "num_stages": 3,
                 "PIPE": 9}
# sm_90's (PIPE 10, splitk_wgmma.py; BLOCK_M follows M). On the H200's decode benchmark (call8:
# 14 seed shapes, results/sm_90/fp8_gemm_bench_decode.csv) it was faster than DECODE_TRITON's
# configs at all 56 points (geometric mean 1.06x at M = 1, 1.11x at 8, 1.14x at 32, 1.21x at 64;
# BLOCK_M 32 beat 64 at M = 64) and within 1.009x of the best Triton config measured per point.
DECODE_WGMMA = {"BLOCK_M": 16, "BLOCK_N": 64, "BLOCK_K": 128, "GROUP_M": 1, "num_warps": 4, "num_stages": 4,
                "PIPE": 10}
AMD_NEUTRAL = {"matrix_instr_nonkdim": 16, "waves_per_eu": 0, "kpack": 2}


def is_amd(target: str) -> bool:
    return target.startswith("gfx")


def amd_keys(target: str) -> tuple[str, ...]:
    """The AMD-only axes that exist on ``target`` (none on NVIDIA; kpack only on gfx942)."""
    if not is_amd(target):
        return ()
    return AMD_KEYS if target == "gfx942" else tuple(k for k in AMD_KEYS if k != "kpack")


def fp8_dtype_name(target: str) -> str:
    """gfx942 (CDNA3) computes in the fnuz variant of e4m3; NVIDIA and gfx950 in OCP e4m3."""
    return "float8_e4m3fnuz" if target == "gfx942" else "float8_e4m3fn"


def baseline_config(target: str) -> dict:
    cfg = {"backend": "triton", **BASELINE_TRITON}
    cfg.update({k: AMD_NEUTRAL[k] for k in amd_keys(target)})
    return cfg


def library_config(backend: str, target: str) -> dict:
    return {**baseline_config(target), "backend": backend}


def triton_values(config: dict) -> dict:
    return {k: v for k, v in config.items() if k != "backend"}


def validate_config(config, target: str, backends=None) -> dict:
    """A clean copy of ``config`` for ``target``, or UserError naming the bad key."""
    if not isinstance(config, dict):
        raise UserError(f"fp8_gemm config must be a dict, got {config!r}")
    want = {"backend", *TRITON_KEYS, *amd_keys(target)}
    missing, extra = want - set(config), set(config) - want
    if missing or extra:
        raise UserError(f"fp8_gemm config for {target}: missing {sorted(missing)}, unexpected {sorted(extra)} "
                        f"(AMD-only keys {', '.join(AMD_KEYS)} exist only on gfx targets)")
    if backends is not None and config["backend"] not in backends:
        raise UserError(f"fp8_gemm backend {config['backend']!r} is unknown; choose from {', '.join(backends)}")
    for k in want - {"backend"}:
        v = config[k]
        if isinstance(v, bool) or not isinstance(v, int) or v not in ALLOWED[k]:
            raise UserError(f"fp8_gemm config {k}={v!r} is invalid; choose one of {ALLOWED[k]}")
    return dict(config)


def target_problem(target: str) -> str:
    """Why no fp8 GEMM runs on ``target`` ('' when one can): NVIDIA's e4m3 tensor cores (and Triton's
    fp8e4nv type) start at sm_89 (Ada; Hopper and Blackwell have them too)."""
    t = str(target)
    if t.startswith("sm_") and t[3:].rstrip("af").isdigit() and int(t[3:].rstrip("af")) < 89:
        return (f"{t} has no fp8 (e4m3) tensor cores, which start at sm_89; "
                "pick an fp8 target, e.g. --target sm_90 or gfx950")
    return ""


def config_problem(config: dict, target: str) -> str:
    """Why a Triton ``config`` cannot run on ``target`` ('' when it can): a K step must lie inside
    one 128-column scale group; TMA loads (PIPE 1-7) exist on NVIDIA sm_90 and later only, the
    Gluon kernels (PIPE 4-7, 10) on sm_90 only, with the tile shapes it is written for."""
    if SCALE_GROUP % config["BLOCK_K"]:
        return f"BLOCK_K={config['BLOCK_K']} must divide the {SCALE_GROUP}-column scale group"
    if not pipe_runs_on(config, target):
        return f"PIPE={config['PIPE']} cannot run on {target}: {pipe_needs(config['PIPE'])}"
    if config["PIPE"] in PIPES_SPLITK and config["BLOCK_N"] > SCALE_GROUP:
        return f"PIPE={config['PIPE']} (split-K) needs BLOCK_N <= {SCALE_GROUP} (one weight scale per tile and K step)"
    if config["PIPE"] == PIPE_SPLITK_WGMMA:
        return splitk_wgmma_problem(config)
    return wgmma_problem(config) if config["PIPE"] in PIPES_WGMMA else ""


def pipe_needs(pipe: int) -> str:
    """What the kernel of ``pipe`` (1-7) needs of the target: the reason ``config_problem`` gives
    for one config and ``Profile.left_out`` for a group of them."""
    if pipe in PIPES_SM90_ONLY:
        return "the Gluon wgmma kernels run on NVIDIA sm_90 only (wgmma is Hopper's)"
    return "TMA descriptor loads need NVIDIA sm_90 or later"


def wgmma_problem(config: dict, N: int | None = None) -> str:
    """Why the Gluon wgmma kernel (PIPE 4-7) cannot run ``config`` (on N output columns, when
    given): 16 rows per warp (64 on 4 warps, 128 on 8; PIPE 7 splits 128 rows into two warp
    groups, so only 128 on 8), BLOCK_N <= 128 (one B scale per tile),
    BLOCK_K = 128; its TMA store needs 16-byte row strides of the bf16 C (N % 8). The K % 16 of
    every TMA load is the family's check (Fp8GemmFamily.is_valid)."""
    p, bm, w = config["PIPE"], config["BLOCK_M"], config["num_warps"]
    if config["BLOCK_K"] != SCALE_GROUP or config["BLOCK_N"] not in (64, 128):
        return f"PIPE={p} (Gluon wgmma) needs BLOCK_K=128 and BLOCK_N 64 or 128, not {config['BLOCK_K']}/{config['BLOCK_N']}"
    if bm not in (64, 128) or bm != 16 * w:
        return f"PIPE={p} (Gluon wgmma) runs 16 rows per warp: BLOCK_M=64 on 4 warps or 128 on 8, not {bm} on {w}"
    if p == 7 and bm != 128:
        return f"PIPE=7 (Gluon wgmma, two consumer warp groups) needs BLOCK_M=128 on 8 warps, not {bm} on {w}"
    if config["num_stages"] < 2:
        return f"PIPE={p} (Gluon wgmma) needs num_stages >= 2"
    if N is not None and N % 8:
        return f"PIPE={p} (TMA bf16 store) needs N % 8 == 0 (16-byte row strides of C), N={N}"
    return ""


def splitk_wgmma_problem(config: dict) -> str:
    """Why the Gluon decode kernel (PIPE 10) cannot run ``config``: one warp group per 64 weight
    rows (BLOCK_N 64 on 4 warps, 128 on 8), a 16-, 32- or 64-token tile (wgmma's N), BLOCK_K = 128
    and a ring of at least 2 slots."""
    bn, w = config["BLOCK_N"], config["num_warps"]
    if config["BLOCK_K"] != SCALE_GROUP or bn not in (64, 128) or w != bn // 16:
        return (f"PIPE=10 (Gluon split-K) runs 64 weight rows per warp group and BLOCK_K=128: BLOCK_N=64 on 4 "
                f"warps or 128 on 8, not BLOCK_N={bn} on {w} warps with BLOCK_K={config['BLOCK_K']}")
    if config["BLOCK_M"] not in (16, 32, 64):
        return f"PIPE=10 (Gluon split-K) takes 16, 32 or 64 tokens a tile (BLOCK_M), not {config['BLOCK_M']}"
    if config["num_stages"] < 2:
        return "PIPE=10 (Gluon split-K) needs num_stages >= 2"
    return ""


def pipe_runs_on(config: dict, target: str) -> bool:
    """Whether the config's PIPE exists on ``target`` (TMA loads: NVIDIA sm_90 and later only;
    wgmma: sm_90 only, PIPE 4-7 and 10)."""
    from occtune.model.targets import hopper_or_later

    pipe = config.get("PIPE", 0)
    if pipe in PIPES_SM90_ONLY:
        return str(target).lower().rstrip("a") == "sm_90"
    return pipe not in PIPES_NVIDIA_ONLY or hopper_or_later(target)


def triton_row(values, where: str) -> dict:
    """A profile row / --triton value list -> the Triton axes (PIPE may be left out: 0)."""
    n = len(TRITON_KEYS)
    if len(values) not in (n - 1, n):
        raise UserError(f"{where}: a Triton config needs {n - 1} or {n} values ({', '.join(TRITON_KEYS)}; PIPE "
                        f"defaults to 0), got {len(values)}")
    return {"PIPE": 0, **dict(zip(TRITON_KEYS, (int(v) for v in values)))}


def workload(M: int, N: int, K: int) -> dict:
    return {"M": int(M), "N": int(N), "K": int(K)}


@dataclass(frozen=True)
class Profile:
    shapes: tuple          # ((n, k), ...)
    m: tuple               # token counts
    backends: tuple
    buckets: tuple         # ((m_max or None, (triton values dict, ...)), ...)
    amd: dict              # AMD option -> values

    def workloads(self, shapes=None, ms=None) -> list[dict]:
        return [workload(m, n, k) for (n, k) in (shapes or self.shapes) for m in (ms or self.m)]

    def bucket_of(self, M: int) -> int:
        for i, (m_max, _) in enumerate(self.buckets):
            if m_max is None or M <= m_max:
                return i
        return len(self.buckets) - 1

    def triton_configs(self, target: str, bucket: int | None = None) -> list[dict]:
        """Triton configs (of one bucket, or all, deduplicated) for ``target``, AMD options crossed in."""
        import itertools

        out = []
        picked = self.buckets if bucket is None else (self.buckets[bucket],)
        keys = amd_keys(target)
        for _, configs in picked:
            for c in configs:
                if not pipe_runs_on(c, target):
                    continue
                for vals in itertools.product(*(self.amd[k] for k in keys)):
                    cfg = {"backend": "triton", **c, **dict(zip(keys, vals))}
                    if cfg not in out:
                        out.append(cfg)
        return out

    def left_out(self, target: str, buckets=None) -> list[dict]:
        """The Triton configs (of these buckets, or all) that ``triton_configs`` leaves out on
        ``target`` because it lacks their PIPE's kernel, grouped: [{"pipes", "configs", "reason"}]."""
        groups: dict[str, dict] = {}      # by reason: what the PIPE's kernel needs of the target
        seen = []
        for _, configs in self.buckets if buckets is None else [self.buckets[b] for b in buckets]:
            for c in configs:
                if pipe_runs_on(c, target) or c in seen:
                    continue
                seen.append(c)
                g = groups.setdefault(pipe_needs(c["PIPE"]), {"pipes": set(), "configs": 0})
                g["pipes"].add(c["PIPE"])
                g["configs"] += 1
        return [{"pipes": sorted(g["pipes"]), "configs": g["configs"], "reason": why}
                for why, g in sorted(groups.items(), key=lambda kv: min(kv[1]["pipes"]))]


def _read(path: Path) -> dict:
    import yaml

    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
    except OSError as e:
        raise UserError(f"cannot read profile {path}: {e.strerror or e}") from None
    except yaml.YAMLError as e:
        raise UserError(f"{path}: not valid YAML ({str(e).splitlines()[0]})") from None
    if not isinstance(data, dict):
        raise UserError(f"{path}: expected a mapping of profile keys")
    return data


@functools.lru_cache(maxsize=4)
def load_profile(path: str | None = None) -> Profile:
    p = Path(path) if path else Path(__file__).with_name("profile.yaml")
    d = _read(p)
    try:
        shapes = tuple((int(n), int(k)) for n, k in d["shapes"])
        buckets = tuple((b["m_max"], tuple(triton_row(c, str(p)) for c in b["configs"])) for b in d["buckets"])
        amd = {k: tuple(int(v) for v in d["amd"][k]) for k in AMD_KEYS}
        prof = Profile(shapes, tuple(int(m) for m in d["m"]), tuple(d["backends"]), buckets, amd)
    except (KeyError, TypeError, ValueError) as e:
        raise UserError(f"{p}: malformed fp8_gemm profile ({type(e).__name__}: {e})") from None
    return prof
