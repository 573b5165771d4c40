// Step 3, one radix pass: histogram of the digit at `shift` of fine keys matching the prefix;
// with `span`, also this thread's smallest and largest of those keys (kmin > kmax: none).
struct TopkDigitOp {
  int* hist;
  int t;               // coarse bin filter (-1: none)
  topk_u32 mask, prefix;
  int shift;
  bool span;
  topk_u32 kmin, kmax;
  template <bool U>
  __device__ inline void call(int, topk_u32 bits, bool valid) {
    if (t >= 0 && topk_bin(bits) != t) valid = false;
    topk_u32 k = topk_fine_key(bits);
    const bool in = valid && (k & mask) == prefix;
    topk_hist_add<U>(hist, (int)((k >> shift) & 255u), in);
    if (span && in) {
      kmin = k < kmin ? k : kmin;
      kmax = k > kmax ? k : kmax;
    }
  }
};

// Merges each thread's key span [kmin, kmax] (kmin > kmax: none) into *lo and *hi in shared
// memory (*lo from 0xFFFFFFFF, *hi from 0): one atomic pair per warp on CUDA sm_80+ (all lanes
// call it), per lane elsewhere. The caller's next barrier completes it.
__device__ static inline void topk_span_merge(topk_u32* lo, topk_u32* hi, topk_u32 kmin, topk_u32 kmax) {
#if defined(TOPK_WARP_AGG) && defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  kmin = __reduce_min_sync(TOPK_FULL, kmin);
  kmax = __reduce_max_sync(TOPK_FULL, kmax);
  if (topk_lane() != 0u) return;
#endif
  if (kmin <= kmax) {
    topk_atomic_min_u(lo, kmin);
    topk_atomic_max_u(hi, kmax);
  }
}

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

// One radix pass's histogram: the 8-bit digit at `shift` of the fine keys of src's values in bin
// t (every value when t < 0) whose higher digits equal `prefix` (under `mask`), into sh.hist[0, 256).
// With `span` (two shared words that nothing else uses until the caller has read them after the
// barrier that ends the pass), also the smallest and largest of those keys in span[0] and span[1].
// All threads call it; ends with a barrier.
template <typename Src>
__device__ static inline void topk_digit_hist(TopkShared& sh, const Src& src, int t, topk_u32 mask,
                                              topk_u32 prefix, int shift, topk_u32* span = nullptr) {
  topk_clear_hist(sh, 256);
  if (span && TOPK_TID == 0) {
    span[0] = 0xFFFFFFFFu;
    span[1] = 0u;
  }
  TOPK_SYNC();
  TopkDigitOp dop;
  dop.hist = sh.hist;
  dop.t = t;
  dop.mask = mask;
  dop.prefix = prefix;
  dop.shift = shift;
  dop.span = span != nullptr;
  dop.kmin = 0xFFFFFFFFu;
  dop.kmax = 0u;
  src.visit(dop);
  if (span) topk_span_merge(&span[0], &span[1], dop.kmin, dop.kmax);
  TOPK_SYNC();
}

// After a digit's threshold search (sh.sel_*): the digit joins the key's prefix and `need` drops
// by the values above it. Ends with a barrier (sel_* read by all before a next pass writes it).
__device__ static inline void topk_digit_take(TopkShared& sh, int& need, topk_u32& prefix, topk_u32& mask,
                                              int shift) {
  need -= sh.sel_above;
  prefix |= ((topk_u32)sh.sel_bin) << shift;
  mask |= 255u << shift;
  TOPK_SYNC();
}

// Radix select among the elements of coarse bin `t` of `src` (every element when t < 0): finds
// the exact threshold fine key and how many elements equal to it to take, then emits. `need`
// >= 1 elements are still to be emitted from bin t. The first pass also finds the bin's key span
// (in sh.scan[0..1], free between threshold searches): a bin of one key (all-equal rows, heavy
// ties) then has every digit resolved, and one pass emits it (two passes over src, not five).
template <typename Src>
__device__ static inline void topk_refine_emit(TopkShared& sh, const Src& src, int t,
                                               int need, int* out, const TopkTransform& tr) {
  topk_u32 prefix = 0u, mask = 0u;
  topk_u32* const span = reinterpret_cast<topk_u32*>(sh.scan);
  for (int shift = 24; shift >= 0; shift -= 8) {
    topk_digit_hist(sh, src, t, mask, prefix, shift, shift == 24 ? span : nullptr);
    if (shift == 24) {
      const topk_u32 lo = span[0], hi = span[1];
      TOPK_SYNC();             // every thread has read the span before the search reuses sh.scan
      if (lo == hi) {          // block-uniform: one key, none above it in the bin
        prefix = lo;
        mask = 0xFFFFFFFFu;
        for (int i = 5; i <= 8; ++i) TOPK_STAMP(sh, i);   // the passes it saves (profile builds)
        break;
      }
    }
    topk_find_threshold(sh, 256, need);
    topk_digit_take(sh, need, prefix, mask, shift);
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

// A list of n (index, canonical bits) pairs: its `need` largest to the output (slots from
// sh.out_pos), ranked where the list is short (at most TOPK_RANK_MAX), radix-refined otherwise.
// All threads call it.
__device__ static inline void topk_list_emit(TopkShared& sh, topk_u32* list, int n, int need, int* out,
                                             const TopkTransform& tr) {
  if (n <= TOPK_RANK_MAX) {
    topk_rank_emit(sh, list, n, need, out, tr);
    return;
  }
  TopkListSrc ls;
  ls.p = list;
  ls.n = n;
  topk_refine_emit(sh, ls, -1, need, out, tr);
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
  if (op.mode == 0) topk_span_merge(&TOPK_NMIN(sh), &TOPK_NMAX(sh), op.kmin, op.kmax);
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
  topk_list_emit(sh, cand, sh.cand_n, op.need, out, tr);
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
  const int n = sh.cand_n;
  if (n <= TOPK_CAP) {
    topk_list_emit(sh, cand, n, need_in_bin, out, tr);    // every candidate is in bin t
    if (n <= TOPK_RANK_MAX) for (int i = 5; i <= 8; ++i) TOPK_STAMP(sh, i);   // ranked: no radix pass
  } else {                         // more than `count` (a lower bound): narrow, bins > t emitted
    TOPK_SYNC();
    topk_narrow_finish(sh, cand, src, t, n, need_in_bin, true, out, tr);
  }
}

