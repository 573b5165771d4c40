#ifndef TOPK_KEEP_UNROLL
#define TOPK_KEEP_UNROLL 4   // 16-byte loads in flight per thread in the long-row main pass
#endif

// The keep test as one float compare: thr is a float whose set {x : !(x < thr)} (NaN always in)
// is an upper set of the fine-key order containing every key >= f0 (it may add -0.0 when
// thr = +0.0, the key just below): any upper set with at least K elements holds the top K, so
// the result stays exact.
TOPK_HD static inline float topk_keep_threshold(topk_u32 f0) {
  if (f0 <= 0x007FFFFFu) return topk_float(0xFF800000u);   // at or below fine(-inf): all
  topk_u32 b = topk_bits_of_fine(f0);
  if ((b & 0x7FFFFFFFu) > 0x7F800000u) return topk_float(0x7F800000u);   // NaN bin: +inf, NaN
  return topk_float(b);
}

// Append (idx_off + index, canonical bits) of the kept values of one lane's 4 * U loaded floats
// (bit j of km: value j kept) at list slots pos, pos + 1, ...; HIST: also count their coarse bins.
// Where kept entries go: list slot `slot` < stage_cap is stage[slot] (the one-block-per-row
// pass: the row's global list itself; a split block: its shared-memory stage); a slot at or
// beyond stage_cap goes to glist[slot + gdelta] (split only: the row's global list, space
// reserved with a device-scope atomic) when that is below gcap, and is dropped (only counted:
// the row then takes the exact fallback) otherwise.
struct TopkKeepDst {
  topk_u2* stage;
  int stage_cap;
  topk_u2* glist;
  int gcap;
  int gdelta;
  // SPILL = false: the caller knows slot < stage_cap (the common case, decided once per warp
  // and iteration), so the store has no branch.
  template <bool SPILL = true>
  __device__ inline void put(int slot, topk_u32 idx, topk_u32 bits) const {
    topk_u2 e;
    e.x = idx;
    e.y = bits;
    if (!SPILL || slot < stage_cap) {
      stage[slot] = e;
    } else {
      const int g = slot + gdelta;
      if (g < gcap) glist[g] = e;
    }
  }
};

// Value j (0 <= j < 4 * U) of a lane's U loaded float4, by a select tree (a run-time index into
// the register array would put it in local memory).
template <int U>
__device__ static inline float topk_pick(const topk_f4* q, int j) {
  const int c = j & 3;
  float x = 0.0f;
#pragma unroll
  for (int u = 0; u < U; ++u) {
    const topk_f4& a = q[u];
    const float y = c == 0 ? a.x : c == 1 ? a.y : c == 2 ? a.z : a.w;
    x = (j >> 2) == u ? y : x;
  }
  return x;
}

template <int U, bool HIST, bool SPILL>
__device__ static inline void topk_keep_store(const topk_f4* q, unsigned km, int pos, int i4_0,
                                              int head, int idx_off, const TopkKeepDst& dst,
                                              int* hist) {
  // one trip per kept value of this lane (few: the warp runs as many trips as its busiest lane),
  // not one predicated step per loaded value
  while (km) {
    const int j = topk_ctz(km);
    km &= km - 1u;
    const topk_u32 bits = topk_canon(topk_bits(topk_pick<U>(q, j)));
    dst.template put<SPILL>(pos, (topk_u32)(idx_off + head + 4 * (i4_0 + (j >> 2) * TOPK_THREADS) + (j & 3)),
                            bits);
    if (HIST) topk_hist_inc(hist, topk_bin(bits));
    ++pos;
  }
}

// The store that may spill (a warp whose slots pass the stage's end: overflowing rows), one
// kept value per lane and trip until the warp's busiest lane is done. The warp's slots (the
// same range) go out trip by trip, consecutive across the lanes: coalesced global stores and no
// bank conflicts in the stage where each lane's run of slots put 32 lanes 128 bytes apart; and
// the histogram update merges the lanes that add to one bin: an all-equal row's kept values
// cost one shared atomic per warp and trip, not 32 to one address. Needs a converged warp
// (CUDA); HIP and the host take the per-lane store.
template <int U, bool HIST>
__device__ static inline void topk_keep_store_spill(const topk_f4* q, unsigned km, int pos, int i4_0,
                                                    int head, int idx_off, const TopkKeepDst& dst,
                                                    int* hist) {
#ifdef TOPK_WARP_AGG
  int base = __shfl_sync(TOPK_FULL, pos, 0);   // the warp's first slot (lane 0's)
  const unsigned below = (1u << topk_lane()) - 1u;
  for (;;) {                 // a trip: the next kept value of each lane, consecutive slots
    const bool has = km != 0u;
    const unsigned m = __ballot_sync(TOPK_FULL, has);
    if (m == 0u) break;
    int bin = 0;
    if (has) {
      const int j = topk_ctz(km);
      km &= km - 1u;
      const topk_u32 bits = topk_canon(topk_bits(topk_pick<U>(q, j)));
      dst.template put<true>(base + __popc(m & below),
                             (topk_u32)(idx_off + head + 4 * (i4_0 + (j >> 2) * TOPK_THREADS) + (j & 3)), bits);
      bin = topk_bin(bits);
    }
    if (HIST) topk_hist_add_u(hist, bin, has);
    base += __popc(m);
  }
#else
  if (km) topk_keep_store<U, HIST, true>(q, km, pos, i4_0, head, idx_off, dst, hist);
#endif
}

// Long rows, main pass: copy every element with fine key >= f0 (see topk_keep_threshold) to the
// row's list. Block-uniform trip count over the 16-byte body, so votes use the full warp. Slots
// come from a shared-memory counter *sctr (one shared atomic per warp and iteration).
//  SPLIT = false (one block per row): slots index the row's global list (cap entries); HIST also
//    builds the coarse histogram of the kept elements in hist.
//  SPLIT = true (a row over several blocks): slots index the block's shared stage (stage_cap
//    entries); a warp whose slots pass the stage's end reserves the excess in the row's global
//    list through *gctr (device scope) and writes it there; topk_split_flush then appends the
//    stage to the global list. No device-scope atomic sits on the main loop's critical path.
// Indices stored are idx_off + the index in p[0, n).
template <bool SPLIT, bool HIST, bool GSPILL = SPLIT>
__device__ static inline void topk_keep_pass(int* sctr, int* gctr, const float* __restrict__ p,
                                             int n, topk_u32 f0, topk_u2* glist, int cap,
                                             topk_u2* stage, int stage_cap, int idx_off,
                                             int* hist) {
  constexpr int U = TOPK_KEEP_UNROLL;
  const int tid = TOPK_TID;
  const float thr = topk_keep_threshold(f0);
  TopkKeepDst dst;
  dst.stage = SPLIT ? stage : glist;
  dst.stage_cap = SPLIT ? stage_cap : cap;
  dst.glist = glist;
  dst.gcap = SPLIT ? cap : 0;
  dst.gdelta = (SPLIT && !GSPILL) ? -stage_cap : 0;   // no global counter: the region follows the stage
  int head = (int)(((16u - ((unsigned)(unsigned long long)p & 15u)) & 15u) >> 2);
  if ((((unsigned long long)p) & 3ull) != 0ull) head = n;
  if (head > n) head = n;
  const topk_f4* v = (const topk_f4*)(p + head);
  const int nv = (n - head) >> 2;
  for (int b4 = 0; b4 < nv; b4 += U * TOPK_THREADS) {
    TOPK_WARP_RECONVERGE();   // each iteration starts converged (see TOPK_WARP_RECONVERGE)
    topk_f4 q[U];
    unsigned km = 0u;
    if (b4 + U * TOPK_THREADS <= nv) {   // full iteration (block-uniform): no bounds checks
#pragma unroll
      for (int u = 0; u < U; ++u) q[u] = v[b4 + u * TOPK_THREADS + tid];
#pragma unroll
      for (int u = 0; u < U; ++u) {
        km |= (unsigned)!(q[u].x < thr) << (4 * u + 0);
        km |= (unsigned)!(q[u].y < thr) << (4 * u + 1);
        km |= (unsigned)!(q[u].z < thr) << (4 * u + 2);
        km |= (unsigned)!(q[u].w < thr) << (4 * u + 3);
      }
    } else {
#pragma unroll
      for (int u = 0; u < U; ++u) {
        const int i4 = b4 + u * TOPK_THREADS + tid;
        if (i4 < nv) {
          q[u] = v[i4];
          km |= (unsigned)!(q[u].x < thr) << (4 * u + 0);
          km |= (unsigned)!(q[u].y < thr) << (4 * u + 1);
          km |= (unsigned)!(q[u].z < thr) << (4 * u + 2);
          km |= (unsigned)!(q[u].w < thr) << (4 * u + 3);
        } else {
          q[u].x = q[u].y = q[u].z = q[u].w = 0.0f;
        }
      }
    }
#ifdef TOPK_WARP_AGG
    const int cnt = __popc(km);
    if (__ballot_sync(TOPK_FULL, cnt > 0) == 0u) continue;
    int incl = cnt;
#pragma unroll
    for (int d = 1; d < 32; d <<= 1) {
      int y = __shfl_up_sync(TOPK_FULL, incl, d);
      if ((int)topk_lane() >= d) incl += y;
    }
    int base = 0;
    if (topk_lane() == 31u) base = topk_atomic_add(sctr, incl);
    const int sbase = __shfl_sync(TOPK_FULL, base, 31);
    const int total = __shfl_sync(TOPK_FULL, incl, 31);
    const int pos = sbase + incl - cnt;
    if (SPLIT) {                           // warp-uniform: the warp's slots [sbase, sbase+total)
      const int lo = sbase > stage_cap ? sbase : stage_cap;
      const int over = sbase + total - lo;
      if (GSPILL && over > 0) {
        int g = 0;
        if (topk_lane() == 31u) g = topk_atomic_add_dev(gctr, over);
        dst.gdelta = __shfl_sync(TOPK_FULL, g, 31) - lo;
      }
    }
#else
    const int cnt = __builtin_popcount(km);
    if (cnt == 0) continue;
    const int pos = topk_atomic_add(sctr, cnt);
    if (SPLIT) {
      const int lo = pos > stage_cap ? pos : stage_cap;
      const int over = pos + cnt - lo;
      if (GSPILL && over > 0) dst.gdelta = topk_atomic_add_dev(gctr, over) - lo;
    }
#endif
    // Every slot of this warp (CUDA) or lane (HIP, host) in the stage: the branch-free store
    // (the clean rows' only path); else the store that may spill past the stage.
#ifdef TOPK_WARP_AGG
    const bool spills = sbase + total > dst.stage_cap;   // warp-uniform
#else
    const bool spills = pos + cnt > dst.stage_cap;
#endif
    if (spills && SPLIT && !GSPILL) {   // the cluster kernel's stage and spill region
      topk_keep_store_spill<U, HIST>(q, km, pos, b4 + tid, head, idx_off, dst, hist);
    } else if (spills) {     // the split kernel's (its sm_80 build: 32 registers, not 40)
      if (km) topk_keep_store<U, HIST, true>(q, km, pos, b4 + tid, head, idx_off, dst, hist);
    } else if (km) {
      topk_keep_store<U, HIST, false>(q, km, pos, b4 + tid, head, idx_off, dst, hist);
    }
  }
  // scalar head and tail (at most 3 + 3 elements): per-lane atomics
  for (int j = tid; j < head + (n - head - 4 * nv); j += TOPK_THREADS) {
    int i = j < head ? j : head + 4 * nv + (j - head);
    const float x = p[i];
    if (!(x < thr)) {
      const topk_u32 bits = topk_canon(topk_bits(x));
      const int pos = topk_atomic_add(sctr, 1);
      if (SPLIT && GSPILL && pos >= stage_cap) dst.gdelta = topk_atomic_add_dev(gctr, 1) - pos;
      dst.put(pos, (topk_u32)(idx_off + i), bits);
      if (HIST) topk_hist_inc(hist, topk_bin(bits));
    }
  }
}

// End of a split block's pass: add its coarse histogram of kept values (sh.hist) to the row's
// (ghist), and append its staged entries (min(*sctr, stage_cap) of them) to the row's global
// list at a place reserved with one device-scope atomic on *gctr.
__device__ static inline void topk_split_flush(TopkShared& sh, int* gctr, int* ghist,
                                               topk_u2* glist, int cap, const topk_u2* stage,
                                               int stage_cap) {
  TOPK_SYNC();
  for (int i = TOPK_TID; i < TOPK_BINS; i += TOPK_THREADS) {
    const int c = sh.hist[i];
    if (c) topk_atomic_add_dev(&ghist[i], c);
  }
  const int staged = sh.scratch_n < stage_cap ? sh.scratch_n : stage_cap;
  if (TOPK_TID == 0) sh.sel_above = staged > 0 ? topk_atomic_add_dev(gctr, staged) : 0;
  TOPK_SYNC();
  const int g0 = sh.sel_above;
  for (int i = TOPK_TID; i < staged; i += TOPK_THREADS)
    if (g0 + i < cap) glist[g0 + i] = stage[i];
}

#define TOPK_SAMPLE4 1024   // float4 sample points of a long row (4096 values)
#define TOPK_SPLIT_REC (2 + TOPK_BINS)   // ints per row in split_kept: kept count, histogram,
                                         // 1 + the bin f0 cut (topk_sample_floor), 0 if none
                                         // (the host: split_record_ints)
#ifndef TOPK_SPLIT_STAGE
#define TOPK_SPLIT_STAGE 2560   // shared-memory list entries of one split block (20 KiB)
#endif
#ifndef TOPK_SAMPLE_MARGIN
#define TOPK_SAMPLE_MARGIN 150   // the sample aims at this percentage of the expected count
#endif
#ifndef TOPK_SAMPLE_RUN
#define TOPK_SAMPLE_RUN 4   // consecutive float4 per sample run (1: scattered 16-byte loads)
#endif

