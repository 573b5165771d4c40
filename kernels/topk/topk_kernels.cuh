// Row geometry shared by both kernels (identical arithmetic: a split row is seen the same way).
__device__ static inline int topk_row_len(int row, int ncols, const int* lengths, int has_lengths,
                                          const int* row_starts, int has_starts, int* start_out) {
  const int start = has_starts ? row_starts[row] : 0;
  int len = has_lengths ? lengths[row] : ncols;
  if (start < 0 || start > ncols) len = 0;            // invalid start: treat the row as empty
  else if (len > ncols - start) len = ncols - start;  // never read past the row
  if (len < 0) len = 0;
  *start_out = start > 0 ? start : 0;
  return len;
}

__device__ static inline bool topk_use_long(int len, int K, int prefix_len, int scratch_cap) {
  return prefix_len >= K && len > 2 * prefix_len && scratch_cap > 0 && len >= 16 * K;
}

// Long rows: a strided sample guesses a bin t0 that about 1.5K*4096/len + 16 sample values
// reach; returns f0, the smallest fine key of bin t0, or, where t0 is a fat bin, a key inside it:
// when t0 holds many more sample values than the aim still needs and the sample puts at least
// 2K of the row above t0, a second histogram of the sample values in t0 (over t0's fine-key
// interval) places f0 where the aim is reached (an 8-bit bin near the top of a normal row holds
// ~20K of 1M values; the row's kept values drop to about 12-bit's). *cut = t0 then (the one bin
// whose count among the kept values is partial: a threshold bin equal to it takes the plain
// path, which recounts the row), else -1. *sampled (where given): how many of the 4 TOPK_SAMPLE4
// sample values f0 keeps (the aim where t0 was refined). Deterministic (the same f0 in every
// block that samples the same row). Needs sh.hist cleared on entry; leaves it cleared.
__device__ static inline topk_u32 topk_sample_floor(TopkShared& sh, const float* p, int len,
                                                    int K, int* cut, int* sampled = nullptr) {
  const int tid = TOPK_TID;
  const topk_f4* v = (const topk_f4*)p;
  const bool al = (((unsigned long long)p) & 15ull) == 0ull;
  const int nv = len >> 2;
  constexpr int PER = (TOPK_SAMPLE4 + TOPK_THREADS - 1) / TOPK_THREADS;
  // TOPK_SAMPLE4 / TOPK_SAMPLE_RUN runs of TOPK_SAMPLE_RUN consecutive float4 spread evenly over
  // the row (len >= 16K here, so nv >= 4K)
  constexpr int RUN = TOPK_SAMPLE_RUN;
  constexpr int RUNS = TOPK_SAMPLE4 / RUN;
  topk_f4 a[PER];                  // every sample load in flight before the histogram updates
#pragma unroll
  for (int u = 0; u < PER; ++u) {
    const int s = tid + u * TOPK_THREADS;
    const int sc = s < TOPK_SAMPLE4 ? s : 0;
    const int i4 = (int)(((long long)(sc / RUN) * (nv - RUN)) / (RUNS - 1)) + sc % RUN;
    if (al) a[u] = v[i4];
    else { a[u].x = p[4 * i4]; a[u].y = p[4 * i4 + 1]; a[u].z = p[4 * i4 + 2]; a[u].w = p[4 * i4 + 3]; }
  }
#pragma unroll
  for (int u = 0; u < PER; ++u) {
    if (tid + u * TOPK_THREADS >= TOPK_SAMPLE4) continue;   // warp-uniform (TOPK_SAMPLE4 % 32 == 0)
    topk_hist_add<true>(sh.hist, topk_bin(topk_canon(topk_bits(a[u].x))), true);
    topk_hist_add<true>(sh.hist, topk_bin(topk_canon(topk_bits(a[u].y))), true);
    topk_hist_add<true>(sh.hist, topk_bin(topk_canon(topk_bits(a[u].z))), true);
    topk_hist_add<true>(sh.hist, topk_bin(topk_canon(topk_bits(a[u].w))), true);
  }
  TOPK_SYNC();
  // TOPK_SAMPLE_MARGIN percent of the expected count (default 1.5 times it), plus 16
  long long want = (long long)TOPK_SAMPLE_MARGIN * K * (4 * TOPK_SAMPLE4) / (100ll * len) + 16;
  const int aim = (int)(want < 4 * TOPK_SAMPLE4 ? want : 4 * TOPK_SAMPLE4);
  topk_find_threshold(sh, TOPK_BINS, aim);
  const int t0 = sh.sel_bin;
  const int need0 = aim - sh.sel_above;           // >= 1 sample values of t0 still to reach
  const bool refine = sh.hist[t0] > 2 * need0 + 16 &&
                      (long long)sh.sel_above * len >= 2ll * K * (4 * TOPK_SAMPLE4);   // block-uniform
  if (sampled) *sampled = refine ? aim : sh.sel_above + sh.hist[t0];
  // t0's fine-key interval [lo, hi] into sh.scan (free after the threshold search's barrier)
#ifdef TOPK_WARP_AGG
  if (tid < 32) {                  // warp 0: a 32-way search (7 rounds instead of 32 steps)
    const topk_u32 f = topk_fine_floor_of_bin_warp(t0);
    const topk_u32 up = refine && t0 + 1 < TOPK_BINS ? topk_fine_floor_of_bin_warp(t0 + 1) - 1u : 0xFFFFFFFFu;
    if (tid == 0) {
      sh.scan[0] = (int)f;
      sh.scan[1] = (int)up;
    }
  }
#else
  if (tid == 0) {
    sh.scan[0] = (int)topk_fine_floor_of_bin(t0);
    sh.scan[1] = (int)(refine && t0 + 1 < TOPK_BINS ? topk_fine_floor_of_bin(t0 + 1) - 1u : 0xFFFFFFFFu);
  }
#endif
  TOPK_SYNC();
  topk_u32 f0 = (topk_u32)sh.scan[0];
  *cut = -1;
  if (refine) {
    const topk_u32 hi = (topk_u32)sh.scan[1];
    const int bl = topk_bitlen(hi - f0);
    const int shift = bl > TOPK_COARSE_BITS ? bl - TOPK_COARSE_BITS : 0;   // < TOPK_BINS sub-bins
    topk_clear_hist(sh, TOPK_BINS);
    TOPK_SYNC();
#pragma unroll
    for (int u = 0; u < PER; ++u) {
      if (tid + u * TOPK_THREADS >= TOPK_SAMPLE4) continue;
      const float x[4] = {a[u].x, a[u].y, a[u].z, a[u].w};
#pragma unroll
      for (int j = 0; j < 4; ++j) {
        const topk_u32 k = topk_fine_key(topk_canon(topk_bits(x[j])));
        if (k >= f0 && k <= hi) topk_hist_inc(sh.hist, (int)((k - f0) >> shift));
      }
    }
    TOPK_SYNC();
    topk_find_threshold(sh, TOPK_BINS, need0);     // the sub-bins hold hist[t0] >= need0 values
    f0 += (topk_u32)sh.sel_bin << shift;
    *cut = t0;
  }
  topk_clear_hist(sh, TOPK_BINS);
  TOPK_SYNC();
  return f0;
}

// A row of at most K values: all of them (transformed), then -1; no threshold bin.
// diag: the row's two report ints (count(t), TOPK_FLAG_*).
__device__ static inline void topk_short_row(int* o, int len, int K, const TopkTransform& tr,
                                             int* diag) {
  for (int i = TOPK_TID; i < K; i += TOPK_THREADS) o[i] = (i < len) ? tr.apply(i) : -1;
  if (TOPK_TID == 0) {
    diag[0] = 0;
    diag[1] = 0;
  }
}

// The row's report: diag[0] = count(t) (written where t is found), diag[1] = its flags.
__device__ static inline void topk_write_flags(const TopkShared& sh, int* diag) {
  if (TOPK_TID == 0) diag[1] = sh.flags;   // thread 0 is the only writer of sh.flags
}

// Zero the block's counters and histogram (all threads call it; ends with a barrier).
__device__ static inline void topk_block_init(TopkShared& sh) {
  if (TOPK_TID == 0) {
    sh.out_pos = 0;
    sh.cand_n = 0;
    sh.eq_taken = 0;
    sh.scratch_n = 0;
    sh.flags = 0;
#ifdef TOPK_PROF
    for (int i = 0; i < TOPK_PROF_N; ++i) sh.prof[i] = 0;
    sh.gt0 = topk_globaltimer();
    asm volatile("mov.u32 %0, %%smid;" : "=r"(sh.smid));
#endif
  }
  topk_clear_hist(sh, TOPK_BINS);
  TOPK_SYNC();
}

// Steps 1-3 over a source whose coarse histogram is in sh.hist (exact for every bin at or above
// the threshold bin): threshold bin, collect, refine. diag[0] = count(t).
template <typename Src>
__device__ static inline void topk_from_hist(TopkShared& sh, topk_u32* cand, const Src& src, int K,
                                             int* o, const TopkTransform& tr, int* diag) {
  topk_find_threshold(sh, TOPK_BINS, K);
  TOPK_STAMP(sh, 3);
  const int t = sh.sel_bin;
  const int above = sh.sel_above;
  const int count = sh.hist[t];
  if (TOPK_TID == 0) diag[0] = count;
  TOPK_SYNC();
  topk_finish(sh, cand, src, t, count, K - above, o, tr);
  TOPK_PROF_SYNC();
  TOPK_STAMP(sh, 9);
}

// The plain path of one row (len > K): histogram of the whole row (unless have_hist: sh.hist
// already holds one that is exact from the threshold bin up), then topk_from_hist. Needs the
// counters of sh zeroed and sh.hist cleared (as on kernel entry).
__device__ static TOPK_NOINLINE void topk_row_plain(TopkShared& sh, topk_u32* cand, const float* p,
                                             int len, int K, int* o, const TopkTransform& tr,
                                             int* diag, bool have_hist = false) {
  TopkRowSrc rs;
  rs.p = p;
  rs.n = len;
  if (!have_hist) {
    TopkHistOp hop;
    hop.hist = sh.hist;
    rs.visit(hop);
    TOPK_SYNC();
  }
  topk_from_hist(sh, cand, rs, K, o, tr, diag);
}

// Which kernels a build emits (each compile costs seconds: the launcher asks only for what it uses):
// -DTOPK_CLUSTER=S the cluster kernel alone, -DTOPK_SPLIT_ONLY the split kernel alone, else the
// main kernel and the split kernel.
#if !defined(TOPK_CLUSTER) && !defined(TOPK_RESIDENT)
// Split main pass (rows on few blocks): block BID handles part BID % nsplit of row
// BID / nsplit. Every block of a row computes the same f0 from the same sample, scans its slice
// (a multiple of 4 values long, so slices keep the row's 16-byte alignment), stages kept pairs in
// shared memory and appends them to the row's scratch list; the row's record in split_kept
// (TOPK_SPLIT_REC ints per row, zero at the call's start: the host zeroes it once, and
// topk_transform_kernel zeroes each row's record after reading it) holds the list's length and the coarse
// histogram of the kept values, summed over the row's blocks. topk_transform_kernel with
// presplit = 1 then finishes each row from its list and histogram, or falls back to the plain
// path (kept < K or overflow).
extern "C" __global__ void __launch_bounds__(TOPK_THREADS)
topk_split_keep_kernel(const float* __restrict__ scores, int row_stride, int ncols,
                       const int* __restrict__ lengths, int has_lengths,
                       const int* __restrict__ row_starts, int has_starts, int K,
                       topk_u32* __restrict__ scratch, int scratch_cap, int prefix_len,
                       int* __restrict__ split_kept, int nsplit) {
  __shared__ TopkShared sh;
  __shared__ topk_u2 topk_stage[TOPK_SPLIT_STAGE];
  const int row = TOPK_BID / nsplit;
  const int part = TOPK_BID - row * nsplit;
  int start;
  const int len = topk_row_len(row, ncols, lengths, has_lengths, row_starts, has_starts, &start);
  if (!topk_use_long(len, K, prefix_len, scratch_cap)) return;   // block-uniform
  const float* p = scores + (long long)row * (long long)row_stride + start;
  topk_clear_hist(sh, TOPK_BINS);
  TOPK_SYNC();
  int cut;
  const topk_u32 f0 = topk_sample_floor(sh, p, len, K, &cut);
  int* rec = split_kept + (long long)row * TOPK_SPLIT_REC;   // [kept counter, histogram, cut + 1]
  if (part == 0 && TOPK_TID == 0) rec[1 + TOPK_BINS] = cut + 1;
  const int chunk = (((len + nsplit - 1) / nsplit) + 3) & ~3;
  const long long off = (long long)part * chunk;
  if (off >= len) return;
  const int n = (len - off) < chunk ? (int)(len - off) : chunk;
  if (TOPK_TID == 0) sh.scratch_n = 0;
  TOPK_SYNC();
  topk_u2* glist = (topk_u2*)(scratch + (long long)row * 2ll * (long long)scratch_cap);
  topk_keep_pass<true, true>(&sh.scratch_n, rec, p + off, n, f0, glist, scratch_cap, topk_stage,
                             TOPK_SPLIT_STAGE, (int)off, sh.hist);
  topk_split_flush(sh, rec, rec + 1, glist, scratch_cap, topk_stage, TOPK_SPLIT_STAGE);
}
#endif  // !TOPK_CLUSTER && !TOPK_RESIDENT

#ifdef TOPK_PROF
__device__ static inline void topk_prof_dump(TopkShared& sh, int* o) {
  TOPK_SYNC();
  if (TOPK_TID == 0) {
    for (int i = 0; i < TOPK_PROF_N; ++i)
      o[i] = sh.prof[i] ? (int)(sh.prof[i] - sh.prof[0]) : -1;
    const unsigned long long gt1 = topk_globaltimer();   // outputs 10-14: timeline
    o[10] = (int)(unsigned)sh.gt0;
    o[11] = (int)(unsigned)(sh.gt0 >> 32);
    o[12] = (int)(unsigned)gt1;
    o[13] = (int)(unsigned)(gt1 >> 32);
    o[14] = (int)sh.smid;
  }
}
#define TOPK_PROF_DUMP(sh, o) topk_prof_dump(sh, o)
#else
#define TOPK_PROF_DUMP(sh, o) do { } while (0)
#endif

#if !defined(TOPK_CLUSTER) && !defined(TOPK_SPLIT_ONLY) && !defined(TOPK_RESIDENT)
extern "C" __global__ void __launch_bounds__(TOPK_THREADS)
topk_transform_kernel(const float* __restrict__ scores, int row_stride, int ncols,
                      const int* __restrict__ lengths, int has_lengths,
                      const int* __restrict__ row_starts, int has_starts, int K,
                      int* __restrict__ out, int mode, const int* __restrict__ table,
                      int table_stride, int page_bits, int* __restrict__ bin_counts,
                      topk_u32* __restrict__ scratch, int scratch_cap, int prefix_len,
                      int* __restrict__ split_kept, int presplit) {
  __shared__ TopkShared sh;
  extern __shared__ __attribute__((aligned(16))) unsigned char topk_dyn[];
  topk_u32* cand = (topk_u32*)topk_dyn;

  const int tid = TOPK_TID;
  const int row = TOPK_BID;
  int start;
  const int len = topk_row_len(row, ncols, lengths, has_lengths, row_starts, has_starts, &start);
  const float* p = scores + (long long)row * (long long)row_stride + start;
  int* o = out + (long long)row * (long long)K;

  const TopkTransform tr = topk_transform_of(mode, table, table_stride, page_bits, row);
  int* diag = bin_counts + 2ll * row;

  if (len <= K) {
    topk_short_row(o, len, K, tr, diag);
    return;
  }

  topk_block_init(sh);
  TOPK_STAMP(sh, 0);

  // Long rows: a strided sample guesses a bin t0; the main pass keeps only elements of bins
  // >= t0 (in the scratch list), here or already by topk_split_keep_kernel (presplit). If the
  // list overflowed, its coarse histogram is still complete (every kept value counted): the row
  // is finished from it with one collect pass over the row. If fewer than K were kept (a bad
  // guess), the row is done the plain way. Exact in every case; both set TOPK_FLAG_REPLAY.
  const bool use_long = topk_use_long(len, K, prefix_len, scratch_cap);
  topk_u32* srow = scratch + (long long)row * 2ll * (long long)scratch_cap;
  bool done = false, have_hist = false;
  if (use_long) {
    int kept, cut;              // cut: the bin f0 cut (its kept count is partial), -1 if none
    if (presplit) {   // the split blocks' record of the row: read, then zeroed for the next call
      int* rec = split_kept + (long long)row * TOPK_SPLIT_REC;
      kept = rec[0];
      cut = rec[1 + TOPK_BINS] - 1;
      if (kept >= K)  // the split blocks summed their histograms in the record
        for (int i = tid; i < TOPK_BINS; i += TOPK_THREADS) sh.hist[i] = rec[1 + i];
      TOPK_SYNC();
      for (int i = tid; i < TOPK_SPLIT_REC; i += TOPK_THREADS) rec[i] = 0;
    } else {
      const topk_u32 f0 = topk_sample_floor(sh, p, len, K, &cut);
      TOPK_STAMP(sh, 1);
      topk_keep_pass<false, true>(&sh.scratch_n, nullptr, p, len, f0, (topk_u2*)srow,
                                  scratch_cap, nullptr, 0, 0, sh.hist);
      TOPK_SYNC();
      TOPK_STAMP(sh, 2);
      kept = sh.scratch_n;
    }
    const bool list_ok = kept <= scratch_cap;
    if (kept >= K) {    // sh.hist: the kept values' histogram (the record's, or the keep pass's)
      // The kept set is an upper set holding every key >= f0, plus -0.0 where f0 = fine(+0.0):
      // the histogram is exact at every bin >= t except -0.0's, where only the list (an upper
      // set itself) is complete: an overflowed list with that threshold bin takes the plain path.
      // So does a threshold bin that f0 cut (a sampling accident: its count is partial).
      bool partial = false;
      if (cut >= 0) {
        topk_find_threshold(sh, TOPK_BINS, K);
        partial = sh.sel_bin == cut;              // block-uniform
      }
      if (partial) {
        // the plain path below, from a cleared histogram
      } else if (list_ok) {
        TopkListSrc ls;
        ls.p = srow;
        ls.n = kept;
        topk_from_hist(sh, cand, ls, K, o, tr, diag);
        done = true;
      } else {
        topk_find_threshold(sh, TOPK_BINS, K);
        have_hist = sh.sel_bin != topk_bin(0x80000000u);   // block-uniform
      }
    }
    if (!done) {
      if (tid == 0) sh.flags |= TOPK_FLAG_REPLAY;
      if (!have_hist) topk_clear_hist(sh, TOPK_BINS);
      TOPK_SYNC();
    }
  }
  if (!done) topk_row_plain(sh, cand, p, len, K, o, tr, diag, have_hist);
  topk_write_flags(sh, diag);
  TOPK_PROF_DUMP(sh, o);
}
#endif  // !TOPK_CLUSTER && !TOPK_SPLIT_ONLY && !TOPK_RESIDENT

