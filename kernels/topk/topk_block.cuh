// ---------------------------------------------------------------------------------------------
// Shared state of one block.
struct TopkShared {
  int hist[TOPK_BINS > 256 ? TOPK_BINS : 256];
  int scan[TOPK_THREADS];
  int sel_bin;      // threshold bin / digit
  int sel_above;    // count strictly above it
  int out_pos;      // next output slot
  int cand_n;       // candidates appended (may exceed TOPK_CAP: overflow)
  int eq_taken;     // equal-to-threshold elements taken
  int scratch_n;    // scratch list entries appended (may exceed its capacity)
  int flags;        // TOPK_FLAG_* of the row (written by thread 0 only)
#ifdef TOPK_PROF
  long long prof[TOPK_PROF_N];
  unsigned long long gt0;   // global timer (ns) at the block's start, and its SM
  unsigned smid;
#endif
};

// Profiling builds (-DTOPK_PROF=1, benchmarks/profile_topk.py only): thread 0 reads the SM's
// cycle counter at phase ends (after a barrier: every thread has finished the phase) and the
// row's first TOPK_PROF_N outputs are overwritten with cycles since the start (-1: not reached).
// Stamps: 0 start, 1 sample, 2 keep pass, 3 threshold bin, 4 collect, 5-8 radix passes, 9 end.
// Outputs 10-14 (K >= 15): the global timer (ns, low and high words) at the block's start and
// end, and the block's SM (the launch's timeline across blocks).
#ifdef TOPK_PROF
#if defined(TOPK_HIP)
#error "TOPK_PROF (benchmarks/profile_topk.py) reads CUDA's cycle counter and global timer"
#endif
__device__ static inline unsigned long long topk_globaltimer() {
  unsigned long long t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}
#define TOPK_STAMP(sh, i) do { if (TOPK_TID == 0) (sh).prof[i] = (long long)clock64(); } while (0)
#define TOPK_PROF_SYNC() TOPK_SYNC()
#else
#define TOPK_PROF_SYNC() do { } while (0)
#define TOPK_STAMP(sh, i) do { } while (0)
#endif

// Shared-memory updates. Plain per-lane atomics where lanes may diverge (row visits with
// scalar head/tail loops). In loops whose trip count is uniform across the block (lists, the
// long-row main loop) the CUDA build aggregates per 32-lane warp with full-mask votes: one
// atomic for all lanes sharing the first valid lane's bin (hot bins: skewed rows, radix passes
// whose digit is still constant), one atomic per warp for slot reservations. HIP (wave64) and
// the host use per-lane atomics everywhere. __match_any_sync is avoided: it is slow.
#if defined(__CUDA_ARCH__) && !defined(TOPK_HIP)
#define TOPK_WARP_AGG 1
#define TOPK_FULL 0xFFFFFFFFu
__device__ static inline unsigned topk_lane() { return (unsigned)threadIdx.x & 31u; }
#endif

// Number of significant bits of x (0 for 0).
__device__ static inline int topk_bitlen(topk_u32 x) {
#if defined(__CUDA_ARCH__) && !defined(TOPK_HIP)
  return 32 - __clz((int)x);
#else
  return x ? 32 - __builtin_clz(x) : 0;
#endif
}

// Index of the lowest set bit of a nonzero mask.
__device__ static inline int topk_ctz(unsigned m) {
#if defined(__CUDA_ARCH__) && !defined(TOPK_HIP)
  return __ffs((int)m) - 1;
#else
  return __builtin_ctz(m);
#endif
}

__device__ static inline void topk_hist_inc(int* hist, int bin) { topk_atomic_add(&hist[bin], 1); }

// Uniform contexts only (every lane of the warp calls it): hist[bin] += valid.
__device__ static inline void topk_hist_add_u(int* hist, int bin, bool valid) {
#ifdef TOPK_WARP_AGG
  unsigned m = __ballot_sync(TOPK_FULL, valid);
  if (m == 0u) return;
  int leader = topk_ctz(m);
  int b0 = __shfl_sync(TOPK_FULL, bin, leader);
  bool same = valid && bin == b0;
  unsigned ms = __ballot_sync(TOPK_FULL, same);
  if (same) {
    if (topk_lane() == (unsigned)leader) atomicAdd(&hist[b0], __popc(ms));
  } else if (valid) {
    atomicAdd(&hist[bin], 1);
  }
#else
  if (valid) topk_atomic_add(&hist[bin], 1);
#endif
}

// Uniform contexts only: one slot of *ctr per lane with pred set (-1 for the others).
__device__ static inline int topk_reserve_u(int* ctr, bool pred) {
#ifdef TOPK_WARP_AGG
  unsigned m = __ballot_sync(TOPK_FULL, pred);
  if (m == 0u) return -1;
  int leader = topk_ctz(m);
  int base = 0;
  if (topk_lane() == (unsigned)leader) base = atomicAdd(ctr, __popc(m));
  base = __shfl_sync(TOPK_FULL, base, leader);
  return pred ? base + __popc(m & ((1u << topk_lane()) - 1u)) : -1;
#else
  return pred ? topk_atomic_add(ctr, 1) : -1;
#endif
}

// Per-lane versions with the same interface (divergent contexts).
template <bool U>
__device__ static inline void topk_hist_add(int* hist, int bin, bool valid) {
  if (U) topk_hist_add_u(hist, bin, valid);
  else if (valid) topk_atomic_add(&hist[bin], 1);
}
template <bool U>
__device__ static inline int topk_reserve(int* ctr, bool pred) {
  if (U) return topk_reserve_u(ctr, pred);
  return pred ? topk_atomic_add(ctr, 1) : -1;
}

