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

//
// Parts (beside this file; occtune's read_source inlines them: the runtime compilers know no
// include path), in the algorithm's order:
//  topk_platform.cuh   configuration, row flags, portability shims (CUDA, HIP, bare clang), types
//  topk_keys.cuh       keys: canonical bits, fine key, fp16 coarse key and bin, bin prefilter
//  topk_block.cuh      a block's shared state, profiling hooks (TOPK_PROF), shared-memory updates
//  topk_threshold.cuh  threshold: the bin holding the need-th value, counted from the top
//  topk_load.cuh       load: index transforms, the row's 16-byte visit, list sources
//  topk_collect.cuh    histogram and collect ops
//  topk_refine.cuh     refine: radix passes, rank, a bin's exact floor, narrowing, the finish
//  topk_long.cuh       long rows: the keep pass, the split flush, the sampled floor
//  topk_kernels.cuh    the two-pass kernel and the split kernel
//  topk_resident.cuh   the resident kernel (-DTOPK_RESIDENT): every score read once, kept in LDS
//  topk_cluster.cuh    the cluster kernel (-DTOPK_CLUSTER=S, sm_90+)

#include "topk_platform.cuh"
#include "topk_keys.cuh"
#include "topk_block.cuh"
#include "topk_threshold.cuh"
#include "topk_load.cuh"
#include "topk_collect.cuh"
#include "topk_refine.cuh"
#include "topk_long.cuh"
#include "topk_kernels.cuh"
#if defined(TOPK_RESIDENT)
#include "topk_resident.cuh"
#endif

#include "topk_cluster.cuh"
