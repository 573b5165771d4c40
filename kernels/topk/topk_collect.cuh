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

