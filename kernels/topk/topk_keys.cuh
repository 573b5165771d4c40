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

