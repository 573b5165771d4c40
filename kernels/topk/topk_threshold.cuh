// Find the bin where count_above < need <= count_above + count, scanning bins from the top.
// Requires sum(hist[0..nbins)) >= need >= 1. All threads call it; results in sh.sel_*.
// Thread tid owns bins [hi - per, hi) counted down from the top, hi = nbins - tid * per; an
// exclusive scan of the per-thread sums over threads gives each thread the count above its bins.
// CUDA: 32-lane shuffle scan + one pass over the warp totals (2 barriers). Elsewhere (HIP wave64,
// host): a Hillis-Steele scan in shared memory (no assumption on the wavefront width).
__device__ static inline void topk_find_threshold_in(TopkShared& sh, const int* hist, int nbins,
                                                     int need) {
  const int tid = TOPK_TID;
  const int per = (nbins + TOPK_THREADS - 1) / TOPK_THREADS;
  int hi = nbins - tid * per;
  int lo = hi - per;
  if (lo < 0) lo = 0;
  int s = 0;
  for (int i = hi - 1; i >= lo; --i) s += hist[i];
#ifdef TOPK_WARP_AGG
  int incl = s;
#pragma unroll
  for (int d = 1; d < 32; d <<= 1) {
    int y = __shfl_up_sync(TOPK_FULL, incl, d);
    if ((int)topk_lane() >= d) incl += y;
  }
  const int warp = tid >> 5;
  if (topk_lane() == 31u) sh.scan[warp] = incl;
  TOPK_SYNC();
  int woff = 0;
  for (int w = 0; w < warp; ++w) woff += sh.scan[w];
  int above = woff + incl - s;  // exclusive
#else
  sh.scan[tid] = s;
  TOPK_SYNC();
  for (int off = 1; off < TOPK_THREADS; off <<= 1) {
    int v = (tid >= off) ? sh.scan[tid - off] : 0;
    TOPK_SYNC();
    sh.scan[tid] += v;
    TOPK_SYNC();
  }
  int above = sh.scan[tid] - s;  // exclusive
#endif
  if (hi > lo && above < need && need <= above + s) {
    for (int i = hi - 1; i >= lo; --i) {
      int c = hist[i];
      if (above + c >= need) {
        sh.sel_bin = i;
        sh.sel_above = above;
        break;
      }
      above += c;
    }
  }
  TOPK_SYNC();
}

__device__ static inline void topk_find_threshold(TopkShared& sh, int nbins, int need) {
  topk_find_threshold_in(sh, sh.hist, nbins, need);
}

__device__ static inline void topk_clear_hist(TopkShared& sh, int nbins) {
  for (int i = TOPK_TID; i < nbins; i += TOPK_THREADS) sh.hist[i] = 0;
}

