// occtune radix top-k ("topk_transform"): one source for CUDA (nvcc, NVRTC) and HIP (hipcc,
// hiprtc, bare clang). No host headers: usable under runtime compilation.
//
// One block per row. For each row b of float32 scores (length len_b <= ncols, optional start):
//   len_b <= K : out[b, i] = T(i) for i < len_b, then -1.
//   otherwise  : out[b, :K] = T(indices of the K largest scores), unsorted, exact (ties: any
//                choice among exactly equal values).
// T is the transform: identity, page table (page size 2^page_bits) or ragged offset.
//
// Order and NaN policy: every NaN (either sign, any payload) is treated as +NaN and ranks above
// +inf (torch.topk does the same); -inf ranks lowest; -0.0 ranks just below +0.0 (they are
// equal as floats, so either may be chosen in a tie: the checker compares values).
//
// Algorithm:
//  1. coarse key: fp32 -> fp16 (round to nearest even, fp32 denormals -> +-0, beyond the range ->
//     +-inf), u = raw 16 bits, key16 = (u & 0x8000) ? ~u : (u | 0x8000) (16 bits),
//     bin = key16 >> (16 - TOPK_COARSE_BITS). Shared-memory histogram of the row; the threshold
//     bin t has count_above(t) < K <= count_above(t) + count(t).
//  2. collect: elements of bins > t go straight to the output; elements of bin t are appended as
//     (index, fine key) pairs (8 bytes) to the candidate list in dynamic shared memory:
//     TOPK_CAP = SGL_TOPK_DYNAMIC_SMEM_BYTES / 8 entries.
//  3. refine: four 8-bit radix passes over the fine key (fp32 bits b, NaN -> 0x7FC00000,
//     key = (b & 0x80000000) ? ~b : (b | 0x80000000)) of the candidates matching the prefix
//     found so far; the last pass fixes the exact K-th key; keys above it are emitted, and keys
//     equal to it until K is filled.
//  Overflow (count(t) > TOPK_CAP) is never silent: bin_counts[2b] records count(t) for every row
//  (the host compares it with the capacity to count overflowed rows) and bin_counts[2b + 1] the
//  row's TOPK_FLAG_* bits. The row is finished exactly without a list for bin t: histogram
//  passes over the source (the row, or the long-row list) narrow bin t's fine-key interval
//  (TOPK_NB bins a pass, in the unused candidate buffer) until its values fit the list or it is
//  one key; each pass also emits the values between the new interval and the last one.
//  Long rows (prefix_len >= K, len > 2 * prefix_len, len >= 16 K; the host enables it from
//  128K columns): a strided sample of 4096 values guesses a coarse bin t0 (about 1.5 times
//  the expected sample count above the K-th largest, TOPK_SAMPLE_MARGIN), turned into the
//  exact smallest fine key f0 of bin t0. One pass over the row copies the (index, bits) pairs
//  with fine key >= f0 (= bin >= t0) into a per-row global scratch list; steps 1-3 then run on
//  that list. If the list overflowed, its coarse histogram is still complete (every kept value is
//  counted): one collect pass over the row finishes it. If fewer than K were kept (the guess was
//  too high), the row is done the plain way above. Exact in every case (TOPK_FLAG_REPLAY).

#ifndef SGL_TOPK_DYNAMIC_SMEM_BYTES
#define SGL_TOPK_DYNAMIC_SMEM_BYTES 131072
#endif
#ifndef TOPK_THREADS
#define TOPK_THREADS 512
#endif
#ifndef TOPK_COARSE_BITS
#define TOPK_COARSE_BITS 8
#endif
#if TOPK_COARSE_BITS != 8 && TOPK_COARSE_BITS != 12
#error "TOPK_COARSE_BITS must be 8 or 12"
#endif
#if (TOPK_THREADS % 64) != 0 || TOPK_THREADS < 64 || TOPK_THREADS > 1024
#error "TOPK_THREADS must be a multiple of 64 (a wavefront) between 64 and 1024"
#endif
#if SGL_TOPK_DYNAMIC_SMEM_BYTES < 64
#error "SGL_TOPK_DYNAMIC_SMEM_BYTES must hold at least 8 candidates"
#endif

#define TOPK_BINS (1 << TOPK_COARSE_BITS)
// Two-level searches over the coarse bins (cluster and resident kernels): groups of TOPK_CGS
// consecutive bins, then the bins of the one group that holds the K-th value.
#define TOPK_CGS (TOPK_BINS >= 4096 ? 64 : 16)   // bins per group
#define TOPK_CG (TOPK_BINS / TOPK_CGS)           // groups
// Per-row report (bin_counts[2 * row + 1]; bin_counts[2 * row] is count(t)): how the row was
// finished. Every overflow sets a flag (none is silent); the host counts rows per flag.
#define TOPK_FLAG_BIN_OVF 1      // bin t did not fit the candidate list (refined elsewhere, exact)
#define TOPK_FLAG_SPILL 2        // a cluster block's kept values spilled past its shared stage
#define TOPK_FLAG_REPLAY 4       // the long-row pass was given up: fewer than K kept or its list
                                 // overflowed (the row was redone from its coarse histogram)
#define TOPK_FLAG_ROW_PASSES 8   // bin t was narrowed by extra passes over the row itself
#define TOPK_PROF_N 10
#define TOPK_CAP (SGL_TOPK_DYNAMIC_SMEM_BYTES / 8)

// ---------------------------------------------------------------------------------------------
// Portability shims. Correctness depends on no warp/wavefront width: cross-thread results go
// through shared memory and block barriers. On CUDA devices only, shared-memory increments and
// slot reservations are aggregated per 32-lane warp (match/ballot, see topk_hist_inc and
// topk_reserve); elsewhere (HIP wave64, host) each lane does its own atomic.
#if defined(__HIP_PLATFORM_AMD__) || defined(__HIPCC__) || defined(__HIP__)
#define TOPK_HIP 1
#if !defined(__HIPCC_RTC__) && !defined(__HIP_INCLUDE_COMPILER_BUILTINS__) && \
    !defined(HIP_INCLUDE_HIP_HIP_RUNTIME_H) && !defined(__HIP_DEVICE_COMPILE_NO_HEADERS_DONE)
#if defined(__has_include)
#if __has_include(<hip/hip_runtime.h>)
#include <hip/hip_runtime.h>
#define TOPK_HAVE_HIP_HEADERS 1
#endif
#endif
#endif
#if defined(__HIPCC_RTC__)
#define TOPK_HAVE_HIP_HEADERS 1
#endif
#ifndef TOPK_HAVE_HIP_HEADERS
// Bare clang -x hip -nogpuinc: declare the few things we need from compiler builtins.
#define __global__ __attribute__((global))
#define __device__ __attribute__((device))
#define __shared__ __attribute__((shared))
#define TOPK_TID ((int)__builtin_amdgcn_workitem_id_x())
#define TOPK_BID ((int)__builtin_amdgcn_workgroup_id_x())
__attribute__((device)) static inline void topk_sync() {
  __builtin_amdgcn_fence(__ATOMIC_RELEASE, "workgroup");
  __builtin_amdgcn_s_barrier();
  __builtin_amdgcn_fence(__ATOMIC_ACQUIRE, "workgroup");
}
__attribute__((device)) static inline int topk_atomic_add(int* p, int v) {
  return __hip_atomic_fetch_add(p, v, __ATOMIC_RELAXED, __HIP_MEMORY_SCOPE_WORKGROUP);
}
#define TOPK_SYNC() topk_sync()
__attribute__((device)) static inline void topk_atomic_min_u(unsigned* p, unsigned v) {
  __hip_atomic_fetch_min(p, v, __ATOMIC_RELAXED, __HIP_MEMORY_SCOPE_WORKGROUP);
}
__attribute__((device)) static inline void topk_atomic_max_u(unsigned* p, unsigned v) {
  __hip_atomic_fetch_max(p, v, __ATOMIC_RELAXED, __HIP_MEMORY_SCOPE_WORKGROUP);
}
#define TOPK_HAVE_MINMAX 1
__attribute__((device)) static inline int topk_atomic_add_dev(int* p, int v) {
  return __hip_atomic_fetch_add(p, v, __ATOMIC_RELAXED, __HIP_MEMORY_SCOPE_AGENT);
}
#define TOPK_HAVE_DEV_ATOMIC 1
__attribute__((device)) static inline void topk_fence_dev() { __builtin_amdgcn_fence(__ATOMIC_SEQ_CST, "agent"); }
#define TOPK_HAVE_DEV_FENCE 1
#define __launch_bounds__(n) __attribute__((amdgpu_flat_work_group_size(1, n)))
#endif
#endif  // HIP

#ifndef TOPK_TID
#define TOPK_TID ((int)threadIdx.x)
#define TOPK_BID ((int)blockIdx.x)
#define TOPK_SYNC() __syncthreads()
__device__ static inline int topk_atomic_add(int* p, int v) { return atomicAdd(p, v); }
#endif
#ifndef TOPK_HAVE_MINMAX
__device__ static inline void topk_atomic_min_u(unsigned* p, unsigned v) { atomicMin(p, v); }
__device__ static inline void topk_atomic_max_u(unsigned* p, unsigned v) { atomicMax(p, v); }
#endif
#ifndef TOPK_HAVE_DEV_ATOMIC
// Device-scope (cross-block) atomic on global memory: atomicAdd is device scope on CUDA and HIP.
__device__ static inline int topk_atomic_add_dev(int* p, int v) { return atomicAdd(p, v); }
#endif
#ifndef TOPK_HAVE_DEV_FENCE
__device__ static inline void topk_fence_dev() { __threadfence(); }
#endif
// A load of a value another block of the same launch wrote (after its fence and an atomic that
// this block has seen): volatile, so neither a register copy nor a non-coherent cache serves it.
__device__ static inline int topk_ld_dev(const int* p) { return *(const volatile int*)p; }

// Cold paths (overflows, the plain path) stay out of line on CUDA: inlined, they made ptxas
// spill in the hot ones. AMDGPU inlines them: its calls reserve registers for the callee in the
// whole kernel (43 -> 129 VGPRs on gfx942 out of line).
#if defined(TOPK_HIP)
#define TOPK_NOINLINE __attribute__((always_inline))
#else
#define TOPK_NOINLINE __attribute__((noinline))
#endif

// Reconverge the warp. On the H200, v9's keep-pass loop ran about two divergent groups per warp
// after the per-lane store loop. The loop body then executed 1.87x as often as v8's for the same
// work (ncu, results/sm_90/topk_v9/README.md). AMDGPU waves have no independent thread
// scheduling, so there it is nothing.
#if defined(TOPK_HIP)
#define TOPK_WARP_RECONVERGE() ((void)0)
#else
#define TOPK_WARP_RECONVERGE() __syncwarp()
#endif

// Key functions are also host-callable under nvcc (tests run them on the CPU against numpy).
#if defined(__CUDACC__) && !defined(TOPK_HIP)
#define TOPK_HD __host__ __device__
#else
#define TOPK_HD __device__
#endif

typedef unsigned int topk_u32;
struct __attribute__((aligned(16))) topk_f4 {
  float x, y, z, w;
};
struct __attribute__((aligned(8))) topk_u2 {   // one list entry: (index, canonical bits)
  topk_u32 x, y;
};

// ---------------------------------------------------------------------------------------------
// Keys.
TOPK_HD static inline float topk_float(topk_u32 b) {
#if defined(TOPK_HIP) || !defined(__CUDA_ARCH__)
  return __builtin_bit_cast(float, b);
#else
  return __uint_as_float(b);
#endif
}

TOPK_HD static inline topk_u32 topk_bits(float x) {
#if defined(TOPK_HIP) || !defined(__CUDA_ARCH__)
  return __builtin_bit_cast(topk_u32, x);
#else
  return __float_as_uint(x);
#endif
}

// Canonical fp32 bits: every NaN -> 0x7FC00000.
TOPK_HD static inline topk_u32 topk_canon(topk_u32 b) {
  return ((b & 0x7FFFFFFFu) > 0x7F800000u) ? 0x7FC00000u : b;
}

// Order-preserving fine key of canonical fp32 bits.
TOPK_HD static inline topk_u32 topk_fine_key(topk_u32 b) {
  return (b & 0x80000000u) ? ~b : (b | 0x80000000u);
}

// Round-to-nearest-even of x >> s (1 <= s <= 31).
TOPK_HD static inline topk_u32 topk_rne_shift(topk_u32 x, int s) {
  topk_u32 r = x >> s;
  topk_u32 rem = x & ((1u << s) - 1u);
  topk_u32 half = 1u << (s - 1);
  if (rem > half || (rem == half && (r & 1u))) r += 1u;
  return r;
}

// fp32 bits (canonical) -> fp16 bits, round to nearest even, as __float2half_rn does.
TOPK_HD static inline topk_u32 topk_half_bits(topk_u32 b) {
  topk_u32 sign = (b >> 16) & 0x8000u;
  topk_u32 a = b & 0x7FFFFFFFu;
  topk_u32 h;
  if (a > 0x7F800000u) {
    h = 0x7E00u;                     // NaN (canonical, positive)
  } else if (a >= 0x477FF000u) {
    h = 0x7C00u;                     // rounds to +-inf (65520 ties to even = inf)
  } else if (a >= 0x38800000u) {
    h = topk_rne_shift(a - 0x38000000u, 13);   // normal half (carry may reach inf: correct)
  } else if (a > 0x33000000u) {
    topk_u32 e = a >> 23;            // 102..112: half subnormal
    topk_u32 m = (a & 0x7FFFFFu) | 0x800000u;
    h = topk_rne_shift(m, (int)(126u - e));
  } else {
    h = 0u;                          // |x| <= 2^-25 (fp32 denormals included) -> +-0
  }
  return h | sign;
}

TOPK_HD static inline topk_u32 topk_key16(topk_u32 canon_bits) {
#if defined(__CUDA_ARCH__) && !defined(TOPK_HIP)
  // Device: the hardware conversion (round to nearest even, like topk_half_bits); the canonical
  // NaN is mapped to 0x7E00 as the software model does (cvt returns 0x7FFF for NaN).
  unsigned short hs;
  asm("cvt.rn.f16.f32 %0, %1;" : "=h"(hs) : "f"(__uint_as_float(canon_bits)));
  topk_u32 u = (canon_bits == 0x7FC00000u) ? 0x7E00u : (topk_u32)hs;
#else
  topk_u32 u = topk_half_bits(canon_bits);
#endif
  return (u & 0x8000u) ? (u ^ 0xFFFFu) : (u | 0x8000u);
}

TOPK_HD static inline int topk_bin(topk_u32 canon_bits) {
  return (int)(topk_key16(canon_bits) >> (16 - TOPK_COARSE_BITS));
}

// fp16 bits -> float (exact).
TOPK_HD static inline float topk_half_float(topk_u32 h) {
  const topk_u32 sign = (h & 0x8000u) << 16, e = (h >> 10) & 0x1Fu, m = h & 0x3FFu;
  if (e == 31u) return topk_float(sign | 0x7F800000u | (m << 13));   // inf, NaN
  if (e != 0u) return topk_float(sign | ((e + 112u) << 23) | (m << 13));
  const float f = (float)m * 5.9604644775390625e-08f;                // subnormal: m 2^-24
  return sign ? -f : f;
}

// A float thr with !(x <= thr) for every x of coarse bin >= t (NaN passes: no compare holds),
// so one compare skips most values before their bin is computed. thr is the fp16 value just
// below bin t's first one: a float that rounds (to nearest) into bin t or above lies above it.
// Both zeros compare equal, so a zero becomes -FLT_MIN (a normal number, so the compare holds
// under flush-to-zero too; the values between it and -0 lie below bin t and pass as extras);
// t = 0 or an fp16 NaN pattern gives NaN (every value passes). Values that pass still take the
// exact bin test.
TOPK_HD static inline float topk_bin_prefilter(int t) {
  const int k = (t << (16 - TOPK_COARSE_BITS)) - 1;   // the key16 just below bin t
  if (k < 0) return topk_float(0x7FC00000u);
  const topk_u32 h = (k & 0x8000) ? ((topk_u32)k & 0x7FFFu) : (~(topk_u32)k & 0xFFFFu);
  const float f = topk_half_float(h);
  return f == 0.0f ? topk_float(0x80800000u) : f;
}

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

// Output transform of a row-relative index.
struct TopkTransform {
  int mode;             // 0 identity, 1 page table, 2 ragged offsets
  const int* table;     // mode 1: row of the page table; mode 2: offsets (per row)
  int page_bits;
  int row;
  __device__ inline int apply(int idx) const {
    if (mode == 1) {
      int mask = (1 << page_bits) - 1;
      return (table[idx >> page_bits] << page_bits) | (idx & mask);
    }
    if (mode == 2) return idx + table[row];
    return idx;
  }
};

__device__ static inline TopkTransform topk_transform_of(int mode, const int* table, int table_stride,
                                                         int page_bits, int row) {
  TopkTransform tr;
  tr.mode = mode;
  tr.page_bits = page_bits;
  tr.row = row;
  tr.table = (mode == 1) ? table + (long long)row * (long long)table_stride : table;
  return tr;
}

// Visit every element of a row with 16-byte loads where the address allows, four loads in
// flight per thread; f.template call<false>(index, canonical bits, true) (lanes may diverge).
template <typename F>
__device__ static inline void topk_for_row(const float* p, int n, F& f) {
  const int tid = TOPK_TID;
  int head = (int)(((16u - ((unsigned)(unsigned long long)p & 15u)) & 15u) >> 2);
  if ((((unsigned long long)p) & 3ull) != 0ull) head = n;   // unaligned floats: scalar only
  if (head > n) head = n;
  for (int i = tid; i < head; i += TOPK_THREADS) f.template call<false>(i, topk_canon(topk_bits(p[i])), true);
  const topk_f4* v = (const topk_f4*)(p + head);
  int nv = (n - head) >> 2;
  int i4 = tid;
  for (; i4 + 3 * TOPK_THREADS < nv; i4 += 4 * TOPK_THREADS) {
    topk_f4 q[4];
#pragma unroll
    for (int u = 0; u < 4; ++u) q[u] = v[i4 + u * TOPK_THREADS];
#pragma unroll
    for (int u = 0; u < 4; ++u) {
      int base = head + 4 * (i4 + u * TOPK_THREADS);
      f.template call<false>(base + 0, topk_canon(topk_bits(q[u].x)), true);
      f.template call<false>(base + 1, topk_canon(topk_bits(q[u].y)), true);
      f.template call<false>(base + 2, topk_canon(topk_bits(q[u].z)), true);
      f.template call<false>(base + 3, topk_canon(topk_bits(q[u].w)), true);
    }
  }
  for (; i4 < nv; i4 += TOPK_THREADS) {
    topk_f4 a = v[i4];
    int base = head + 4 * i4;
    f.template call<false>(base + 0, topk_canon(topk_bits(a.x)), true);
    f.template call<false>(base + 1, topk_canon(topk_bits(a.y)), true);
    f.template call<false>(base + 2, topk_canon(topk_bits(a.z)), true);
    f.template call<false>(base + 3, topk_canon(topk_bits(a.w)), true);
  }
  for (int i = head + 4 * nv + tid; i < n; i += TOPK_THREADS)
    f.template call<false>(i, topk_canon(topk_bits(p[i])), true);
}

// Sources of (index, canonical bits) pairs: the row in global memory, or a list of pairs. A
// list is visited with a block-uniform trip count, so the warp-aggregated updates apply.
struct TopkRowSrc {
  const float* p;
  int n;
  template <typename F>
  __device__ inline void visit(F& f) const { topk_for_row(p, n, f); }
};
// One round of a list visit: U entries per lane (valid: inside the list), each through the op's
// call<true>. Ops whose updates are slot reservations (collect, narrowing) overload it to
// reserve the round's slots at once (topk_reserve_round): one atomic per warp and counter per
// round instead of one per entry, which is what the one-block finish waits on (its lists are
// short, its atomics are a chain).
template <int U, typename F>
__device__ inline void topk_list_round(F& f, const topk_u2 (&q)[U], const bool (&valid)[U]) {
#pragma unroll
  for (int u = 0; u < U; ++u) f.template call<true>((int)q[u].x, q[u].y, valid[u]);
}

// Uniform contexts only: slot[u] = one slot of *ctr for each lane's pred[u] (-1 where unset),
// the round's slots of a warp reserved with one atomic (CUDA); per-lane atomics elsewhere.
template <int U>
__device__ static inline void topk_reserve_round(int* ctr, const bool (&pred)[U], int (&slot)[U]) {
#ifdef TOPK_WARP_AGG
  unsigned m[U];
  int total = 0;
#pragma unroll
  for (int u = 0; u < U; ++u) {
    m[u] = __ballot_sync(TOPK_FULL, pred[u]);
    total += __popc(m[u]);
  }
  int base = 0;
  if (total) {                                   // warp-uniform
    if (topk_lane() == 0u) base = atomicAdd(ctr, total);
    base = __shfl_sync(TOPK_FULL, base, 0);
  }
  const unsigned below = (1u << topk_lane()) - 1u;
#pragma unroll
  for (int u = 0; u < U; ++u) {
    slot[u] = pred[u] ? base + __popc(m[u] & below) : -1;
    base += __popc(m[u]);
  }
#else
#pragma unroll
  for (int u = 0; u < U; ++u) slot[u] = pred[u] ? topk_atomic_add(ctr, 1) : -1;
#endif
}

struct TopkListSrc {
  static constexpr int U = 4;   // 8-byte loads in flight per thread and round (8 for the row's
                                // global list in the one-block finish measured 1-4% slower)
  const topk_u32* p;   // pairs (index, canonical bits)
  int n;
  bool sync_loads = false;   // barrier between each round's loads and its visits: f may then
                             // write list slots below the round's end (in-place compaction)
  template <typename F>
  __device__ inline void visit(F& f) const {
    const topk_u2* e = (const topk_u2*)p;   // 8-byte aligned: global scratch or shared list
    for (int base = 0; base < n; base += U * TOPK_THREADS) {
      topk_u2 q[U];
#pragma unroll
      for (int u = 0; u < U; ++u) {
        const int i = base + u * TOPK_THREADS + TOPK_TID;
        if (i < n) q[u] = e[i];
        else q[u].x = q[u].y = 0u;
      }
      if (sync_loads) TOPK_SYNC();
      bool valid[U];
#pragma unroll
      for (int u = 0; u < U; ++u) valid[u] = base + u * TOPK_THREADS + TOPK_TID < n;
      topk_list_round<U>(f, q, valid);
    }
  }
};

struct TopkHistOp {
  int* hist;
  template <bool U>
  __device__ inline void call(int, topk_u32 bits, bool valid) const {
    topk_hist_add<U>(hist, valid ? topk_bin(bits) : 0, valid);
  }
};

#if defined(TOPK_CLUSTER) && !defined(TOPK_HIP)
#define TOPK_CLUSTER_OK 1
// Thread-block cluster primitives (sm_90+, PTX): see topk_cluster_kernel.
__device__ static inline unsigned topk_cluster_rank() {
  unsigned r;
  asm volatile("mov.u32 %0, %%cluster_ctarank;" : "=r"(r));
  return r;
}

// Generic address of the same shared variable in block `r` of the cluster.
template <typename T>
__device__ static inline T* topk_map_rank(T* p, unsigned r) {
  unsigned long long q;
  asm volatile("mapa.u64 %0, %1, %2;" : "=l"(q) : "l"((unsigned long long)p), "r"(r));
  return (T*)q;
}

// Barrier over every thread of the cluster; orders their shared-memory accesses (release/acquire).
__device__ static inline void topk_cluster_sync() {
  asm volatile("barrier.cluster.arrive.release.aligned;\n\tbarrier.cluster.wait.acquire.aligned;"
               ::: "memory");
}

// 32-bit shared::cluster address of *p in block r of the cluster, and an 8-byte store to it.
__device__ static inline unsigned topk_cluster_addr(const void* p, unsigned r) {
  const unsigned a = (unsigned)__cvta_generic_to_shared(p);
  unsigned d;
  asm volatile("mapa.shared::cluster.u32 %0, %1, %2;" : "=r"(d) : "r"(a), "r"(r));
  return d;
}
__device__ static inline void topk_cluster_st2(unsigned addr, topk_u32 x, topk_u32 y) {
  asm volatile("st.shared::cluster.v2.u32 [%0], {%1, %2};" ::"r"(addr), "r"(x), "r"(y) : "memory");
}

#endif

// Step 2: bins > t go to the output, bin t to the candidate list (emit / collect: either part
// alone, for the cluster kernel's blocks; push: the list is in another block of the cluster,
// at shared::cluster address push_addr).
struct TopkCollectOp {
  TopkShared* sh;
  topk_u32* cand;
  int t;
  int* out;
  const TopkTransform* tr;
  bool emit = true;
  bool collect = true;
  bool push = false;
  unsigned push_addr = 0u;
  int cap = TOPK_CAP;    // candidate slots: c >= cap is counted (cand_n) but not stored
  template <bool U>
  __device__ inline void call(int idx, topk_u32 bits, bool valid) const {
    int bin = topk_bin(bits);
    put(idx, bits, topk_reserve<U>(&sh->out_pos, emit && valid && bin > t),
        topk_reserve<U>(&sh->cand_n, collect && valid && bin == t));
  }
  // pos >= 0: an output slot; c >= 0: a candidate slot
  __device__ inline void put(int idx, topk_u32 bits, int pos, int c) const {
    if (pos >= 0) out[pos] = tr->apply(idx);
    if (c >= 0 && c < cap) {
#ifdef TOPK_CLUSTER_OK
      if (push) {
        topk_cluster_st2(push_addr + 8u * (unsigned)c, (topk_u32)idx, bits);
        return;
      }
#endif
      cand[2 * c] = (topk_u32)idx;
      cand[2 * c + 1] = bits;
    }
  }
};

template <int U>
__device__ inline void topk_list_round(TopkCollectOp& f, const topk_u2 (&q)[U], const bool (&valid)[U]) {
  bool above[U], in[U];
#pragma unroll
  for (int u = 0; u < U; ++u) {
    const int bin = topk_bin(q[u].y);
    above[u] = f.emit && valid[u] && bin > f.t;
    in[u] = f.collect && valid[u] && bin == f.t;
  }
  int pos[U], c[U];
  topk_reserve_round<U>(&f.sh->out_pos, above, pos);
  topk_reserve_round<U>(&f.sh->cand_n, in, c);
#pragma unroll
  for (int u = 0; u < U; ++u) f.put((int)q[u].x, q[u].y, pos[u], c[u]);
}

// Step 3, one radix pass: histogram of the digit at `shift` of fine keys matching the prefix.
struct TopkDigitOp {
  int* hist;
  int t;               // coarse bin filter (-1: none)
  topk_u32 mask, prefix;
  int shift;
  template <bool U>
  __device__ inline void call(int, topk_u32 bits, bool valid) const {
    if (t >= 0 && topk_bin(bits) != t) valid = false;
    topk_u32 k = topk_fine_key(bits);
    topk_hist_add<U>(hist, (int)((k >> shift) & 255u), valid && (k & mask) == prefix);
  }
};

// Step 3, emit: keys above the exact K-th key, and `need` keys equal to it.
struct TopkEmitOp {
  TopkShared* sh;
  int t;
  topk_u32 key;
  int need;
  int* out;
  const TopkTransform* tr;
  template <bool U>
  __device__ inline void call(int idx, topk_u32 bits, bool valid) const {
    bool in = valid && !(t >= 0 && topk_bin(bits) != t);
    topk_u32 k = topk_fine_key(bits);
    int e = topk_reserve<U>(&sh->eq_taken, in && k == key);
    bool take = (in && k > key) || (e >= 0 && e < need);
    int pos = topk_reserve<U>(&sh->out_pos, take);
    if (pos >= 0) out[pos] = tr->apply(idx);
  }
};

// Radix select among the elements of coarse bin `t` of `src` (every element when t < 0): finds
// the exact threshold fine key and how many elements equal to it to take, then emits. `need`
// >= 1 elements are still to be emitted from bin t.
template <typename Src>
__device__ static inline void topk_refine_emit(TopkShared& sh, const Src& src, int t,
                                               int need, int* out, const TopkTransform& tr) {
  topk_u32 prefix = 0u, mask = 0u;
  for (int shift = 24; shift >= 0; shift -= 8) {
    topk_clear_hist(sh, 256);
    TOPK_SYNC();
    TopkDigitOp dop;
    dop.hist = sh.hist;
    dop.t = t;
    dop.mask = mask;
    dop.prefix = prefix;
    dop.shift = shift;
    src.visit(dop);
    TOPK_SYNC();
    topk_find_threshold(sh, 256, need);
    need -= sh.sel_above;
    prefix |= ((topk_u32)sh.sel_bin) << shift;
    mask |= 255u << shift;
    TOPK_SYNC();   // everyone has read sel_* before the next pass overwrites it
    TOPK_STAMP(sh, 5 + (24 - shift) / 8);
  }
  TopkEmitOp eop;
  eop.sh = &sh;
  eop.t = t;
  eop.key = prefix;
  eop.need = need;
  eop.out = out;
  eop.tr = &tr;
  src.visit(eop);
}

#ifndef TOPK_RANK_MAX
#define TOPK_RANK_MAX 256   // candidate lists up to this long are finished by ranking
#endif
#if TOPK_RANK_MAX > 256
#error "TOPK_RANK_MAX must be at most 256 (the ranks live in the histogram array)"
#endif

// Step 3 for a short candidate list (n <= TOPK_RANK_MAX, in shared memory): candidate i's rank
// is the number of candidates with a larger fine key plus those with an equal key and a smaller
// list position (all ranks distinct); the `need` of rank < need are emitted. Every thread takes
// one (candidate, part of the list) pair, partial ranks add up in sh.hist (free here), so the
// whole block works even on a short list; every thread of a pass reads the same entry (a
// broadcast). Two barriers instead of four radix passes. All threads call it. The list's bits
// become fine keys in place (computed once, not once per comparison): nothing reads it after.
__device__ static inline void topk_rank_emit(TopkShared& sh, topk_u32* cand, int n,
                                             int need, int* out, const TopkTransform& tr) {
  const int tid = TOPK_TID;
  for (int i = tid; i < n; i += TOPK_THREADS) {
    sh.hist[i] = 0;
    cand[2 * i + 1] = topk_fine_key(cand[2 * i + 1]);   // in place: the list ends here
  }
  TOPK_SYNC();
  const int parts = n > 0 && TOPK_THREADS / n > 1 ? TOPK_THREADS / n : 1;
  const int per = n > 0 ? (n + parts - 1) / parts : 0;
  for (int w = tid; w < n * parts; w += TOPK_THREADS) {
    const int i = w % n;
    const int j0 = (w / n) * per;
    const int j1 = j0 + per < n ? j0 + per : n;
    const topk_u32 ki = cand[2 * i + 1];
    int r = 0;
#pragma unroll 4
    for (int j = j0; j < j1; ++j) {
      const topk_u32 kj = cand[2 * j + 1];
      r += (int)((kj > ki) | ((kj == ki) & (j < i)));
    }
    if (r) topk_atomic_add(&sh.hist[i], r);
  }
  TOPK_SYNC();
  // block-uniform trip count: output slots are reserved once per warp (CUDA), not per lane
  for (int base = 0; base < n; base += TOPK_THREADS) {
    const int i = base + tid;
    const int pos = topk_reserve<true>(&sh.out_pos, i < n && sh.hist[i] < need);
    if (pos >= 0) out[pos] = tr.apply((int)cand[2 * i]);
  }
}

// Canonical fp32 bits of a fine key (inverse of topk_fine_key).
TOPK_HD static inline topk_u32 topk_bits_of_fine(topk_u32 f) {
  return (f & 0x80000000u) ? (f & 0x7FFFFFFFu) : ~f;
}

// Smallest fine key whose coarse bin is >= t0 (the bin is monotone in the fine key of
// canonical bits; those lie in [fine(-inf), fine(NaN)]).
__device__ static inline topk_u32 topk_fine_floor_of_bin(int t0) {
  topk_u32 lo = 0x007FFFFFu, hi = 0xFFC00000u;   // fine(-inf), fine(canonical NaN)
  if (topk_bin(topk_bits_of_fine(lo)) >= t0) return 0u;
  while (hi - lo > 1u) {                          // invariant: bin(lo) < t0 <= bin(hi)
    topk_u32 mid = lo + ((hi - lo) >> 1);
    if (topk_bin(topk_canon(topk_bits_of_fine(mid))) >= t0) hi = mid;
    else lo = mid;
  }
  return hi;
}

#ifdef TOPK_WARP_AGG
// The same floor found by the 32 lanes of one warp: each round probes 32 keys splitting
// (lo, hi) into 33 parts and keeps the two probes around the first one at or above t0 (the bin
// is monotone in the key, so the lanes' answers are a suffix). Every lane returns the result.
__device__ static inline topk_u32 topk_fine_floor_of_bin_warp(int t0) {
  topk_u32 lo = 0x007FFFFFu, hi = 0xFFC00000u;
  if (topk_bin(topk_bits_of_fine(lo)) >= t0) return 0u;
  const unsigned lane = topk_lane();
  while (hi - lo > 1u) {                          // invariant: bin(lo) < t0 <= bin(hi)
    const unsigned long long span = hi - lo;
    const topk_u32 m = lo + (topk_u32)((span * (lane + 1u)) / 33u);   // lo <= m < hi
    const bool ge = m > lo && topk_bin(topk_canon(topk_bits_of_fine(m))) >= t0;
    const unsigned mask = __ballot_sync(TOPK_FULL, ge);
    const int first = mask ? __ffs(mask) - 1 : 32;
    const topk_u32 nhi = __shfl_sync(TOPK_FULL, m, first < 32 ? first : 31);
    const topk_u32 nlo = __shfl_sync(TOPK_FULL, m, first > 0 ? first - 1 : 0);
    if (first < 32) hi = nhi;
    if (first > 0 && nlo > lo) lo = nlo;
  }
  return hi;
}
#endif

// Narrowing state in sh.hist, which is free from the narrowing's start until its in-list finish
// (the coarse histogram's values are read before; rank and refine clear it themselves):
// the threshold's fine-key interval, and the smallest and largest key seen in it.
#define TOPK_NLO(sh) (*(topk_u32*)&(sh).hist[0])
#define TOPK_NHI(sh) (*(topk_u32*)&(sh).hist[1])
#define TOPK_NMIN(sh) (*(topk_u32*)&(sh).hist[2])
#define TOPK_NMAX(sh) (*(topk_u32*)&(sh).hist[3])

// Fine-key interval [lo, hi] of coarse bin t (both block-uniform; all threads call it).
__device__ static inline void topk_bin_range(TopkShared& sh, int t) {
#ifdef TOPK_WARP_AGG
  if (TOPK_TID < 32) {
    const topk_u32 lo = topk_fine_floor_of_bin_warp(t);
    const topk_u32 up = t + 1 < TOPK_BINS ? topk_fine_floor_of_bin_warp(t + 1) : 0u;
    if (TOPK_TID == 0) {
      TOPK_NLO(sh) = lo;
      TOPK_NHI(sh) = t + 1 < TOPK_BINS ? up - 1u : 0xFFFFFFFFu;
    }
  }
#else
  if (TOPK_TID == 0) {
    TOPK_NLO(sh) = topk_fine_floor_of_bin(t);
    TOPK_NHI(sh) = t + 1 < TOPK_BINS ? topk_fine_floor_of_bin(t + 1) - 1u : 0xFFFFFFFFu;
  }
#endif
  TOPK_SYNC();
}

// Bins of a narrowing pass (the candidate buffer, free then, holds them): a power of two, at
// most 8192, at most the buffer's 2 * TOPK_CAP ints.
#define TOPK_NB_CAP (2 * TOPK_CAP < 8192 ? 2 * TOPK_CAP : 8192)
#define TOPK_NB (TOPK_NB_CAP >= 8192 ? 8192 : TOPK_NB_CAP >= 4096 ? 4096 : TOPK_NB_CAP >= 2048 ? 2048 : \
                 TOPK_NB_CAP >= 1024 ? 1024 : TOPK_NB_CAP >= 512 ? 512 : TOPK_NB_CAP >= 256 ? 256 : \
                 TOPK_NB_CAP >= 128 ? 128 : TOPK_NB_CAP >= 64 ? 64 : TOPK_NB_CAP >= 32 ? 32 : 16)
#define TOPK_NB_LOG2 (TOPK_NB == 8192 ? 13 : TOPK_NB == 4096 ? 12 : TOPK_NB == 2048 ? 11 : \
                      TOPK_NB == 1024 ? 10 : TOPK_NB == 512 ? 9 : TOPK_NB == 256 ? 8 : TOPK_NB == 128 ? 7 : \
                      TOPK_NB == 64 ? 6 : TOPK_NB == 32 ? 5 : 4)

// One pass of the interval narrowing (see topk_narrow_finish) over (index, bits) pairs with fine
// key k: emits k in (hi, emit_hi] (values above the interval not emitted before), and for k in
// [lo, hi]: mode 0 counts (k - lo) >> shift in hist; mode 1 appends to the candidate list;
// mode 2 (lo == hi, the exact threshold key) emits the first `need` of them.
struct TopkRangeOp {
  TopkShared* sh;
  int* hist;
  topk_u32* cand;
  topk_u32 lo, hi, emit_hi;
  int shift, mode, need;
  int* out;
  const TopkTransform* tr;
  topk_u32 kmin, kmax;   // this thread's smallest and largest key in [lo, hi] (mode 0)
  template <bool U>
  __device__ inline void call(int idx, topk_u32 bits, bool valid) {
    const topk_u32 k = topk_fine_key(bits);
    const bool above = valid && k > hi && k <= emit_hi;
    const bool in = valid && k >= lo && k <= hi;
    if (mode == 0) count<U>(k, in);
    if (mode == 1) put(idx, bits, topk_reserve<U>(&sh->cand_n, in));
    const int e = topk_reserve<U>(&sh->eq_taken, mode == 2 && in);
    const int pos = topk_reserve<U>(&sh->out_pos, above || (e >= 0 && e < need));
    if (pos >= 0) out[pos] = tr->apply(idx);
  }
  template <bool U>
  __device__ inline void count(topk_u32 k, bool in) {   // mode 0
    if (in) {
      kmin = k < kmin ? k : kmin;
      kmax = k > kmax ? k : kmax;
    }
    topk_hist_add<U>(hist, in ? (int)((k - lo) >> shift) : 0, in);
  }
  __device__ inline void put(int idx, topk_u32 bits, int c) const {   // mode 1
    if (c >= 0 && c < TOPK_CAP) {
      cand[2 * c] = (topk_u32)idx;
      cand[2 * c + 1] = bits;
    }
  }
};

// Modes 0 and 1 reserve a round's slots at once (mode 2's slots depend on each taken count).
template <int U>
__device__ inline void topk_list_round(TopkRangeOp& f, const topk_u2 (&q)[U], const bool (&valid)[U]) {
  if (f.mode == 2) {                              // block-uniform
#pragma unroll
    for (int u = 0; u < U; ++u) f.template call<true>((int)q[u].x, q[u].y, valid[u]);
    return;
  }
  bool above[U], in[U];
#pragma unroll
  for (int u = 0; u < U; ++u) {
    const topk_u32 k = topk_fine_key(q[u].y);
    above[u] = valid[u] && k > f.hi && k <= f.emit_hi;
    in[u] = valid[u] && k >= f.lo && k <= f.hi;
    if (f.mode == 0) f.template count<true>(k, in[u]);
  }
  int pos[U];
  if (f.mode == 1) {
    int c[U];
    topk_reserve_round<U>(&f.sh->cand_n, in, c);
#pragma unroll
    for (int u = 0; u < U; ++u) f.put((int)q[u].x, q[u].y, c[u]);
  }
  topk_reserve_round<U>(&f.sh->out_pos, above, pos);
#pragma unroll
  for (int u = 0; u < U; ++u)
    if (pos[u] >= 0) f.out[pos[u]] = f.tr->apply((int)q[u].x);
}

// One pass; mode 0 also leaves the interval's smallest and largest key in TOPK_NMIN / TOPK_NMAX.
template <typename Src>
__device__ static inline void topk_range_pass(TopkShared& sh, TopkRangeOp& op, const Src& src) {
  if (op.mode == 0) {
    op.kmin = 0xFFFFFFFFu;
    op.kmax = 0u;
    if (TOPK_TID == 0) {
      TOPK_NMIN(sh) = 0xFFFFFFFFu;
      TOPK_NMAX(sh) = 0u;
    }
    TOPK_SYNC();
  }
  src.visit(op);
  if (op.mode == 0 && op.kmin <= op.kmax) {
    topk_atomic_min_u(&TOPK_NMIN(sh), op.kmin);
    topk_atomic_max_u(&TOPK_NMAX(sh), op.kmax);
  }
  TOPK_SYNC();
}

// Sources report whether a pass over them re-reads the row (TOPK_FLAG_ROW_PASSES).
template <typename Src> struct TopkIsRow { static constexpr bool value = false; };
template <> struct TopkIsRow<TopkRowSrc> { static constexpr bool value = true; };

// Bin t holds more than the candidate list: narrow its fine-key interval by histogram passes over
// `src` (TOPK_NB bins each, in the candidate buffer) until the interval's values fit the list
// (then one collect pass and the in-list finish) or it is a single key (then one pass emits
// `need` of its values). Each pass also emits the values between the new interval and the
// previous one, so every value is emitted once. above_done: the values above bin t are already
// emitted (else the first pass emits them). A 32-bit key takes at most three narrowing passes at
// 4096+ bins (typically one: values spread over the bin). Exact for any source, no global memory.
template <typename Src>
__device__ static TOPK_NOINLINE void topk_narrow_finish(TopkShared& sh, topk_u32* cand, const Src& src, int t,
                                                 int count, int need, bool above_done, int* out,
                                                 const TopkTransform& tr) {
  if (TOPK_TID == 0) {
    sh.flags |= TOPK_FLAG_BIN_OVF | (TopkIsRow<Src>::value ? TOPK_FLAG_ROW_PASSES : 0);
    sh.cand_n = 0;
    sh.eq_taken = 0;
  }
  topk_bin_range(sh, t);
  TopkRangeOp op;
  op.sh = &sh;
  op.hist = (int*)cand;
  op.cand = cand;
  op.lo = TOPK_NLO(sh);
  op.hi = TOPK_NHI(sh);
  op.emit_hi = above_done ? op.hi : 0xFFFFFFFFu;
  op.out = out;
  op.tr = &tr;
  op.need = need;
  for (;;) {                                  // every decision below is block-uniform
    if (op.lo == op.hi || count <= TOPK_CAP) break;
    const topk_u32 w = op.hi - op.lo;
    const int bl = topk_bitlen(w);            // w > 0
    op.shift = bl > TOPK_NB_LOG2 ? bl - TOPK_NB_LOG2 : 0;
    op.mode = 0;
    for (int i = TOPK_TID; i < TOPK_NB; i += TOPK_THREADS) op.hist[i] = 0;
    TOPK_SYNC();
    topk_range_pass(sh, op, src);
    topk_find_threshold_in(sh, op.hist, TOPK_NB, op.need);
    const int b = sh.sel_bin;
    op.need -= sh.sel_above;
    count = op.hist[b];
    topk_u32 nlo = op.lo + ((topk_u32)b << op.shift);
    const topk_u32 mask = (1u << op.shift) - 1u;
    topk_u32 nhi = op.hi - nlo > mask ? nlo + mask : op.hi;
    if (TOPK_NMIN(sh) > nlo) nlo = TOPK_NMIN(sh);         // the interval's values lie in [nmin, nmax]:
    if (TOPK_NMAX(sh) < nhi) nhi = TOPK_NMAX(sh);         // a bin of ties collapses to its key at once
    op.emit_hi = op.hi;
    op.hi = nhi;
    op.lo = nlo;
    TOPK_SYNC();                              // every thread has read sel_*, hist[b], nmin/nmax
  }
  if (op.lo == op.hi) {                       // the exact threshold key: take `need` of it
    op.mode = 2;
    topk_range_pass(sh, op, src);
    return;
  }
  op.mode = 1;                                // the interval's values fit the list
  topk_range_pass(sh, op, src);
  const int n = sh.cand_n;
  if (n <= TOPK_RANK_MAX) {
    topk_rank_emit(sh, cand, n, op.need, out, tr);
  } else {
    TopkListSrc ls;
    ls.p = cand;
    ls.n = n;
    topk_refine_emit(sh, ls, -1, op.need, out, tr);
  }
}

// Steps 2 and 3 over a source: emit bins > t, collect bin t into the candidate list, refine.
// count: bin t's population (from the histogram). A bin that does not fit the list is narrowed
// by passes over the source (topk_narrow_finish), as is one whose collect overflowed anyway (a
// count that was a lower bound).
template <typename Src>
__device__ static inline void topk_finish(TopkShared& sh, topk_u32* cand, const Src& src,
                                          int t, int count, int need_in_bin, int* out,
                                          const TopkTransform& tr) {
  if (count > TOPK_CAP) {
    TOPK_STAMP(sh, 4);
    topk_narrow_finish(sh, cand, src, t, count, need_in_bin, false, out, tr);
    return;
  }
  TopkCollectOp cop;
  cop.sh = &sh;
  cop.cand = cand;
  cop.t = t;
  cop.out = out;
  cop.tr = &tr;
  src.visit(cop);
  TOPK_SYNC();
  TOPK_STAMP(sh, 4);
  if (sh.cand_n <= TOPK_RANK_MAX && sh.cand_n <= TOPK_CAP) {
    topk_rank_emit(sh, cand, sh.cand_n, need_in_bin, out, tr);
    for (int i = 5; i <= 8; ++i) TOPK_STAMP(sh, i);
  } else if (sh.cand_n <= TOPK_CAP) {
    TopkListSrc ls;
    ls.p = cand;
    ls.n = sh.cand_n;
    topk_refine_emit(sh, ls, -1, need_in_bin, out, tr);   // every candidate is in bin t
  } else {                         // more than `count` (a lower bound): narrow, bins > t emitted
    const int n = sh.cand_n;
    TOPK_SYNC();
    topk_narrow_finish(sh, cand, src, t, n, need_in_bin, true, out, tr);
  }
}

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
// TOPK_KEEP_NOINLINE (an experiment's knob, off by default): the keep pass out of line, so that
// its code no longer moves with changes after it (results/sm_90/topk_v11/README.md).
#if defined(TOPK_KEEP_NOINLINE) && !defined(TOPK_HIP)
#define TOPK_KEEP_INLINE __attribute__((noinline))
#else
#define TOPK_KEEP_INLINE inline
#endif
template <bool SPLIT, bool HIST, bool GSPILL = SPLIT>
__device__ static TOPK_KEEP_INLINE void topk_keep_pass(int* sctr, int* gctr, const float* __restrict__ p,
                                             int n, topk_u32 f0, topk_u2* glist, int cap,
                                             topk_u2* stage, int stage_cap, int idx_off,
                                             int* hist) {
  constexpr int U = TOPK_KEEP_UNROLL;
  const int tid = TOPK_TID;
#ifdef TOPK_PROBE_KEEP_NONE   // diagnostic only: keep nothing (the row then takes the plain path)
  const float thr = topk_float(0x7F800000u);
#else
  const float thr = topk_keep_threshold(f0);
#endif
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
    if (spills) {
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
// path, which recounts the row), else -1. Deterministic (the same f0 in every block that samples
// the same row). Needs sh.hist cleared on entry; leaves it cleared.
__device__ static inline topk_u32 topk_sample_floor(TopkShared& sh, const float* p, int len,
                                                    int K, int* cut) {
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
    if (tid + u * TOPK_THREADS >= TOPK_SAMPLE4) continue;
    topk_hist_inc(sh.hist, topk_bin(topk_canon(topk_bits(a[u].x))));
    topk_hist_inc(sh.hist, topk_bin(topk_canon(topk_bits(a[u].y))));
    topk_hist_inc(sh.hist, topk_bin(topk_canon(topk_bits(a[u].z))));
    topk_hist_inc(sh.hist, topk_bin(topk_canon(topk_bits(a[u].w))));
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
  // t0's fine-key interval [lo, hi] into sh.scan (free after the threshold search's barrier)
#ifdef TOPK_WARP_AGG
  if (tid < 32) {                  // warp 0: a 32-way search (7 rounds instead of 32 steps)
    const topk_u32 f = topk_fine_floor_of_bin_warp(t0);
#ifdef TOPK_VERIFY_FLOOR
    if (tid == 0 && f != topk_fine_floor_of_bin(t0)) __trap();
#endif
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

#if defined(TOPK_RESIDENT)
#include "topk_resident.cuh"
#endif

// ---------------------------------------------------------------------------------------------
// Cluster kernel (CUDA, sm_90 and later; built with -DTOPK_CLUSTER=S, 2 <= S <= 16; over 8 the
// host allows the non-portable size on the function before launching it): a long row
// is handled by one thread-block cluster of S blocks that share their shared memory (DSMEM), in
// one kernel:
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
// A spill region that overflows, or fewer than K kept (a bad sample), sends the row to block 0's
// plain path (exact; TOPK_FLAG_REPLAY). Rows that are not long (len <= K, short rows) are done by
// block 0 alone. Same arguments, output and bin_counts as topk_transform_kernel, then the
// scratch list (scratch_cap entries of 8 bytes per row, used only for spills).
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
// code moves with any change here; results/sm_90/topk_v11/), so smaller clusters keep the
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

#if TOPK_CLUSTER >= TOPK_CLUSTER_TWO_LEVEL
// After cluster barrier (1): every block's group sums (its TOPK_CTH_OWN part) into [S][CG].
template <int S>
__device__ static inline void topk_cluster_read_groups(int* cth) {
  for (int i = TOPK_TID; i < S * TOPK_CG; i += TOPK_THREADS)
    cth[i] = topk_map_rank(cth + TOPK_CTH_OWN(S), (unsigned)(i / TOPK_CG))[i % TOPK_CG];
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

#if defined(TOPK_CLUSTER_REGS) && TOPK_CLUSTER >= TOPK_CLUSTER_TWO_LEVEL
// The register path's slice [0, n) of q into v (R float4 a thread, strided by the block), and
// every value's coarse bin counted in sh.hist.
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
  // goes out, none for the rest. Measured on the H200 at (8,128K) (results/sm_90/topk_v12/),
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
// Returns false, in every block, where bin t does not fit block 0's stage: after a cluster
// barrier (no block reads another's histogram any more) the caller takes the sampled path.
__device__ static bool topk_cluster_regs_row(TopkShared& sh, int* cth, topk_u32* stage, const float* p,
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
  if (nt > TOPK_CAP) {                                   // cluster-uniform
    topk_cluster_sync();
    return false;
  }
  const int t = gt * TOPK_CGS + tj;
  topk_add_out_pos(sh, topk_cluster_mine<S>(cth, rank, gt, tj));
  if (TOPK_TID == 0) {       // this block's first bin-t slot in block 0's stage
    int coff = 0;
    for (int r = 0; r < (int)rank; ++r) coff += cth[TOPK_CTH_B(S) + r * TOPK_CGS + tj];
    sh.cand_n = coff;
  }
  TOPK_SYNC();
  TOPK_STAMP(sh, 3);
  topk_regs_emit(sh, v, off, n, t, topk_cluster_addr(stage, 0u), o, tr);
  TOPK_PROF_SYNC();
  TOPK_STAMP(sh, 5);         // profile builds: the emission's end (phase p1 = -(barrier (2)'s wait))
  topk_cluster_sync();                                   // (2) every push has landed
  if (rank != 0) return true;
  TOPK_STAMP(sh, 4);
  if (TOPK_TID == 0) {
    diag[0] = nt;
    sh.out_pos = above;      // bin t fills the slots after every block's bins > t
  }
  TOPK_SYNC();
  if (nt <= TOPK_RANK_MAX) {
    topk_rank_emit(sh, stage, nt, K - above, o, tr);
  } else {
    TopkListSrc ls;
    ls.p = stage;
    ls.n = nt;
    topk_refine_emit(sh, ls, -1, K - above, o, tr);
  }
  topk_write_flags(sh, diag);
  TOPK_PROF_SYNC();
  TOPK_STAMP(sh, 9);
  TOPK_PROF_DUMP(sh, o);
  return true;
}
#endif

// The register path keeps R float4 per thread live across both cluster barriers: its build lets
// ptxas take up to the registers of one block per SM (76 at 512 threads, R = 8); the other
// builds keep the default bound. Two blocks per SM (64 registers at 512, no spills) put
// (16,128K) on the register path, but it was no faster there than the sampled path (22.4-22.7
// against 22.0-22.2 us on the H200, results/sm_90/topk_v13/).
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
  // cluster barrier that another one waits at.
  if (!topk_use_long(len, K, prefix_len, long_rows)) {
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
  {
    int roff, rn;
    const int slice = topk_cluster_slice<S>(len, rank, &roff, &rn);   // uniform over the cluster
    if (slice <= 4 * TOPK_CLUSTER_REGS * TOPK_THREADS && (((unsigned long long)p) & 15ull) == 0ull) {
      if (topk_cluster_regs_row(sh, topk_cth, stage, p, roff, rn, K, rank, o, tr, diag)) return;
      topk_block_init(sh);   // bin t too large for a stage: the sampled path below
    }
  }
#endif
  int cut;                   // the bin f0 cut (its kept count is partial), -1 if none
  const topk_u32 f0 = topk_sample_floor(sh, p, len, K, &cut);
  TOPK_STAMP(sh, 1);
  int off, n;
  topk_cluster_slice<S>(len, rank, &off, &n);
  // the row's scratch list (long_rows = its entries) in S spill regions, one per block
  const int region = long_rows / S;
  topk_u32* spill0 = scratch + (long long)row * 2ll * (long long)long_rows;
  if (n > 0)
    topk_keep_pass<true, true, false>(&sh.scratch_n, nullptr, p + off, n, f0,
                                      (topk_u2*)(spill0 + 2ll * rank * region), region,
                                      (topk_u2*)stage, TOPK_CAP, off, sh.hist);
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
  int kept = 0;
  bool fits = true, spilled = false;
#pragma unroll
  for (int r = 0; r < S; ++r) {
    kept += topk_ckept[r];
    fits = fits && topk_ckept[r] <= TOPK_CAP + region;
    spilled = spilled || topk_ckept[r] > TOPK_CAP;
  }
  const bool kept_ok = fits && kept >= K;
#if TOPK_CLUSTER >= TOPK_CLUSTER_TWO_LEVEL
  int gt = 0, tj = 0, above = 0, nt = 0;   // bin t = gt * TOPK_CGS + tj
  if (kept_ok)   // every bin-t value of the row is kept (t is above the cut)
    topk_cluster_find<S>(sh, topk_cth, K, &gt, &tj, &above, &nt);
  const int t = gt * TOPK_CGS + tj;
  // exact fallback, block 0 redoes the whole row: a list that overflowed, fewer than K kept, or
  // a threshold bin that f0 cut (a sampling accident: its count is partial). Cluster-uniform.
  if (!kept_ok || t == cut) {
#else
  if (kept_ok) topk_find_threshold_in(sh, topk_csum, TOPK_BINS, K);
  // exact fallback, block 0 redoes the whole row: a list that overflowed, fewer than K kept, or
  // a threshold bin that f0 cut (a sampling accident: its count is partial). Cluster-uniform.
  if (!kept_ok || sh.sel_bin == cut) {
#endif
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
  const int mine = topk_cluster_mine<S>(topk_cth, rank, gt, tj);
#else
  const int t = sh.sel_bin;
  const int above = sh.sel_above;
  const int nt = topk_csum[t];   // every bin-t value of the row is kept (t is above the cut)
  // this block's first output slot: the bins > t of the blocks of lower rank
  int mine = 0;
  for (int i = t + 1 + tid; i < TOPK_BINS; i += TOPK_THREADS)
    for (int r = 0; r < (int)rank; ++r) mine += topk_map_rank(sh.hist, (unsigned)r)[i];
#endif
  topk_add_out_pos(sh, mine);
  // Bin t in one list: push, when block 0's stage has room after its own kept entries for all
  // of bin t (every block writes its bin-t entries there directly: DSMEM stores, at offsets
  // from the histograms); else pull (block 0 compacts its own and reads the others'). A bin t
  // larger than a list is not collected: block 0 refines it over every list (step 4).
  const int base0 = topk_ckept[0] < TOPK_CAP ? topk_ckept[0] : TOPK_CAP;
  const bool bin_fits = nt <= TOPK_CAP;
  const bool push = TOPK_CLUSTER_PUSH && base0 + nt <= TOPK_CAP;
  if (push && tid == 0) {
    int coff = 0;
#if TOPK_CLUSTER >= TOPK_CLUSTER_TWO_LEVEL
    for (int r = 0; r < (int)rank; ++r) coff += topk_cth[TOPK_CTH_B(S) + r * TOPK_CGS + tj];
#else
    for (int r = 0; r < (int)rank; ++r) coff += topk_map_rank(sh.hist, (unsigned)r)[t];
#endif
    sh.cand_n = coff;
  }
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
  if (nt <= TOPK_RANK_MAX) {
    topk_rank_emit(sh, cl, nt, need, o, tr);
  } else {
    TopkListSrc ls;
    ls.p = cl;
    ls.n = nt;
    topk_refine_emit(sh, ls, -1, need, o, tr);
  }
  topk_write_flags(sh, diag);
  TOPK_PROF_SYNC();
  TOPK_STAMP(sh, 9);
  TOPK_PROF_DUMP(sh, o);
}
#endif  // TOPK_CLUSTER
