// ---------------------------------------------------------------------------------------------
// Cluster kernel (CUDA, sm_90 and later; built with -DTOPK_CLUSTER=S, 2 <= S <= 16; over 8 the
// host allows the non-portable size on the function before launching it): a long row
// is handled by one thread-block cluster of S blocks that share their shared memory (DSMEM), in
// one kernel (with -DTOPK_CLUSTER_REGS, so is any row longer than K whose slices fit the
// blocks' registers: see topk_cluster_regs_row, which reads the row once even where bin t
// overflows; the host sends short rows here on sm_90, policy.short_cluster):
//  1. every block of the row computes the same f0 from the same sample (topk_sample_floor) and
//     keeps the values of its slice with fine key >= f0 in its own dynamic shared memory (the
//     LDS budget, TOPK_CAP entries; values beyond it spill to the block's own region of the
//     row's global scratch list, scratch_cap / S entries: TOPK_FLAG_SPILL), counting their
//     coarse bins;
//  2. cluster barrier; every block reads all S kept counts and group sums (TOPK_CGS bins each),
//     then every block's bins of the group that holds the K-th value (DSMEM), and finds the same
//     threshold bin t; its output slots for bins > t follow those of the blocks of lower rank
//     (sums over the same tables: no cross-block atomics);
//  3. each block emits its kept values of bins > t; when bin t fits one list, block 0 also
//     compacts its own bin-t values and pulls the other blocks' (or they push them to it);
//  4. block 0 finishes bin t exactly: rank or radix refine of its list, or, when bin t does not
//     fit a list (TOPK_FLAG_BIN_OVF), radix passes over every block's kept list (DSMEM and the
//     spill regions) while the other blocks wait; cluster barrier (no block leaves while block
//     0 still reads its memory).
// A spill region that overflows (all-equal rows, or a floor that kept far too many) keeps its
// counts: every block reads its slice again and the cluster finishes bin t over the slices
// (topk_cluster_narrow; TOPK_FLAG_ROW_PASSES). Where the sample already says so (f0 keeps over
// twice what the lists hold), step 1 only counts (topk_count_pass), and a row whose counted
// values are all one key is finished by each block taking its share (topk_cluster_one_key). Fewer than K kept, or a threshold bin that the
// floor cut (a bad sample), sends the row to block 0's plain path (exact; TOPK_FLAG_REPLAY).
// Rows of at most K values, and short rows the register path does not take, are done by block
// 0 alone. Same arguments, output and bin_counts as topk_transform_kernel, then the scratch list
// (scratch_cap entries of 8 bytes per row, used only for spills).
#if defined(TOPK_CLUSTER) && defined(TOPK_RESIDENT)
#error "TOPK_CLUSTER and TOPK_RESIDENT are two builds"
#endif
#if defined(TOPK_CLUSTER)
#if defined(TOPK_HIP)
#error "TOPK_CLUSTER needs CUDA thread-block clusters (sm_90+); HIP builds use the split kernel"
#endif
#ifndef TOPK_CLUSTER_PUSH
#define TOPK_CLUSTER_PUSH 1
#endif
#if TOPK_CLUSTER < 2 || TOPK_CLUSTER > 16
#error "TOPK_CLUSTER must be between 2 and 16 (over 8: a non-portable size, allowed per function)"
#endif
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ < 900
#error "TOPK_CLUSTER needs sm_90 or later (thread-block clusters)"
#endif

// The kept list of block r of the cluster: its shared stage (DSMEM for r != own rank), then its
// spill region in global memory.
struct TopkBlockList {
  const topk_u32* stage;
  const topk_u32* spill;
  int n;                   // kept count (stage first, TOPK_CAP entries, then the spill)
  bool sync_loads = false; // see TopkListSrc (the stage part only)
  template <typename F>
  __device__ inline void visit(F& f) const {
    TopkListSrc a;
    a.p = stage;
    a.n = n < TOPK_CAP ? n : TOPK_CAP;
    a.sync_loads = sync_loads;
    a.visit(f);
    if (n > TOPK_CAP) {    // block-uniform
      TopkListSrc g;
      g.p = spill;
      g.n = n - TOPK_CAP;
      g.visit(f);
    }
  }
};

// Every kept value of the row: the S blocks' lists.
struct TopkClusterSrc {
  topk_u32* stage;         // this block's stage (mapped to each rank)
  const topk_u32* spill0;  // rank 0's spill region; rank r's is spill0 + 2 * r * region
  int region;
  const int* counts;       // kept count per rank
  __device__ inline TopkBlockList list(int r) const {   // rank r's list, its stage through the cluster map
    TopkBlockList l;
    l.stage = topk_map_rank(stage, (unsigned)r);
    l.spill = spill0 + 2ll * r * region;
    l.n = counts[r];
    return l;
  }
  template <typename F>
  __device__ inline void visit(F& f) const {
    for (int r = 0; r < TOPK_CLUSTER; ++r) list(r).visit(f);
  }
};

__device__ inline TopkClusterSrc topk_cluster_src(topk_u32* stage, const topk_u32* spill0, int region,
                                                  const int* counts) {
  TopkClusterSrc all;
  all.stage = stage;
  all.spill0 = spill0;
  all.region = region;
  all.counts = counts;
  return all;
}

// Bin t of a cluster row over every block's list (out of line: a cold path).
__device__ static TOPK_NOINLINE void topk_cluster_refine(TopkShared& sh, const TopkClusterSrc& all, int t,
                                                         int need, int* o, const TopkTransform& tr) {
  topk_refine_emit(sh, all, t, need, o, tr);
}

// The cluster's threshold search. From TOPK_CLUSTER_TWO_LEVEL blocks up it is two-level: groups
// of TOPK_CGS consecutive bins, then the bins of the one group that holds the K-th value. Each
// block sums its own groups before barrier (1); after it, a block reads S x TOPK_CG group sums
// and S x TOPK_CGS bins over DSMEM (one load per thread and level) instead of S whole
// histograms (S x 16 KiB at 12 bits). On the H200 that took (8,128K) at S=8 from 23.6-24.1 to
// 19.6-19.8 us, but made S=3 at (64,1M) 5% slower and S=2 at (64,128K) 2-5% slower (the keep pass's
// code moves with any change here; benchmarks/records/topk/v11/), so smaller clusters keep the
// one-level search: every block sums the S whole histograms.
#ifndef TOPK_CLUSTER_TWO_LEVEL
#define TOPK_CLUSTER_TWO_LEVEL 4
#endif
// topk_cth, the cluster threshold's shared scratch: [S][CG] every block's group sums, [S][CGS]
// every block's bins of the threshold group, then this block's own CG group sums (the part the
// other blocks read)
#define TOPK_CTH_B(S) ((S) * TOPK_CG)
#define TOPK_CTH_OWN(S) (TOPK_CTH_B(S) + (S) * TOPK_CGS)
#define TOPK_CTH_N(S) (TOPK_CTH_OWN(S) + TOPK_CG)

// Sums of TOPK_CGS consecutive bins of hist into g[TOPK_CG]: int4 loads, the lanes of one group
// reduced by shuffles (TOPK_BINS / 4 loads: a multiple of 32, so whole warps take part).
__device__ static inline void topk_group_sums(const int* hist, int* g) {
  constexpr int L = TOPK_CGS / 4;   // lanes per group: 16 or 4
  for (int i4 = TOPK_TID; i4 < TOPK_BINS / 4; i4 += TOPK_THREADS) {
    const int4 v = ((const int4*)hist)[i4];
    int s = v.x + v.y + v.z + v.w;
#pragma unroll
    for (int d = L / 2; d > 0; d >>= 1) s += __shfl_xor_sync(TOPK_FULL, s, d);
    if ((i4 & (L - 1)) == 0) g[i4 / L] = s;
  }
}

// Block `rank`'s slice of a row of len values split over S blocks: [off, off + n), n may be 0.
// Returns the slice length every block was given (the same in all of them).
template <int S>
__device__ static inline int topk_cluster_slice(int len, unsigned rank, int* off, int* n) {
  const int chunk = (((len + S - 1) / S) + 3) & ~3;   // slices keep 16-byte alignment
  *off = (int)rank * chunk < len ? (int)rank * chunk : len;
  *n = len - *off < chunk ? len - *off : chunk;
  return chunk;
}

// One warp's search of a [S][C] table a (shared memory, C = 16 or 64): the column c, counted
// from the top, that holds the need-th value of the column sums, *above the sum of the columns
// above it, *cnt its own sum. Every warp that calls it gets the same answer, without a block
// barrier: each lane sums C / 32 columns (or one), a suffix scan over the lanes, one ballot.
template <int S, int C>
__device__ static inline void topk_warp_find(const int* a, int need, int* col, int* above, int* cnt) {
  constexpr int P = C >= 32 ? C / 32 : 1;   // columns per lane
  const int lane = (int)topk_lane();
  int c[P];
  int s = 0;
#pragma unroll
  for (int q = 0; q < P; ++q) {
    const int j = lane * P + q;
    c[q] = 0;
#pragma unroll
    for (int r = 0; r < S; ++r) c[q] += j < C ? a[r * C + j] : 0;
    s += c[q];
  }
  int incl = s;              // the sum over lanes >= this one
#pragma unroll
  for (int d = 1; d < 32; d <<= 1) {
    const int y = __shfl_down_sync(TOPK_FULL, incl, d);
    if (lane + d < 32) incl += y;
  }
  int ab = incl - s, hit = -1, hab = 0, hc = 0;
#pragma unroll
  for (int q = P - 1; q >= 0; --q) {
    if (hit < 0 && ab < need && need <= ab + c[q]) {
      hit = lane * P + q;
      hab = ab;
      hc = c[q];
    }
    ab += c[q];
  }
  const unsigned m = __ballot_sync(TOPK_FULL, hit >= 0);
  const int src = m ? __ffs(m) - 1 : 0;
  const int h = __shfl_sync(TOPK_FULL, hit, src);
  *col = h < 0 ? 0 : h;
  *above = __shfl_sync(TOPK_FULL, hab, src);
  *cnt = __shfl_sync(TOPK_FULL, hc, src);
}

#if TOPK_CLUSTER >= TOPK_CLUSTER_TWO_LEVEL
// After cluster barrier (1): every block's group sums (its TOPK_CTH_OWN part) into [S][CG].
template <int S>
__device__ static inline void topk_cluster_read_groups(int* cth) {
  for (int i = TOPK_TID; i < S * TOPK_CG; i += TOPK_THREADS)
    cth[i] = topk_map_rank(cth + TOPK_CTH_OWN(S), (unsigned)(i / TOPK_CG))[i % TOPK_CG];
}

// The two-level search over the tables read above and the S blocks' histograms (DSMEM): bin
// t = *gt * TOPK_CGS + *tj holds the K-th value of the row; *above values lie in bins > t and
// *nt in bin t. Same answer in every warp of every block; one block barrier (the threshold
// group's bins), where a block-wide scan per level took seven.
template <int S>
__device__ static inline void topk_cluster_find(TopkShared& sh, int* cth, int K, int* gt, int* tj,
                                                int* above, int* nt) {
  int* const gb = cth + TOPK_CTH_B(S);                   // [S][CGS] bins of group gt
  int ng, a2;
  topk_warp_find<S, TOPK_CG>(cth, K, gt, above, &ng);
  for (int i = TOPK_TID; i < S * TOPK_CGS; i += TOPK_THREADS)
    gb[i] = topk_map_rank(sh.hist, (unsigned)(i / TOPK_CGS))[*gt * TOPK_CGS + i % TOPK_CGS];
  TOPK_SYNC();
  topk_warp_find<S, TOPK_CGS>(gb, K - *above, tj, &a2, nt);
  *above += a2;
}

// This thread's part of block `rank`'s first output slot: the bins > t of the blocks of lower
// rank (groups > gt, then group gt's bins > tj), from the tables of topk_cluster_find.
template <int S>
__device__ static inline int topk_cluster_mine(const int* cth, unsigned rank, int gt, int tj) {
  int mine = 0;
  for (int i = TOPK_TID; i < (int)rank * TOPK_CG; i += TOPK_THREADS)
    if (i % TOPK_CG > gt) mine += cth[i];
  for (int i = TOPK_TID; i < (int)rank * TOPK_CGS; i += TOPK_THREADS)
    if (i % TOPK_CGS > tj) mine += cth[TOPK_CTH_B(S) + i];
  return mine;
}
#endif

// This block's first slot in block 0's stage for its bin-t values: bin t's count in the blocks of
// lower rank (from the threshold group's table, or from their histograms over DSMEM).
template <int S>
__device__ static inline int topk_cluster_first(TopkShared& sh, const int* cth, unsigned rank, int t) {
  int first = 0;
  for (int r = 0; r < (int)rank; ++r)
#if TOPK_CLUSTER >= TOPK_CLUSTER_TWO_LEVEL
    first += cth[TOPK_CTH_B(S) + r * TOPK_CGS + t % TOPK_CGS];
#else
    first += topk_map_rank(sh.hist, (unsigned)r)[t];
#endif
  return first;
}

// sh.out_pos += the block's sum of every thread's `mine`.
__device__ static inline void topk_add_out_pos(TopkShared& sh, int mine) {
#ifdef TOPK_WARP_AGG
#pragma unroll
  for (int d = 16; d > 0; d >>= 1) mine += __shfl_xor_sync(TOPK_FULL, mine, d);
  if (topk_lane() == 0u && mine) atomicAdd(&sh.out_pos, mine);
#else
  if (mine) topk_atomic_add(&sh.out_pos, mine);
#endif
}

// hist[d] += n of every lane's run (n = 0: none), lanes that share the first run's digit merged
// into one atomic (all-equal slices: one per warp).
__device__ static inline void topk_run_flush(int* hist, int d, int n) {
  const unsigned m = __ballot_sync(TOPK_FULL, n > 0);
  if (m == 0u) return;
  const int lead = __ffs((int)m) - 1;
  const int d0 = __shfl_sync(TOPK_FULL, d, lead);
  const bool same = n > 0 && d == d0;
  const int sum = (int)__reduce_add_sync(TOPK_FULL, same ? (unsigned)n : 0u);
  if (topk_lane() == (unsigned)lead) atomicAdd(&hist[d0], sum);
  else if (n > 0 && !same) atomicAdd(&hist[d], n);
}

// A block's slice of the row as the finish below visits it: f(i, x, valid) on every lane at
// every step (a block-uniform trip count, so warp-aggregated updates apply), x the value at
// index i of the slice (valid: i < n).
template <int R>
struct TopkRegSlice {        // the register path's: R float4 a thread, strided by the block
  static constexpr bool in_registers = true;
  const topk_f4 (&v)[R];
  int n;
  template <typename F>
  __device__ inline void visit(F&& f) const {
#pragma unroll
    for (int u = 0; u < R; ++u) {
      const int i = 4 * (TOPK_TID + u * TOPK_THREADS);
      const float x[4] = {v[u].x, v[u].y, v[u].z, v[u].w};
#pragma unroll
      for (int j = 0; j < 4; ++j) f(i + j, x[j], i + j < n);
    }
  }
};

struct TopkGlobalSlice {     // the sampled path's, read again from global memory
  static constexpr bool in_registers = false;
  static constexpr int U = 4;   // float4 loads in flight per thread
  const float* q;
  int n;
  template <typename F>
  __device__ inline void visit(F&& f) const {
    visit(f, [] { return false; });
  }
  // The same, stopping before a step where stop() (block-uniform) holds.
  template <typename F, typename Stop>
  __device__ inline void visit(F&& f, Stop&& stop) const {
    const bool al = (((unsigned long long)q) & 15ull) == 0ull;
    for (int b = 0; b < n; b += 4 * U * TOPK_THREADS) {
      if (stop()) return;
      topk_f4 a[U];
#pragma unroll
      for (int u = 0; u < U; ++u) {
        const int i = b + 4 * (TOPK_TID + u * TOPK_THREADS);
        if (al && i + 4 <= n) {
          a[u] = *(const topk_f4*)(q + i);
        } else {
          a[u].x = i < n ? q[i] : 0.f;
          a[u].y = i + 1 < n ? q[i + 1] : 0.f;
          a[u].z = i + 2 < n ? q[i + 2] : 0.f;
          a[u].w = i + 3 < n ? q[i + 3] : 0.f;
        }
      }
#pragma unroll
      for (int u = 0; u < U; ++u) {
        const int i = b + 4 * (TOPK_TID + u * TOPK_THREADS);
        const float x[4] = {a[u].x, a[u].y, a[u].z, a[u].w};
#pragma unroll
        for (int j = 0; j < 4; ++j) f(i + j, x[j], i + j < n);
      }
    }
  }
};

// The keep pass's counts without its list, for a row whose sample says that its lists would
// overflow (all-equal or tie-heavy rows): every value of this block's slice s that f0 keeps (the
// keep pass's test, NaN included) counted by coarse bin in hist and in *sctr; span[0..1] get the
// smallest and largest fine key counted (atomicMin / atomicMax: span starts at ~0u, 0u). Inline:
// called out of line it made the clean rows 3.5-5% slower on the H200 ((64, 128K) 31.1-31.5
// against 29.4-30.0 us; benchmarks/records/topk_decode/r14_*), though they never take it.
__device__ static inline void topk_count_pass(int* sctr, topk_u32* span, const TopkGlobalSlice& s,
                                              topk_u32 f0, int* hist) {
  const float thr = topk_keep_threshold(f0);
  int c = 0;
  topk_u32 lo = 0xFFFFFFFFu, hi = 0u;
  s.visit([&](int, float x, bool valid) {
    if (!valid || x < thr) return;
    const topk_u32 bits = topk_canon(topk_bits(x));
    const topk_u32 k = topk_fine_key(bits);
    topk_hist_inc(hist, topk_bin(bits));
    ++c;
    lo = k < lo ? k : lo;
    hi = k > hi ? k : hi;
  });
  c = (int)__reduce_add_sync(TOPK_FULL, (unsigned)c);
  lo = __reduce_min_sync(TOPK_FULL, lo);
  hi = __reduce_max_sync(TOPK_FULL, hi);
  if (topk_lane() == 0u && c) {
    atomicAdd(sctr, c);
    atomicMin(&span[0], lo);
    atomicMax(&span[1], hi);
  }
}

// A row whose counted values (every block's, fine key >= f0) are all one key, with nt >= K of
// them (all-equal rows): they all lie in bin t and none above it, so the top K are any K of them.
// Block `rank` takes K minus the counts of the blocks of lower rank (ckept), at most its own,
// from its slice of the row p read again, from output slot `first` on, and stops reading once it
// has them; blocks with none to take read nothing. Block 0 writes the row's report (nt, flags
// row_pass and bin_overflow where nt > TOPK_CAP). Out of line: a cold path.
__device__ static TOPK_NOINLINE void topk_cluster_one_key(TopkShared& sh, const float* p, int off, int n,
                                                          topk_u32 key, const int* ckept, int K,
                                                          unsigned rank, int nt, int* o,
                                                          const TopkTransform& tr, int* diag) {
  int first = 0;
  for (int r = 0; r < (int)rank; ++r) first += ckept[r];
  const int quota = K - first < ckept[rank] ? K - first : ckept[rank];
  const topk_u32 kb = topk_bits_of_fine(key);            // canonical bits of the one key
  topk_cluster_sync();                                   // every block has read the cluster's tables
  if (TOPK_TID == 0) sh.eq_taken = 0;
  const TopkGlobalSlice s{p + off, n};
  s.visit([&](int i, float x, bool valid) {
    const bool at = valid && topk_canon(topk_bits(x)) == kb;
    const int e = topk_reserve<true>(&sh.eq_taken, at);
    if (e >= 0 && e < quota) o[first + e] = tr.apply(off + i);
  }, [&] {                   // a barrier, then one answer for the block (any thread's read
    // of the count at or past the quota: a warp that read it lower would go on alone)
    return __syncthreads_or(*(volatile const int*)&sh.eq_taken >= quota) != 0;   // quota <= 0: none
  });
  if (rank != 0) return;
  if (TOPK_TID == 0) {
    diag[0] = nt;
    sh.flags |= TOPK_FLAG_ROW_PASSES | (nt > TOPK_CAP ? TOPK_FLAG_BIN_OVF : 0);
  }
  TOPK_SYNC();
  topk_write_flags(sh, diag);
}

// The radix digit search of topk_cluster_narrow. This block's histogram of 256 digits is
// complete in sh.hist; as topk_cluster_find, two levels (16 groups of 16 digits) over the S
// blocks' histograms. Out: digit *d holds the need-th value, *above values lie in higher digits,
// *cnt in digit *d, *before of them in the blocks of lower rank; this thread's part of the
// block's slots for higher digits is added to sh.out_pos. Ends with a cluster barrier (no block
// reads another's tables or histogram any more). cth: TOPK_CTH_N(S) ints of shared scratch.
template <int S>
__device__ static inline void topk_cluster_digit_find(TopkShared& sh, int* cth, int need, unsigned rank,
                                                      int* d, int* above, int* cnt, int* before) {
  constexpr int G = 16;
  static_assert(TOPK_CG >= G && TOPK_CGS >= G, "the [S][16] digit tables sit inside TOPK_CTH_*");
  int* const own = cth + TOPK_CTH_OWN(S);                // [G] this block's group sums
  int* const gb = cth + TOPK_CTH_B(S);                   // [S][G] the threshold group's digits
  for (int g = TOPK_TID; g < G; g += TOPK_THREADS) {
    int s = 0;
    for (int j = 0; j < G; ++j) s += sh.hist[g * G + j];
    own[g] = s;
  }
  topk_cluster_sync();                                   // every block's digits and group sums
  for (int i = TOPK_TID; i < S * G; i += TOPK_THREADS) cth[i] = topk_map_rank(own, (unsigned)(i / G))[i % G];
  TOPK_SYNC();
  int g, a1, ng, j, a2;
  topk_warp_find<S, G>(cth, need, &g, &a1, &ng);
  for (int i = TOPK_TID; i < S * G; i += TOPK_THREADS)
    gb[i] = topk_map_rank(sh.hist, (unsigned)(i / G))[g * G + i % G];
  TOPK_SYNC();
  topk_warp_find<S, G>(gb, need - a1, &j, &a2, cnt);
  int mine = 0, bef = 0;
  for (int i = TOPK_TID; i < (int)rank * G; i += TOPK_THREADS)
    mine += (i % G > g ? cth[i] : 0) + (i % G > j ? gb[i] : 0);
  topk_add_out_pos(sh, mine);
  for (int r = 0; r < (int)rank; ++r) bef += gb[r * G + j];
  *d = g * G + j;
  *above = a1 + a2;
  *before = bef;
  topk_cluster_sync();
}

// The same out of line, for slices read from global memory (the sampled path's cold finish):
// inlined there, its cluster searches made ptxas spill in the sampled path's hot code (the
// 512-thread cluster-of-3 build: 44 bytes, none without it).
template <int S>
__device__ static TOPK_NOINLINE void topk_cluster_digit_find_ool(TopkShared& sh, int* cth, int need,
                                                                 unsigned rank, int* d, int* above,
                                                                 int* cnt, int* before) {
  topk_cluster_digit_find<S>(sh, cth, need, rank, d, above, cnt, before);
}

// Bin t of a row whose S slices every block can visit (Slice: its registers, or its slice of
// the row read again), once the coarse search has found t (nt values, `above` in bins > t) and
// this block's output slots for bins > t are in sh.out_pos. Where bin t does not fit block 0's
// stage (nt > TOPK_CAP: ties, or a dense bin): radix passes over the fine keys of the bin-t
// values of every slice (8-bit digits from the top; no kept list), each a cluster-wide digit
// search, until the values at the threshold fit the stage. Then one visit emits each block's
// values above the threshold and pushes those at it to block 0's stage (from `first`, this
// block's first bin-t slot, read by thread 0, where no pass ran), and block 0 finishes them as a
// list. Where they still do not fit after the last digit they are all equal: each block emits
// its share of the `need` still wanted, in rank order. The first pass also finds bin t's smallest
// and largest fine key over the cluster (each block's in sh.scan[0..1], read over DSMEM after
// the digit search): when they are one key, its digits are all resolved at once (all-equal rows
// take one pass, not four). Block 0 writes the row's report: nt, `flags`, TOPK_FLAG_BIN_OVF
// where bin t did not fit. Profile stamps: 4 the first digit pass, 5 the digit searches, 6 the
// emission, 7 the last barrier (on block 0 a list finish writes its own 5-8 over them).
template <typename Slice>
__device__ static inline void topk_cluster_narrow(TopkShared& sh, int* cth, topk_u32* stage, const Slice& s,
                                                  int off, int K, unsigned rank, int t, int above, int nt,
                                                  int first, int flags, int* o, const TopkTransform& tr,
                                                  int* diag) {
  int need = K - above, cnt = nt, before = first;
  topk_u32 prefix = 0u, mask = 0u;
  topk_u32 lo = 0xFFFFFFFFu, hi = 0u;                   // this thread's bin-t fine keys (first pass)
  topk_u32* const span = reinterpret_cast<topk_u32*>(sh.scan);   // this block's [lo, hi]
  const float thr = topk_bin_prefilter(t);
  if (TOPK_TID == 0) {
    span[0] = 0xFFFFFFFFu;
    span[1] = 0u;
  }
  topk_cluster_sync();                                   // every block has read the coarse tables
  for (int shift = 24; shift >= 0 && cnt > TOPK_CAP; shift -= 8) {   // cluster-uniform
    topk_clear_hist(sh, 256);
    TOPK_SYNC();
    int run_d = 0, run_n = 0;      // this thread's run of one digit, added when the digit changes
    s.visit([&](int, float x, bool valid) {
      const topk_u32 bits = topk_canon(topk_bits(x));
      const topk_u32 k = topk_fine_key(bits);
      const bool in = valid && !(x <= thr) && topk_bin(bits) == t && (k & mask) == prefix;
      const int d = (int)((k >> shift) & 255u);
      if (in && d != run_d) {
        if (run_n) atomicAdd(&sh.hist[run_d], run_n);
        run_d = d;
        run_n = 0;
      }
      run_n += in;
      if (shift == 24) {     // the first pass only (cluster-uniform)
        lo = in && k < lo ? k : lo;
        hi = in && k > hi ? k : hi;
      }
    });
    topk_run_flush(sh.hist, run_d, run_n);
    TOPK_PROF_SYNC();
    if (shift == 24) TOPK_STAMP(sh, 4);   // profile builds: the first pass's end
    if (shift == 24) {
      lo = __reduce_min_sync(TOPK_FULL, lo);
      hi = __reduce_max_sync(TOPK_FULL, hi);
      if (topk_lane() == 0u) {
        atomicMin(&span[0], lo);
        atomicMax(&span[1], hi);
      }
    }
    TOPK_SYNC();
    int dg, ab;
    if constexpr (Slice::in_registers)
      topk_cluster_digit_find<TOPK_CLUSTER>(sh, cth, need, rank, &dg, &ab, &cnt, &before);
    else
      topk_cluster_digit_find_ool<TOPK_CLUSTER>(sh, cth, need, rank, &dg, &ab, &cnt, &before);
    need -= ab;
    prefix |= (topk_u32)dg << shift;
    mask |= 255u << shift;
    if (shift == 24) {       // every block's span is written (digit_find's cluster barriers)
      const int r = (int)topk_lane();
      const topk_u32* far = topk_map_rank(span, (unsigned)(r < TOPK_CLUSTER ? r : 0));
      lo = __reduce_min_sync(TOPK_FULL, far[0]);
      hi = __reduce_max_sync(TOPK_FULL, far[1]);
      if (lo == hi) {        // one key: every digit is resolved (cluster-uniform)
        prefix = lo;
        mask = 0xFFFFFFFFu;
        break;
      }
    }
  }
  TOPK_STAMP(sh, 5);
  const bool ties = cnt > TOPK_CAP;                      // one key, every digit resolved
  const int quota = need - before;                       // ties: how many this block emits
  if (TOPK_TID == 0) {
    sh.cand_n = before;      // this block's first slot in block 0's stage
    sh.eq_taken = 0;
  }
  TOPK_SYNC();
  const unsigned push = topk_cluster_addr(stage, 0u);
  s.visit([&](int i, float x, bool valid) {   // slots reserved once per warp and counter
    const topk_u32 bits = topk_canon(topk_bits(x));
    const int bin = topk_bin(bits);
    const topk_u32 k = topk_fine_key(bits) & mask;
    const bool live = valid && !(x <= thr);              // thr: below bin t (one compare)
    const bool at = live && bin == t && k == prefix;
    const int pos = topk_reserve<true>(&sh.out_pos, live && (bin > t || (bin == t && k > prefix)));
    if (pos >= 0) o[pos] = tr.apply(off + i);
    if (!ties) {
      const int c = topk_reserve<true>(&sh.cand_n, at);
      if (c >= 0) topk_cluster_st2(push + 8u * (unsigned)c, (topk_u32)(off + i), bits);
    } else {                 // no reservation once the block's quota is taken
      const bool open = quota > 0 && *(volatile const int*)&sh.eq_taken < quota;
      const int e = topk_reserve<true>(&sh.eq_taken, at && open);
      if (e >= 0 && e < quota) o[K - need + before + e] = tr.apply(off + i);
    }
  });
  TOPK_PROF_SYNC();
  TOPK_STAMP(sh, 6);
  topk_cluster_sync();                                   // every push has landed
  TOPK_STAMP(sh, 7);
  if (rank != 0) return;
  if (TOPK_TID == 0) {
    diag[0] = nt;
    sh.out_pos = K - need;   // the values left fill the slots after every block's larger ones
    sh.flags |= flags | (nt > TOPK_CAP ? TOPK_FLAG_BIN_OVF : 0);
  }
  TOPK_SYNC();
  if (!ties) topk_list_emit(sh, stage, cnt, need, o, tr);
  topk_write_flags(sh, diag);
}

// The sampled path's finish where a kept list overflowed or was not kept: each block's slice
// [off, off + n) of the row p, read again (out of line: a cold path, kept out of the main path's
// registers).
__device__ static TOPK_NOINLINE void topk_cluster_reread(TopkShared& sh, int* cth, topk_u32* stage,
                                                         const float* p, int off, int n, int K,
                                                         unsigned rank, int t, int above, int nt,
                                                         int first, int flags, int* o,
                                                         const TopkTransform& tr, int* diag) {
  const TopkGlobalSlice slice{p + off, n};
  topk_cluster_narrow(sh, cth, stage, slice, off, K, rank, t, above, nt, first, flags, o, tr, diag);
}

#if defined(TOPK_CLUSTER_REGS) && TOPK_CLUSTER >= TOPK_CLUSTER_TWO_LEVEL
// The register path's slice [0, n) of q into v (R float4 a thread, strided by the block), and
// every value's coarse bin counted in sh.hist (one atomic per value: the warp-merged add, which
// would spare an all-equal slice 31 of 32 atomics, made the clean (8, 128K) 14% slower on the
// H200, 20.2 against 17.7 us: benchmarks/records/topk_decode/r9_58780a3+slices1/).
__device__ static inline void topk_regs_load_count(TopkShared& sh, const float* q, int n,
                                                   topk_f4 (&v)[TOPK_CLUSTER_REGS]) {
#pragma unroll
  for (int u = 0; u < TOPK_CLUSTER_REGS; ++u) {
    const int i = 4 * (TOPK_TID + u * TOPK_THREADS);
    if (i + 4 <= n) {
      v[u] = *(const topk_f4*)(q + i);
    } else {
      v[u].x = i < n ? q[i] : 0.f;
      v[u].y = i + 1 < n ? q[i + 1] : 0.f;
      v[u].z = i + 2 < n ? q[i + 2] : 0.f;
      v[u].w = 0.f;          // i + 3 < n would have taken the float4 load
    }
  }
#pragma unroll
  for (int u = 0; u < TOPK_CLUSTER_REGS; ++u) {
    const int i = 4 * (TOPK_TID + u * TOPK_THREADS);
    const float x[4] = {v[u].x, v[u].y, v[u].z, v[u].w};
#pragma unroll
    for (int j = 0; j < 4; ++j)
      if (i + j < n) topk_hist_inc(sh.hist, topk_bin(topk_canon(topk_bits(x[j]))));
  }
}

// The register path's values of bins > t to the output (slots from sh.out_pos), of bin t to
// block 0's stage (cluster address push, slots from sh.cand_n); off: the slice's first index.
__device__ static inline void topk_regs_emit(TopkShared& sh, const topk_f4 (&v)[TOPK_CLUSTER_REGS], int off,
                                             int n, int t, unsigned push, int* o, const TopkTransform& tr) {
  // Bins >= t are few (about (K + count(t)) / S of the slice): one shared atomic per value that
  // goes out, none for the rest. Measured on the H200 at (8,128K) (benchmarks/records/topk/v12/),
  // against two other ways: a warp-wide slot reservation per value, as for kept lists (the
  // collect phase took 7.5 us, the call 20.8 us), and a warp scan of each thread's counts with
  // one atomic per warp (19.3-19.7 us, this way 18.0-18.8 in the run before it).
  const float thr = topk_bin_prefilter(t);
#pragma unroll
  for (int u = 0; u < TOPK_CLUSTER_REGS; ++u) {
    const int i = 4 * (TOPK_TID + u * TOPK_THREADS);
    const float x[4] = {v[u].x, v[u].y, v[u].z, v[u].w};
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      if (i + j >= n || x[j] <= thr) continue;   // below bin t (one compare)
      const topk_u32 bits = topk_canon(topk_bits(x[j]));
      const int bin = topk_bin(bits);
      if (bin > t) o[topk_atomic_add(&sh.out_pos, 1)] = tr.apply(off + i + j);
      else if (bin == t)
        topk_cluster_st2(push + 8u * (unsigned)topk_atomic_add(&sh.cand_n, 1), (topk_u32)(off + i + j), bits);
    }
  }
}

// The register path (-DTOPK_CLUSTER_REGS=R, a build of its own; two-level searches only): a
// block whose slice has at most 4 R TOPK_THREADS values, 16-byte aligned, holds it in registers
// (R float4 per thread) and the row needs no sample and no kept list:
//  1. each block counts every value's coarse bin (its histogram and group sums); barrier (1);
//  2. the two-level search over the S histograms finds bin t exactly, as in the sampled path;
//  3. each block writes its values of bins > t to the output (its first slot from the tables)
//     and pushes its bin-t values to block 0's stage (offsets from the tables); barrier (2);
//  4. block 0 finishes bin t: rank, or radix refine of the list.
// Where bin t does not fit block 0's stage, steps 3-4 are topk_cluster_narrow's: the row is
// still read once.
__device__ static void topk_cluster_regs_row(TopkShared& sh, int* cth, topk_u32* stage, const float* p,
                                             int off, int n, int K, unsigned rank, int* o,
                                             const TopkTransform& tr, int* diag) {
  constexpr int S = TOPK_CLUSTER;
  topk_f4 v[TOPK_CLUSTER_REGS];
  topk_regs_load_count(sh, p + off, n, v);
  TOPK_STAMP(sh, 1);
  TOPK_SYNC();                                           // this block's histogram complete
  topk_group_sums(sh.hist, cth + TOPK_CTH_OWN(S));
  topk_cluster_sync();                                   // (1) histograms, group sums
  TOPK_STAMP(sh, 2);
  topk_cluster_read_groups<S>(cth);
  TOPK_SYNC();
  int gt, tj, above, nt;
  topk_cluster_find<S>(sh, cth, K, &gt, &tj, &above, &nt);
  const int t = gt * TOPK_CGS + tj;
  topk_add_out_pos(sh, topk_cluster_mine<S>(cth, rank, gt, tj));
  if (nt > TOPK_CAP) {                                   // cluster-uniform
    TOPK_STAMP(sh, 3);
    const TopkRegSlice<TOPK_CLUSTER_REGS> slice{v, n};
    topk_cluster_narrow(sh, cth, stage, slice, off, K, rank, t, above, nt, 0, 0, o, tr, diag);
    TOPK_PROF_SYNC();
    TOPK_STAMP(sh, 9);
    if (rank == 0) TOPK_PROF_DUMP(sh, o);
    return;
  }
  if (TOPK_TID == 0) sh.cand_n = topk_cluster_first<S>(sh, cth, rank, t);
  TOPK_SYNC();
  TOPK_STAMP(sh, 3);
  topk_regs_emit(sh, v, off, n, t, topk_cluster_addr(stage, 0u), o, tr);
  TOPK_PROF_SYNC();
  TOPK_STAMP(sh, 5);         // profile builds: the emission's end (phase p1 = -(barrier (2)'s wait))
  topk_cluster_sync();                                   // (2) every push has landed
  if (rank != 0) return;
  TOPK_STAMP(sh, 4);
  if (TOPK_TID == 0) {
    diag[0] = nt;
    sh.out_pos = above;      // bin t fills the slots after every block's bins > t
  }
  TOPK_SYNC();
  topk_list_emit(sh, stage, nt, K - above, o, tr);
  topk_write_flags(sh, diag);
  TOPK_PROF_SYNC();
  TOPK_STAMP(sh, 9);
  TOPK_PROF_DUMP(sh, o);
}
#endif

// The register path keeps R float4 per thread live across both cluster barriers: its build lets
// ptxas take up to the registers of one block per SM (76 at 512 threads, R = 8); the other
// builds keep the default bound. Two blocks per SM (64 registers at 512, no spills) put
// (16,128K) on the register path, but it was no faster there than the sampled path (22.4-22.7
// against 22.0-22.2 us on the H200, benchmarks/records/topk/v13/).
#if defined(TOPK_CLUSTER_REGS) && TOPK_CLUSTER >= TOPK_CLUSTER_TWO_LEVEL
#define TOPK_CLUSTER_BOUNDS __launch_bounds__(TOPK_THREADS, 1)
#else
#define TOPK_CLUSTER_BOUNDS __launch_bounds__(TOPK_THREADS)
#endif
extern "C" __global__ void __cluster_dims__(TOPK_CLUSTER, 1, 1) TOPK_CLUSTER_BOUNDS
topk_cluster_kernel(const float* __restrict__ scores, int row_stride, int ncols,
                    const int* __restrict__ lengths, int has_lengths,
                    const int* __restrict__ row_starts, int has_starts, int K,
                    int* __restrict__ out, int mode, const int* __restrict__ table,
                    int table_stride, int page_bits, int* __restrict__ bin_counts,
                    int long_rows, int prefix_len, topk_u32* __restrict__ scratch) {
  constexpr int S = TOPK_CLUSTER;
  __shared__ __attribute__((aligned(16))) TopkShared sh;   // hist read as int4 across the cluster
#if TOPK_CLUSTER >= TOPK_CLUSTER_TWO_LEVEL
  __shared__ int topk_cth[TOPK_CTH_N(S)];   // the threshold search's scratch (TOPK_CTH_*)
#else
  __shared__ __attribute__((aligned(16))) int topk_csum[TOPK_BINS];   // the row's histogram
#endif
  __shared__ int topk_ckept[S];          // kept count of every block of the cluster
  __shared__ topk_u32 topk_cspan[2];     // a count pass's smallest and largest fine key
  __shared__ int topk_ccount;            // 1: this row's blocks only counted (count_only)
  extern __shared__ __attribute__((aligned(16))) unsigned char topk_dyn[];
  topk_u32* stage = (topk_u32*)topk_dyn;   // kept (index, bits) pairs; later the candidates

  const int tid = TOPK_TID;
  const unsigned rank = topk_cluster_rank();
  const int row = TOPK_BID / S;
  int start;
  const int len = topk_row_len(row, ncols, lengths, has_lengths, row_starts, has_starts, &start);
  const float* p = scores + (long long)row * (long long)row_stride + start;
  int* o = out + (long long)row * (long long)K;
  const TopkTransform tr = topk_transform_of(mode, table, table_stride, page_bits, row);
  int* diag = bin_counts + 2ll * row;

  // Decisions below are uniform over the cluster (same row, same data): no block skips a
  // cluster barrier that another one waits at. The register path takes every row longer than
  // K whose slices fit it, long or short; the sampled path only long rows.
  const bool long_row = topk_use_long(len, K, prefix_len, long_rows);
#if defined(TOPK_CLUSTER_REGS) && TOPK_CLUSTER >= TOPK_CLUSTER_TWO_LEVEL
  int roff, rn;
  const int slice = topk_cluster_slice<S>(len, rank, &roff, &rn);
  const bool regs = len > K && slice <= 4 * TOPK_CLUSTER_REGS * TOPK_THREADS &&
                    (((unsigned long long)p) & 15ull) == 0ull;
#else
  const bool regs = false;
#endif
  if (!long_row && !regs) {
    if (rank != 0) return;
    if (len <= K) {
      topk_short_row(o, len, K, tr, diag);
      return;
    }
    topk_block_init(sh);
    topk_row_plain(sh, stage, p, len, K, o, tr, diag);
    topk_write_flags(sh, diag);
    return;
  }

  topk_block_init(sh);
  TOPK_STAMP(sh, 0);
#if defined(TOPK_CLUSTER_REGS) && TOPK_CLUSTER >= TOPK_CLUSTER_TWO_LEVEL
  if (regs) {
    topk_cluster_regs_row(sh, topk_cth, stage, p, roff, rn, K, rank, o, tr, diag);
    return;
  }
#endif
  if (tid == 0) {
    topk_cspan[0] = 0xFFFFFFFFu;
    topk_cspan[1] = 0u;
    topk_ccount = 0;
  }
  int cut, sampled;          // cut: the bin f0 cut (its kept count is partial), -1 if none
  const topk_u32 f0 = topk_sample_floor(sh, p, len, K, &cut, &sampled);
  TOPK_STAMP(sh, 1);
  int off, n;
  topk_cluster_slice<S>(len, rank, &off, &n);
  // the row's scratch list (long_rows = its entries) in S spill regions, one per block
  const int region = long_rows / S;
  topk_u32* spill0 = scratch + (long long)row * 2ll * (long long)long_rows;
  // Where the sample says f0 keeps over twice what the stages and spill regions hold (all-equal
  // or tie-heavy rows), the lists would overflow: the blocks only count (cluster-uniform).
  // (A shared flag, read back after barrier (1): nothing more stays live across the keep pass.)
  if ((long long)sampled * len > 2ll * (4 * TOPK_SAMPLE4) * S * (TOPK_CAP + region)) {
    if (tid == 0) topk_ccount = 1;
    if (n > 0) topk_count_pass(&sh.scratch_n, topk_cspan, TopkGlobalSlice{p + off, n}, f0, sh.hist);
  } else if (n > 0) {
    topk_keep_pass<true, true, false>(&sh.scratch_n, nullptr, p + off, n, f0,
                                      (topk_u2*)(spill0 + 2ll * rank * region), region,
                                      (topk_u2*)stage, TOPK_CAP, off, sh.hist);
  }
#if TOPK_CLUSTER >= TOPK_CLUSTER_TWO_LEVEL
  TOPK_SYNC();                                           // this block's histogram complete
  topk_group_sums(sh.hist, topk_cth + TOPK_CTH_OWN(S));
#endif
  if (sh.scratch_n > TOPK_CAP) __threadfence();         // spilled: global stores before (1)
  topk_cluster_sync();                                   // (1) counts, histograms, group sums
  TOPK_STAMP(sh, 2);

  if (tid < S) topk_ckept[tid] = *topk_map_rank(&sh.scratch_n, (unsigned)tid);
#if TOPK_CLUSTER >= TOPK_CLUSTER_TWO_LEVEL
  topk_cluster_read_groups<S>(topk_cth);                 // [S][CG] group sums
#else
  {                          // S remote 16-byte loads in flight per thread and round
    constexpr int V = TOPK_BINS / 4;
    for (int i4 = tid; i4 < V; i4 += TOPK_THREADS) {
      int4 acc = make_int4(0, 0, 0, 0);
#pragma unroll
      for (int r = 0; r < S; ++r) {
        const int4 v = ((const int4*)topk_map_rank(sh.hist, (unsigned)r))[i4];
        acc.x += v.x;
        acc.y += v.y;
        acc.z += v.z;
        acc.w += v.w;
      }
      ((int4*)topk_csum)[i4] = acc;
    }
  }
#endif
  TOPK_SYNC();
  const bool count_only = topk_ccount != 0;
  int kept = 0;
  bool fits = !count_only, spilled = false;
#pragma unroll
  for (int r = 0; r < S; ++r) {
    kept += topk_ckept[r];
    fits = fits && topk_ckept[r] <= TOPK_CAP + region;
    spilled = spilled || (!count_only && topk_ckept[r] > TOPK_CAP);
  }
  // every value of bin t and above is counted, kept or dropped (a list that overflowed still
  // counts what it drops), unless fewer than K were kept
  const bool counted = kept >= K;
#if TOPK_CLUSTER >= TOPK_CLUSTER_TWO_LEVEL
  int* const cth = topk_cth;
  int gt = 0, tj = 0, above = 0, nt = 0;   // bin t = gt * TOPK_CGS + tj
  if (counted) topk_cluster_find<S>(sh, cth, K, &gt, &tj, &above, &nt);
  const int t = gt * TOPK_CGS + tj;
#else
  int* const cth = topk_csum;   // the threshold search's scratch once t is found (TOPK_CTH_N)
  static_assert(TOPK_CTH_N(S) <= TOPK_BINS, "topk_csum must hold the digit search's tables");
  if (counted) topk_find_threshold_in(sh, topk_csum, TOPK_BINS, K);
  const int t = sh.sel_bin;
#endif
  // exact fallback, block 0 redoes the whole row: fewer than K kept, or a threshold bin that f0
  // cut (a sampling accident: its count is partial), or, where the lists overflowed or were not
  // kept, a bin whose count the keep test's float threshold left partial, so that the slices'
  // re-read below would find more than the slots counted: -0.0's (f0 = fine(+0.0) keeps -0.0
  // but not the bin's tiny negatives), and +inf's where f0 lies in the NaN bins (the threshold
  // is +inf: the bin's finite values, >= 65520, are not counted). Cluster-uniform.
  if (!counted || t == cut ||
      (!fits && (t == topk_bin(0x80000000u) ||
                 (f0 > topk_fine_key(0x7F800000u) && t == topk_bin(0x7F800000u))))) {
    topk_cluster_sync();                                 // (2) nobody reads a histogram now
    if (rank != 0) return;
    topk_block_init(sh);
    if (tid == 0) sh.flags = TOPK_FLAG_REPLAY | (spilled ? TOPK_FLAG_SPILL : 0);
    topk_row_plain(sh, stage, p, len, K, o, tr, diag);
    topk_write_flags(sh, diag);
    return;
  }
#if TOPK_CLUSTER >= TOPK_CLUSTER_TWO_LEVEL
  // this block's first output slot: the bins > t of the blocks of lower rank
  const int mine = topk_cluster_mine<S>(cth, rank, gt, tj);
#else
  const int above = sh.sel_above;
  const int nt = topk_csum[t];   // every bin-t value of the row is counted (t is above the cut)
  // this block's first output slot: the bins > t of the blocks of lower rank
  int mine = 0;
  for (int i = t + 1 + tid; i < TOPK_BINS; i += TOPK_THREADS)
    for (int r = 0; r < (int)rank; ++r) mine += topk_map_rank(sh.hist, (unsigned)r)[i];
#endif
  topk_add_out_pos(sh, mine);
  if (!fits) {
    TOPK_STAMP(sh, 3);
    if (count_only) {        // every block's counted keys, over DSMEM (cluster-uniform)
      const int r = (int)topk_lane();
      const topk_u32* sp = topk_map_rank(topk_cspan, (unsigned)(r < S ? r : 0));
      const topk_u32 lo = __reduce_min_sync(TOPK_FULL, sp[0]), hi = __reduce_max_sync(TOPK_FULL, sp[1]);
      if (lo == hi) {
        topk_cluster_one_key(sh, p, off, n, lo, topk_ckept, K, rank, nt, o, tr, diag);
        TOPK_PROF_SYNC();
        TOPK_STAMP(sh, 9);
        if (rank == 0) TOPK_PROF_DUMP(sh, o);
        return;
      }
    }
    const int first = tid == 0 ? topk_cluster_first<S>(sh, cth, rank, t) : 0;
    // A list overflowed (all-equal or heavily tied rows, or a sample whose floor kept far too
    // many): the kept lists are incomplete but the counts are not, so every block reads its own
    // slice again and the cluster finishes bin t over the slices (block 0 no longer redoes the
    // whole row alone: that was three passes over the row from one SM).
    topk_cluster_reread(sh, cth, stage, p, off, n, K, rank, t, above, nt, first,
                        (spilled ? TOPK_FLAG_SPILL : 0) | TOPK_FLAG_ROW_PASSES, o, tr, diag);
    TOPK_PROF_SYNC();
    TOPK_STAMP(sh, 9);
    if (rank == 0) TOPK_PROF_DUMP(sh, o);
    return;
  }
  // Bin t in one list: push, when block 0's stage has room after its own kept entries for all
  // of bin t (every block writes its bin-t entries there directly: DSMEM stores, at offsets
  // from the histograms); else pull (block 0 compacts its own and reads the others'). A bin t
  // larger than a list is not collected: block 0 refines it over every list (step 4).
  const int base0 = topk_ckept[0] < TOPK_CAP ? topk_ckept[0] : TOPK_CAP;
  const bool bin_fits = nt <= TOPK_CAP;
  const bool push = TOPK_CLUSTER_PUSH && base0 + nt <= TOPK_CAP;
  if (push && tid == 0) sh.cand_n = topk_cluster_first<S>(sh, cth, rank, t);
  TOPK_SYNC();
  TOPK_STAMP(sh, 3);

  TopkCollectOp cop;
  cop.sh = &sh;
  cop.cand = stage;
  cop.push = push;
  if (push) cop.push_addr = topk_cluster_addr(stage + 2 * base0, 0u);
  cop.t = t;
  cop.out = o;
  cop.tr = &tr;
  cop.collect = push || (bin_fits && rank == 0);
  TopkBlockList own;        // this block's own stage, read directly (not through the cluster map)
  own.stage = stage;
  own.spill = spill0 + 2ll * rank * region;
  own.n = topk_ckept[rank];
  own.sync_loads = !push && bin_fits && rank == 0;   // pull: bin t compacts in place at the front
  own.visit(cop);
  if (!push && bin_fits && rank == 0) {  // pull: then the other blocks' bin-t values, appended
    cop.emit = false;
    const TopkClusterSrc all = topk_cluster_src(stage, spill0, region, topk_ckept);
    for (int r = 1; r < S; ++r) all.list(r).visit(cop);
  }
  if (!bin_fits) {
    // Step 4 for a bin t larger than a list: block 0 refines it over every block's list while
    // the others wait at the second barrier below (their stages stay readable). The first one:
    // every block has read block 0's histogram (for its output slots; from TOPK_CLUSTER_TWO_LEVEL
    // blocks up, the threshold group's bins) before the refine reuses it.
    topk_cluster_sync();                                 // (2a)
    if (rank == 0) {
      if (tid == 0) {
        diag[0] = nt;
        sh.out_pos = above;      // bin t fills the slots after every block's bins > t
        sh.flags |= TOPK_FLAG_BIN_OVF | (spilled ? TOPK_FLAG_SPILL : 0);
      }
      TOPK_SYNC();
      const TopkClusterSrc all = topk_cluster_src(stage, spill0, region, topk_ckept);
      topk_cluster_refine(sh, all, t, K - above, o, tr);
      topk_write_flags(sh, diag);
    }
    topk_cluster_sync();                                 // (2) block 0 is done reading DSMEM
    TOPK_PROF_SYNC();
    TOPK_STAMP(sh, 9);
    if (rank == 0) TOPK_PROF_DUMP(sh, o);
    return;
  }
  topk_cluster_sync();                                   // (2) block 0 is done reading DSMEM
  if (rank != 0) return;
  TOPK_STAMP(sh, 4);
  if (tid == 0) {
    diag[0] = nt;
    sh.out_pos = above;      // bin t fills the slots after every block's bins > t
    sh.flags |= spilled ? TOPK_FLAG_SPILL : 0;
  }
  TOPK_SYNC();
  const int need = K - above;
  topk_u32* cl = push ? stage + 2 * base0 : stage;
  topk_list_emit(sh, cl, nt, need, o, tr);
  topk_write_flags(sh, diag);
  TOPK_PROF_SYNC();
  TOPK_STAMP(sh, 9);
  TOPK_PROF_DUMP(sh, o);
}
#endif  // TOPK_CLUSTER
