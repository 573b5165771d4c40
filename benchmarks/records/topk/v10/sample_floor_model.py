"""A numpy model of topk_sample_floor with the refinement of branch refined-floor (7e09354): per row,
   whether the floor is refined, the kept count with the coarse floor and with the refined one, and
   whether the threshold bin equals the cut bin (a partial count: the plain path). Random normal
   rows (12 per size) and the adversarial families (4 rows). Run from the repo root:
   python3 benchmarks/records/topk/v10/sample_floor_model.py (CPU, a few minutes)."""
import numpy as np, sys
sys.path.insert(0, str(__import__("pathlib").Path(__file__).resolve().parents[3]))
from kernels.topk import reference as ref

def bits_of_fine(f):
    f = np.uint32(f)
    return np.uint32(f & 0x7FFFFFFF) if f & 0x80000000 else np.uint32(~f)

def bin_of_fine(f, bits):
    x = np.array([bits_of_fine(f)], np.uint32).view(np.float32)
    return int(ref.coarse_bins(x, bits)[0])

def fine_floor(t0, bits):
    lo, hi = 0x007FFFFF, 0xFFC00000
    if bin_of_fine(lo, bits) >= t0: return 0
    while hi - lo > 1:
        mid = lo + (hi - lo) // 2
        if bin_of_fine(mid, bits) >= t0: hi = mid
        else: lo = mid
    return hi

def thresh(hist, need):
    c = 0
    for b in range(len(hist) - 1, -1, -1):
        if c + hist[b] >= need: return b, c
        c += hist[b]
    raise ValueError

def model(row, K, bits):
    L = row.size; nv = L >> 2; RUN = 4; RUNS = 1024 // RUN
    s = np.arange(1024)
    i4 = (s // RUN) * (nv - RUN) // (RUNS - 1) + s % RUN
    samp = row.reshape(-1, 4)[i4].ravel()
    nb = 1 << bits
    hist = np.bincount(ref.coarse_bins(samp, bits).astype(np.int64), minlength=nb)
    aim = min(150 * K * 4096 // (100 * L) + 16, 4096)
    t0, above = thresh(hist, aim)
    need0 = aim - above
    lo = fine_floor(t0, bits)
    refine = hist[t0] > 2 * need0 + 16 and above * L >= 2 * K * 4096
    f0 = lo
    if refine:
        hi = fine_floor(t0 + 1, bits) - 1 if t0 + 1 < nb else 0xFFFFFFFF
        bl = int(hi - lo).bit_length()
        shift = bl - bits if bl > bits else 0
        k = ref.fine_keys(samp).astype(np.int64)
        m = (k >= lo) & (k <= hi)
        sub = np.bincount(((k[m] - lo) >> shift), minlength=nb)
        b, _ = thresh(sub, need0)
        f0 = lo + (b << shift)
    rk = ref.fine_keys(row).astype(np.int64)
    kept_old = int((rk >= lo).sum()); kept_new = int((rk >= f0).sum())
    rb = ref.coarse_bins(row, bits).astype(np.int64)
    t, _ = thresh(np.bincount(rb, minlength=nb), K)
    return refine, kept_old, kept_new, refine and t == t0

rng = np.random.default_rng(0)
K = 2048
for L in (1 << 20, 1 << 17, 1 << 16):
    for bits in (8, 12):
        res = [model(rng.standard_normal(L).astype(np.float32), K, bits) for _ in range(12)]
        print(f"normal L={L} bits={bits}: refined {sum(r[0] for r in res)}/12, kept old {np.mean([r[1] for r in res]):.0f} new {np.mean([r[2] for r in res]):.0f}, partial {sum(r[3] for r in res)}")
for name in ref.CASES:
    for L in (1 << 16, 1 << 20):
        try:
            s, _ = ref.make_case(name, 4, L, K, seed=1)
        except Exception as e:
            print(name, L, "skip", e); continue
        for bits in (8, 12):
            res = [model(np.ascontiguousarray(r), K, bits) for r in s]
            print(f"{name:14s} L={L} bits={bits}: refined {sum(r[0] for r in res)}/4 kept old {np.mean([r[1] for r in res]):.0f} new {np.mean([r[2] for r in res]):.0f} partial {sum(r[3] for r in res)}")
