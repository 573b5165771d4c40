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

