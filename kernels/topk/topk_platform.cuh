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
                                 // overflowed (the row was redone from its coarse histogram; the
                                 // cluster kernel: an overflowed list re-reads the slices instead)
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
__attribute__((device)) static inline void topk_atomic_max_dev_u(unsigned* p, unsigned v) {
  __hip_atomic_fetch_max(p, v, __ATOMIC_RELAXED, __HIP_MEMORY_SCOPE_AGENT);
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
// Device-scope (cross-block) atomics on global memory: atomicAdd and atomicMax are device scope on
// CUDA and HIP.
__device__ static inline int topk_atomic_add_dev(int* p, int v) { return atomicAdd(p, v); }
__device__ static inline void topk_atomic_max_dev_u(unsigned* p, unsigned v) { atomicMax(p, v); }
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
// work (ncu, benchmarks/records/topk/v9/README.md). AMDGPU waves have no independent thread
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

