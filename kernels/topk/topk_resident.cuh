// Resident kernel (-DTOPK_RESIDENT, a build of its own; CUDA and HIP): every score is read once
// and the row stays on chip. Included by topk.cuh after the shared parts (keys, histogram,
// threshold, collect, refine), whose functions it reuses.
//
// A row of len values is cut into `parts` slices of chunk = ceil4(len / parts) values (the last
// ones shorter or empty); block (row, part) loads its slice once into its dynamic shared memory
// (the LDS budget: the resident slice) as canonical bits, counting coarse bins as it goes. Every
// later phase reads the slice there, none reads the row again:
//  parts == 1 (the row in one block): threshold bin t from the block's histogram; one pass over
//    the slice emits bins > t and collects bin t into the candidate list after the slice (cap
//    entries); rank or radix refine of the list. A bin t over cap is refined by radix passes
//    over the slice itself (TOPK_FLAG_BIN_OVF; still no global read).
//  parts > 1 (a row over several blocks; the plan keeps every block of the launch resident at
//    once): the row's histogram is merged in global memory in two levels (TOPK_CG group sums,
//    then the TOPK_CGS bins of the threshold group), each level a barrier among the row's blocks
//    (an arrival counter in the row's workspace). Each block then emits its bins > t (its first
//    output slot from one device-scope atomic) and appends its bin-t values to the row's global
//    list (cap entries); the block that arrives last copies the list into its shared memory and
//    finishes it (rank or radix refine). A bin t over cap is refined by radix passes over every
//    block's slice, each digit histogram merged the same way (TOPK_FLAG_BIN_OVF).
// The workspace of a row (TOPK_RWS_* ints, then the list) is zero where it must be at a call's
// start and the last block leaves it so: the host zeroes it once, not per call.
// Rows of at most K values: block 0 of the row writes them (no barrier, workspace untouched).

#define TOPK_RWS_ARRIVE 0                           // arrivals at the row's barriers
#define TOPK_RWS_OUT 1                              // output slots taken by bins > t
#define TOPK_RWS_CAND 2                             // list entries appended
#define TOPK_RWS_OUT2 3                             // bin-t output slots taken (overflow refine)
#define TOPK_RWS_EQ 4                               // threshold-key values claimed (overflow refine)
#define TOPK_RWS_NLO 5                              // ~ the smallest key of bin t (overflow refine; 0: none)
#define TOPK_RWS_NHI 6                              // the largest key of bin t (overflow refine)
#define TOPK_RWS_GSUM 8                             // [TOPK_CG] group sums of the row
#define TOPK_RWS_GBIN (TOPK_RWS_GSUM + TOPK_CG)     // [TOPK_CGS] bins of the threshold group
#define TOPK_RWS_DIG (TOPK_RWS_GBIN + TOPK_CGS)     // [4][256] digit histograms (overflow refine)
#define TOPK_RWS_ZERO (TOPK_RWS_DIG + 4 * 256)      // ints kept zero between calls; the list follows
#define TOPK_RES_U 4                                // 16-byte loads in flight per thread

// The slice in shared memory as a source of (index, canonical bits): block-uniform rounds of
// TOPK_RES_U values a thread (the warp-aggregated updates apply), idx_off + position as index.
struct TopkSliceSrc {
  const topk_u32* bits;
  int n;
  int idx_off;
  template <typename F>
  __device__ inline void visit(F& f) const {
    constexpr int U = TOPK_RES_U;
    for (int base = 0; base < n; base += U * TOPK_THREADS) {
      topk_u2 q[U];
      bool valid[U];
#pragma unroll
      for (int u = 0; u < U; ++u) {
        const int i = base + u * TOPK_THREADS + TOPK_TID;
        valid[u] = i < n;
        q[u].x = (topk_u32)(idx_off + i);
        q[u].y = valid[u] ? bits[i] : 0u;
      }
      topk_list_round<U>(f, q, valid);
    }
  }
};

// One round of the load: each thread's up to U float4 of v[b4 + u * THREADS + tid] (nv float4).
__device__ static inline void topk_res_fetch(const topk_f4* v, int nv, int b4, topk_f4 (&q)[TOPK_RES_U]) {
#pragma unroll
  for (int u = 0; u < TOPK_RES_U; ++u) {
    const int i4 = b4 + u * TOPK_THREADS + TOPK_TID;
    if (i4 < nv) q[u] = v[i4];
  }
}

// Load: p[0, n) into s[0, n) as canonical bits, every value's coarse bin counted in sh.hist.
// Initialises the block's counters and clears sh.hist itself (topk_block_init) while the first
// loads are in flight; ends with a barrier. 16-byte loads where p is 16-byte aligned, else
// 4-byte ones.
__device__ static inline void topk_res_load(TopkShared& sh, const float* p, int n, topk_u32* s) {
  constexpr int U = TOPK_RES_U;
  const int tid = TOPK_TID;
  const bool al = (((unsigned long long)p) & 15ull) == 0ull;
  const int nv = al ? n >> 2 : 0;
  const topk_f4* v = (const topk_f4*)p;
  topk_f4 q[U];
  topk_res_fetch(v, nv, 0, q);
  topk_block_init(sh);
  TOPK_STAMP(sh, 0);
  for (int b4 = 0; b4 < nv; b4 += U * TOPK_THREADS) {   // block-uniform trip count
    if (b4) topk_res_fetch(v, nv, b4, q);
#pragma unroll
    for (int u = 0; u < U; ++u) {
      const int i4 = b4 + u * TOPK_THREADS + tid;
      const bool ok = i4 < nv;
      const topk_u32 b[4] = {topk_canon(topk_bits(q[u].x)), topk_canon(topk_bits(q[u].y)),
                             topk_canon(topk_bits(q[u].z)), topk_canon(topk_bits(q[u].w))};
      if (ok) {
        s[4 * i4] = b[0];
        s[4 * i4 + 1] = b[1];
        s[4 * i4 + 2] = b[2];
        s[4 * i4 + 3] = b[3];
      }
#pragma unroll
      for (int j = 0; j < 4; ++j)
        if (ok) topk_hist_inc(sh.hist, topk_bin(b[j]));
    }
  }
  for (int base = 4 * nv; base < n; base += TOPK_THREADS) {   // the rest, block-uniform rounds
    const int i = base + tid;
    const bool ok = i < n;
    const topk_u32 b = ok ? topk_canon(topk_bits(p[i])) : 0u;
    if (ok) {
      s[i] = b;
      topk_hist_inc(sh.hist, topk_bin(b));
    }
  }
  TOPK_SYNC();
}

// Collect: the slice's values of bins > t to the output (slots from sh.out_pos), of bin t to the
// list (slots from sh.cand_n; the block's candidates after its slice, or a spread row's global
// list) where `collect`. One float compare skips the values below bin t before their bin is
// computed (topk_bin_prefilter), and each value that goes out takes one shared atomic. On the H200
// the list-round collect (a warp-wide reservation per round of every value) took 3.5 us of a
// (1, 1M) row's 16 (profile_topk.py, records/topk_decode/r2); for one-block rows this collect and
// the load's one atomic a value took (1, 8K) at 48 KiB / 1024 threads from 12.86 to 10.72 us, 34,634
// warp instructions against 46,487 (records/topk_regs, run6).
__device__ static inline void topk_res_collect(TopkShared& sh, const TopkSliceSrc& src, int t, bool collect,
                                              topk_u32* list, int* o, const TopkTransform& tr) {
  const float thr = topk_bin_prefilter(t);
  for (int i = TOPK_TID; i < src.n; i += TOPK_THREADS) {
    const topk_u32 b = src.bits[i];
    if (topk_float(b) <= thr) continue;          // below bin t (NaN, canonical: never)
    const int bin = topk_bin(b);
    if (bin > t) {
      o[topk_atomic_add(&sh.out_pos, 1)] = tr.apply(src.idx_off + i);
    } else if (bin == t && collect) {
      const int c = topk_atomic_add(&sh.cand_n, 1);
      list[2 * c] = (topk_u32)(src.idx_off + i);
      list[2 * c + 1] = b;
    }
  }
}

// Steps 2-3 of a row held by one block: bins > need's threshold to the output, bin t collected
// after the slice (cap entries at cand) and finished there, or refined over the slice.
__device__ static inline void topk_res_solo(TopkShared& sh, const TopkSliceSrc& src, topk_u32* cand,
                                            int cap, int K, int* o, const TopkTransform& tr, int* diag) {
  topk_find_threshold(sh, TOPK_BINS, K);
  TOPK_STAMP(sh, 3);
  const int t = sh.sel_bin;
  const int need = K - sh.sel_above;
  const int count = sh.hist[t];
  if (TOPK_TID == 0) {
    diag[0] = count;
    if (count > cap) sh.flags |= TOPK_FLAG_BIN_OVF;
  }
  TOPK_SYNC();                   // sel_* and hist[t] read before the finish reuses them
  topk_res_collect(sh, src, t, count <= cap, cand, o, tr);
  TOPK_SYNC();
  TOPK_STAMP(sh, 4);
  if (count > cap) topk_refine_emit(sh, src, t, need, o, tr);
  else topk_list_emit(sh, cand, count, need, o, tr);
}

// Barrier among the `parts` blocks of a row: arrival `target` (k * parts for the k-th barrier)
// on the row's counter. Every block of the launch is resident (the plan sees to it).
__device__ static inline void topk_res_barrier(int* ctr, int target) {
  TOPK_SYNC();
  if (TOPK_TID == 0) {
    topk_fence_dev();            // this block's global writes and atomics before its arrival
    topk_atomic_add_dev(ctr, 1);
    while (topk_ld_dev(ctr) < target) {
    }
    topk_fence_dev();
  }
  TOPK_SYNC();
}

// Adds this block's nonzero counts c[0, n) to the row's g[0, n) (device-scope atomics).
__device__ static inline void topk_res_merge(const int* c, int* g, int n) {
  for (int i = TOPK_TID; i < n; i += TOPK_THREADS)
    if (c[i]) topk_atomic_add_dev(&g[i], c[i]);
}

// The row's merged counts g[0, n) into the block's c[0, n) (after the barrier that ends the merge).
__device__ static inline void topk_res_fetch_counts(const int* g, int* c, int n) {
  for (int i = TOPK_TID; i < n; i += TOPK_THREADS) c[i] = topk_ld_dev(&g[i]);
  TOPK_SYNC();
}

// *acc += every thread's x (acc in shared memory); the caller's next barrier completes it.
__device__ static inline void topk_res_sum_into(int* acc, int x) {
#ifdef TOPK_WARP_AGG
#pragma unroll
  for (int d = 16; d > 0; d >>= 1) x += __shfl_xor_sync(TOPK_FULL, x, d);
  if (topk_lane() == 0u && x) atomicAdd(acc, x);
#else
  if (x) topk_atomic_add(acc, x);
#endif
}

// The spread row's shared scratch (topk_rs): group sums, the threshold group's bins, two block
// sums and the last-arrival flag.
#define TOPK_RS_B TOPK_CG
#define TOPK_RS_SUM0 (TOPK_CG + TOPK_CGS)
#define TOPK_RS_SUM1 (TOPK_RS_SUM0 + 1)
#define TOPK_RS_LAST (TOPK_RS_SUM0 + 2)
#define TOPK_RS_N (TOPK_RS_SUM0 + 3)

// The row's last arrival (target = the final count) returns true in every thread of its block;
// the others return false (and leave).
__device__ static inline bool topk_res_last(int* rs, int* ctr, int target) {
  TOPK_SYNC();
  if (TOPK_TID == 0) {
    topk_fence_dev();
    rs[TOPK_RS_LAST] = topk_atomic_add_dev(ctr, 1) == target - 1;
    topk_fence_dev();
  }
  TOPK_SYNC();
  return rs[TOPK_RS_LAST] != 0;
}

// Overflow refine of a row over several blocks: up to four radix passes over the bin-t values of
// every block's slice, each pass's digit histogram merged in the workspace (barriers 3, 4, ...),
// then each block emits its values above the exact key and claims its share of the values equal
// to it. The first pass also merges bin t's key span: a bin of one key (all-equal rows) has every
// digit resolved after it. Returns the passes made (row-uniform).
__device__ static TOPK_NOINLINE int topk_res_spread_refine(TopkShared& sh, int* rs, const TopkSliceSrc& src,
                                                           int* w, int parts, int t, int above, int need,
                                                           int* o, const TopkTransform& tr) {
  topk_u32 prefix = 0u, mask = 0u;
  topk_u32* const span = reinterpret_cast<topk_u32*>(sh.scan);   // free between threshold searches
  int passes = 0;
  for (int pass = 0; pass < 4; ++pass) {
    const int shift = 24 - 8 * pass;
    topk_digit_hist(sh, src, t, mask, prefix, shift, pass == 0 ? span : nullptr);
    int* dig = w + TOPK_RWS_DIG + 256 * pass;
    topk_res_merge(sh.hist, dig, 256);
    if (pass == 0 && TOPK_TID == 0 && span[0] <= span[1]) {   // before this block's arrival
      topk_atomic_max_dev_u((topk_u32*)(w + TOPK_RWS_NLO), ~span[0]);
      topk_atomic_max_dev_u((topk_u32*)(w + TOPK_RWS_NHI), span[1]);
    }
    topk_res_barrier(w + TOPK_RWS_ARRIVE, (3 + pass) * parts);
    ++passes;
    if (pass == 0) {
      const topk_u32 lo = ~(topk_u32)topk_ld_dev(w + TOPK_RWS_NLO);
      const topk_u32 hi = (topk_u32)topk_ld_dev(w + TOPK_RWS_NHI);
      if (lo == hi) {        // row-uniform: one key, none above it in the bin
        prefix = lo;
        mask = 0xFFFFFFFFu;
        break;
      }
    }
    topk_res_fetch_counts(dig, sh.hist, 256);
    topk_find_threshold(sh, 256, need);
    topk_digit_take(sh, need, prefix, mask, shift);
  }
  // this block's values of bin t above the key (gt) and equal to it (eq)
  int gt = 0, eq = 0;
  for (int base = 0; base < src.n; base += TOPK_THREADS) {     // block-uniform rounds
    const int i = base + TOPK_TID;
    const topk_u32 b = i < src.n ? src.bits[i] : 0u;
    const bool in = i < src.n && topk_bin(b) == t;
    const topk_u32 k = topk_fine_key(b);
    gt += in && k > prefix;
    eq += in && k == prefix;
  }
  topk_res_sum_into(rs + TOPK_RS_SUM0, gt);
  topk_res_sum_into(rs + TOPK_RS_SUM1, eq);
  TOPK_SYNC();
  if (TOPK_TID == 0) {
    gt = rs[TOPK_RS_SUM0];
    eq = rs[TOPK_RS_SUM1];
    const int e0 = eq ? topk_atomic_add_dev(w + TOPK_RWS_EQ, eq) : 0;
    int take = need - e0;
    take = take < 0 ? 0 : take > eq ? eq : take;
    sh.out_pos = above + (gt + take ? topk_atomic_add_dev(w + TOPK_RWS_OUT2, gt + take) : 0);
    sh.eq_taken = 0;
    sh.sel_above = take;
  }
  TOPK_SYNC();
  TopkEmitOp eop;
  eop.sh = &sh;
  eop.t = t;
  eop.key = prefix;
  eop.need = sh.sel_above;
  eop.out = o;
  eop.tr = &tr;
  src.visit(eop);
  return passes;
}

// Steps 2-3 of a row over `parts` blocks (see the head of this file). w: the row's workspace.
// Returns true in the block that finished the row (the last to arrive).
__device__ static inline bool topk_res_spread(TopkShared& sh, int* rs, const TopkSliceSrc& src, topk_u32* s,
                                              int* w, int parts, int cap, int K, int* o,
                                              const TopkTransform& tr, int* diag) {
  int* const rg = rs;                    // [TOPK_CG] group sums (this block's, then the row's)
  int* const rb = rs + TOPK_RS_B;        // [TOPK_CGS] the row's bins of the threshold group
  // level 1: group sums (rg is zero from the kernel's start)
  for (int i = TOPK_TID; i < TOPK_BINS / 4; i += TOPK_THREADS) {
    const int c = sh.hist[4 * i] + sh.hist[4 * i + 1] + sh.hist[4 * i + 2] + sh.hist[4 * i + 3];
    if (c) topk_atomic_add(&rg[i / (TOPK_CGS / 4)], c);
  }
  TOPK_SYNC();
  topk_res_merge(rg, w + TOPK_RWS_GSUM, TOPK_CG);
  topk_res_barrier(w + TOPK_RWS_ARRIVE, parts);
  topk_res_fetch_counts(w + TOPK_RWS_GSUM, rg, TOPK_CG);
  topk_find_threshold_in(sh, rg, TOPK_CG, K);
  const int g = sh.sel_bin;
  const int above_g = sh.sel_above;
  // level 2: the threshold group's bins
  topk_res_merge(sh.hist + g * TOPK_CGS, w + TOPK_RWS_GBIN, TOPK_CGS);
  topk_res_barrier(w + TOPK_RWS_ARRIVE, 2 * parts);
  TOPK_STAMP(sh, 2);
  topk_res_fetch_counts(w + TOPK_RWS_GBIN, rb, TOPK_CGS);
  topk_find_threshold_in(sh, rb, TOPK_CGS, K - above_g);
  const int t = g * TOPK_CGS + sh.sel_bin;
  const int above = above_g + sh.sel_above;
  const int nt = rb[sh.sel_bin];
  const bool fits = nt <= cap;           // row-uniform
  TOPK_STAMP(sh, 3);
  // this block's first output slot (after the bins > t of the blocks that reserved before it)
  // and first list slot
  int mine = 0;
  for (int i = t + 1 + TOPK_TID; i < TOPK_BINS; i += TOPK_THREADS) mine += sh.hist[i];
  topk_res_sum_into(rs + TOPK_RS_SUM0, mine);
  TOPK_SYNC();
  if (TOPK_TID == 0) {
    mine = rs[TOPK_RS_SUM0];
    rs[TOPK_RS_SUM0] = 0;
    sh.out_pos = mine ? topk_atomic_add_dev(w + TOPK_RWS_OUT, mine) : 0;
    sh.cand_n = fits && sh.hist[t] ? topk_atomic_add_dev(w + TOPK_RWS_CAND, sh.hist[t]) : 0;
  }
  TOPK_SYNC();
  topk_res_collect(sh, src, t, fits, (topk_u32*)(w + TOPK_RWS_ZERO), o, tr);
  TOPK_STAMP(sh, 4);
  int finals = 3;                        // the last arrival's count, in units of parts
  if (!fits) finals += topk_res_spread_refine(sh, rs, src, w, parts, t, above, K - above, o, tr);
  if (!topk_res_last(rs, w + TOPK_RWS_ARRIVE, finals * parts)) return false;
  // the row's last block: every other block is done with the workspace
  if (fits) {
    const int* gl = w + TOPK_RWS_ZERO;
    for (int i = TOPK_TID; i < 2 * nt; i += TOPK_THREADS) s[i] = (topk_u32)topk_ld_dev(gl + i);
    if (TOPK_TID == 0) sh.out_pos = above;   // bin t fills the slots after every block's bins > t
    TOPK_SYNC();
    topk_list_emit(sh, s, nt, K - above, o, tr);
  }
  TOPK_SYNC();
  for (int i = TOPK_TID; i < TOPK_RWS_ZERO; i += TOPK_THREADS) w[i] = 0;
  if (TOPK_TID == 0) {
    diag[0] = nt;
    diag[1] = fits ? 0 : TOPK_FLAG_BIN_OVF;
  }
  return true;
}

// parts: blocks per row (grid = rows x parts); cap: candidate entries (parts == 1: after the
// slice, at u32 offset cand_off of the dynamic shared memory; parts > 1: the row's global list);
// ws: the rows' workspaces, ws_row ints each (parts > 1 only). Same leading arguments, output and
// bin_counts as topk_transform_kernel.
extern "C" __global__ void __launch_bounds__(TOPK_THREADS)
topk_resident_kernel(const float* __restrict__ scores, int row_stride, int ncols,
                     const int* __restrict__ lengths, int has_lengths,
                     const int* __restrict__ row_starts, int has_starts, int K,
                     int* __restrict__ out, int mode, const int* __restrict__ table,
                     int table_stride, int page_bits, int* __restrict__ bin_counts,
                     int parts, int cap, int cand_off, int* __restrict__ ws, int ws_row) {
  __shared__ TopkShared sh;
  __shared__ int topk_rs[TOPK_RS_N];      // the spread row's scratch (TOPK_RS_*), zeroed here
  extern __shared__ __attribute__((aligned(16))) unsigned char topk_dyn[];
  topk_u32* s = (topk_u32*)topk_dyn;           // the slice (canonical bits)
  const int row = TOPK_BID / parts;
  const int part = TOPK_BID - row * parts;
  int start;
  const int len = topk_row_len(row, ncols, lengths, has_lengths, row_starts, has_starts, &start);
  const float* p = scores + (long long)row * (long long)row_stride + start;
  int* o = out + (long long)row * (long long)K;
  const TopkTransform tr = topk_transform_of(mode, table, table_stride, page_bits, row);
  int* diag = bin_counts + 2ll * row;
  if (len <= K) {                        // row-uniform: no barrier, workspace untouched
    if (part == 0) topk_short_row(o, len, K, tr, diag);
    return;
  }
  const int chunk = (((len + parts - 1) / parts) + 3) & ~3;   // slices keep 16-byte alignment
  const int off = part * chunk < len ? part * chunk : len;
  const int n = len - off < chunk ? len - off : chunk;
  for (int i = TOPK_TID; i < TOPK_RS_N; i += TOPK_THREADS) topk_rs[i] = 0;   // before the load's barriers
  topk_res_load(sh, p + off, n, s);
  TOPK_STAMP(sh, 1);
  TopkSliceSrc src;
  src.bits = s;
  src.n = n;
  src.idx_off = off;
  if (parts == 1) {
    topk_res_solo(sh, src, s + cand_off, cap, K, o, tr, diag);
    topk_write_flags(sh, diag);
  } else if (!topk_res_spread(sh, topk_rs, src, s, ws + (long long)row * ws_row, parts, cap, K, o, tr, diag)) {
    return;                              // another block of the row finishes it (and its profile)
  }
  TOPK_PROF_SYNC();
  TOPK_STAMP(sh, 9);
  TOPK_PROF_DUMP(sh, o);
}
