// A small vector vocabulary shared by the kernels, so each kernel is written once and compiled
// for every ISA: `vf` holds W floats (16 for AVX-512, 8 for AVX2, 4 for NEON, 1 for scalar).
// Include inside `namespace nf::cpu::NF_ISA_NS` after isa.h.
// The scalar forms define every function; test/simd.test.ts holds each variant to them lane by
// lane (through native/cpu/simd_probe.cpp), so a function added here needs a case there.
// - Loads and stores are unaligned-safe; the *_n forms handle a tail of n < W elements: vload_n
//   zero-fills lanes n and up, vstore_n leaves memory past n untouched (tail_mask: the first n lanes).
// - Arithmetic is IEEE single precision, correctly rounded (vfma, vfnma: one rounding), ±0 and
//   denormals kept, so every variant returns the scalar form's bits, except which NaN comes out
//   of an operation with two NaN operands. vmax(a, b) = a > b ? a : b and vmin(a, b) = a < b ? a : b
//   (x86 maxps/minps; NEON's fmax/fmin differ, so the NEON forms compare and select): b when
//   either is NaN, and b for ±0 against ∓0, so put an operand whose NaN must propagate second.
//   vselect_pos / vselect_lt pick b when the comparison meets a NaN. vround rounds to nearest,
//   ties to even. vpow2i(n) = 2^n for integral n in [-126, 127] (128: +inf).
//   vround_bf16(x) = x rounded to bfloat16 (the top 16 bits of a float) as a float, by the rule of
//   the AVX512_BF16 conversions (vcvtneps2bf16; Intel SDM convert_fp32_to_bfloat16): a normal x to
//   nearest, ties to even (one that rounds past the largest bf16 becomes ±inf); a zero or denormal
//   x to the zero of its sign (the conversion's DAZ); ±inf as is; a NaN quieted (mantissa bit 22 set)
//   and truncated. The avx512bf16 variant computes it with vcvtneps2bf16 itself.
// - vsum and vhmax reduce pairwise by halves: lane i with lane i + W/2 (i < W/2), then i with
//   i + W/4, ..., in float, with vmax's rule for vhmax; the order is part of the contract.
// - Transcendentals are polynomials built from the above (so they too give the scalar form's bits
//   on every variant); errors against the exact function, the maxima over every float input:
//     vexp: < 1.3 ulp for x in [-87.33, 88.37]; 0 below -87.3365 (results under FLT_MIN) and for
//       -inf; x above 88.3763 (+inf included) saturates at e^88.3763 ≈ 2.4e38, never +inf.
//     vnormcdf, the normal CDF Φ (Abramowitz & Stegun 7.1.26): |error| < 3.2e-7; in the lower tail
//       relative error < 4% down to x = −13 (Φ ≈ 6e-39); 0 below x ≈ −13.2.
//     vnormcdf_reduced, Φ for the reduced precisions (Abramowitz & Stegun 7.1.28): |error| < 1e-6,
//       no relative accuracy in the lower tail (Φ(−5) 5% off, Φ(−8) 5.5 times too large).
//     vtanh: |error| < 1.5e-7, absolute: the relative error grows as |x| → 0, where
//       1 − 2/(e^{2|x|} + 1) cancels (vtanh(1e-30) = 0).
//   All four return NaN for NaN.
#pragma once

#if NF_AVX512
using vf = __m512;
constexpr int W = 16;
inline vf vzero() { return _mm512_setzero_ps(); }
inline vf vset1(float x) { return _mm512_set1_ps(x); }
inline vf vload(const float* p) { return _mm512_loadu_ps(p); }
inline void vstore(float* p, vf v) { _mm512_storeu_ps(p, v); }
inline __mmask16 tail_mask(int n) { return static_cast<__mmask16>((1u << n) - 1u); }
inline vf vload_n(const float* p, int n) { return _mm512_maskz_loadu_ps(tail_mask(n), p); }
inline void vstore_n(float* p, vf v, int n) { _mm512_mask_storeu_ps(p, tail_mask(n), v); }
inline vf vadd(vf a, vf b) { return _mm512_add_ps(a, b); }
inline vf vsub(vf a, vf b) { return _mm512_sub_ps(a, b); }
inline vf vmul(vf a, vf b) { return _mm512_mul_ps(a, b); }
inline vf vdiv(vf a, vf b) { return _mm512_div_ps(a, b); }
inline vf vmax(vf a, vf b) { return _mm512_max_ps(a, b); }
inline vf vmin(vf a, vf b) { return _mm512_min_ps(a, b); }
inline vf vfma(vf a, vf b, vf c) { return _mm512_fmadd_ps(a, b, c); }   // a*b + c
inline vf vfnma(vf a, vf b, vf c) { return _mm512_fnmadd_ps(a, b, c); } // c - a*b
inline vf vabs(vf a) { return _mm512_abs_ps(a); }
inline vf vsqrt(vf a) { return _mm512_sqrt_ps(a); }
inline vf vround(vf a) { return _mm512_roundscale_ps(a, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC); }
inline float vsum(vf a) {
  __m256 h = _mm256_add_ps(_mm512_castps512_ps256(a), _mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(a), 1)));
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(h), _mm256_extractf128_ps(h, 1));
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  return _mm_cvtss_f32(_mm_add_ss(s, _mm_movehdup_ps(s)));
}
inline float vhmax(vf a) {
  __m256 h = _mm256_max_ps(_mm512_castps512_ps256(a), _mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(a), 1)));
  __m128 s = _mm_max_ps(_mm256_castps256_ps128(h), _mm256_extractf128_ps(h, 1));
  s = _mm_max_ps(s, _mm_movehl_ps(s, s));
  return _mm_cvtss_f32(_mm_max_ss(s, _mm_movehdup_ps(s)));
}
// where(c > 0) a else b, and where(c < d) a else b
inline vf vselect_pos(vf c, vf a, vf b) { return _mm512_mask_blend_ps(_mm512_cmp_ps_mask(c, vzero(), _CMP_GT_OQ), b, a); }
inline vf vselect_lt(vf c, vf d, vf a, vf b) { return _mm512_mask_blend_ps(_mm512_cmp_ps_mask(c, d, _CMP_LT_OQ), b, a); }
// Bitwise m ? mag : sgn with m = 0x7fffffff: ternarylogic's result bit is imm[(a << 2) | (b << 1) | c]
// for bits a, b, c of its three operands, so `a ? b : c` is the truth table 0b11001010 = 0xca.
inline vf vcopysign(vf mag, vf sgn) {
  const __m512i m = _mm512_set1_epi32(0x7fffffff);
  return _mm512_castsi512_ps(_mm512_ternarylogic_epi32(m, _mm512_castps_si512(mag), _mm512_castps_si512(sgn), 0xca));
}
inline vf vpow2i(vf n) {  // 2^n for integral n in [-126, 127]
  __m512i i = _mm512_add_epi32(_mm512_cvtps_epi32(n), _mm512_set1_epi32(127));
  return _mm512_castsi512_ps(_mm512_slli_epi32(i, 23));
}
#if NF_BF16_DOT
// avx512bf16 only: lane i of a and b holds a pair of bf16 (element 2i in the low half, 2i + 1 in
// the high half, as pack_inl.h packs them); the result is acc + a_hi·b_hi + a_lo·b_lo, one
// fp32 FMA after the other (vdpbf16ps: bf16 denormals read as zero, denormal results flushed).
inline vf vdot_bf16(vf acc, vf a, vf b) {
  return _mm512_dpbf16_ps(acc, reinterpret_cast<__m512bh>(_mm512_castps_si512(a)), reinterpret_cast<__m512bh>(_mm512_castps_si512(b)));
}
inline vf vround_bf16(vf x) {  // vcvtneps2bf16, widened back to floats
  const __m256i h = reinterpret_cast<__m256i>(_mm512_cvtneps_pbh(x));
  return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16));
}
#else
inline vf vround_bf16(vf x) {
  const __m512i i = _mm512_castps_si512(x), top = _mm512_set1_epi32(int32_t(0xffff0000u));
  const __m512i e = _mm512_and_si512(i, _mm512_set1_epi32(0x7f800000));
  const __m512i odd = _mm512_and_si512(_mm512_srli_epi32(i, 16), _mm512_set1_epi32(1));
  __m512i r = _mm512_and_si512(_mm512_add_epi32(i, _mm512_add_epi32(odd, _mm512_set1_epi32(0x7fff))), top);
  const __mmask16 tiny = _mm512_cmpeq_epi32_mask(e, _mm512_setzero_si512());
  const __mmask16 special = _mm512_cmpeq_epi32_mask(e, _mm512_set1_epi32(0x7f800000));
  const __mmask16 nan = _mm512_cmp_ps_mask(x, x, _CMP_UNORD_Q);
  r = _mm512_mask_mov_epi32(r, tiny, _mm512_and_si512(i, _mm512_set1_epi32(int32_t(0x80000000u))));
  r = _mm512_mask_mov_epi32(r, special, _mm512_and_si512(i, top));
  r = _mm512_mask_or_epi32(r, nan, r, _mm512_set1_epi32(0x00400000));
  return _mm512_castsi512_ps(r);
}
#endif
#elif NF_ISA == 1
using vf = __m256;
constexpr int W = 8;
inline vf vzero() { return _mm256_setzero_ps(); }
inline vf vset1(float x) { return _mm256_set1_ps(x); }
inline vf vload(const float* p) { return _mm256_loadu_ps(p); }
inline void vstore(float* p, vf v) { _mm256_storeu_ps(p, v); }
inline __m256i tail_mask(int n) {
  return _mm256_cmpgt_epi32(_mm256_set1_epi32(n), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
}
inline vf vload_n(const float* p, int n) { return _mm256_maskload_ps(p, tail_mask(n)); }
inline void vstore_n(float* p, vf v, int n) { _mm256_maskstore_ps(p, tail_mask(n), v); }
inline vf vadd(vf a, vf b) { return _mm256_add_ps(a, b); }
inline vf vsub(vf a, vf b) { return _mm256_sub_ps(a, b); }
inline vf vmul(vf a, vf b) { return _mm256_mul_ps(a, b); }
inline vf vdiv(vf a, vf b) { return _mm256_div_ps(a, b); }
inline vf vmax(vf a, vf b) { return _mm256_max_ps(a, b); }
inline vf vmin(vf a, vf b) { return _mm256_min_ps(a, b); }
inline vf vfma(vf a, vf b, vf c) { return _mm256_fmadd_ps(a, b, c); }
inline vf vfnma(vf a, vf b, vf c) { return _mm256_fnmadd_ps(a, b, c); }
inline vf vabs(vf a) { return _mm256_andnot_ps(_mm256_set1_ps(-0.0f), a); }
inline vf vsqrt(vf a) { return _mm256_sqrt_ps(a); }
inline vf vround(vf a) { return _mm256_round_ps(a, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC); }
inline float vsum(vf a) {
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(a), _mm256_extractf128_ps(a, 1));
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  s = _mm_add_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}
inline float vhmax(vf a) {
  __m128 s = _mm_max_ps(_mm256_castps256_ps128(a), _mm256_extractf128_ps(a, 1));
  s = _mm_max_ps(s, _mm_movehl_ps(s, s));
  s = _mm_max_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}
inline vf vselect_pos(vf c, vf a, vf b) { return _mm256_blendv_ps(b, a, _mm256_cmp_ps(c, vzero(), _CMP_GT_OQ)); }
inline vf vselect_lt(vf c, vf d, vf a, vf b) { return _mm256_blendv_ps(b, a, _mm256_cmp_ps(c, d, _CMP_LT_OQ)); }
inline vf vcopysign(vf mag, vf sgn) {
  const vf s = _mm256_set1_ps(-0.0f);
  return _mm256_or_ps(_mm256_andnot_ps(s, mag), _mm256_and_ps(s, sgn));
}
inline vf vpow2i(vf n) {
  __m256i i = _mm256_add_epi32(_mm256_cvtps_epi32(n), _mm256_set1_epi32(127));
  return _mm256_castsi256_ps(_mm256_slli_epi32(i, 23));
}
inline vf vround_bf16(vf x) {
  const __m256i i = _mm256_castps_si256(x), top = _mm256_set1_epi32(int32_t(0xffff0000u));
  const __m256i e = _mm256_and_si256(i, _mm256_set1_epi32(0x7f800000));
  const __m256i odd = _mm256_and_si256(_mm256_srli_epi32(i, 16), _mm256_set1_epi32(1));
  __m256i r = _mm256_and_si256(_mm256_add_epi32(i, _mm256_add_epi32(odd, _mm256_set1_epi32(0x7fff))), top);
  const __m256i tiny = _mm256_cmpeq_epi32(e, _mm256_setzero_si256());
  const __m256i special = _mm256_cmpeq_epi32(e, _mm256_set1_epi32(0x7f800000));
  const __m256i nan = _mm256_castps_si256(_mm256_cmp_ps(x, x, _CMP_UNORD_Q));
  r = _mm256_blendv_epi8(r, _mm256_and_si256(i, _mm256_set1_epi32(int32_t(0x80000000u))), tiny);
  r = _mm256_blendv_epi8(r, _mm256_and_si256(i, top), special);
  r = _mm256_or_si256(r, _mm256_and_si256(nan, _mm256_set1_epi32(0x00400000)));
  return _mm256_castsi256_ps(r);
}
#elif NF_ISA == 3
using vf = float32x4_t;
constexpr int W = 4;
inline vf vzero() { return vdupq_n_f32(0.0f); }
inline vf vset1(float x) { return vdupq_n_f32(x); }
inline vf vload(const float* p) { return vld1q_f32(p); }
inline void vstore(float* p, vf v) { vst1q_f32(p, v); }
// NEON has no masked load or store: the tail goes through a zeroed buffer on the stack.
inline vf vload_n(const float* p, int n) {
  float t[4] = {0.0f, 0.0f, 0.0f, 0.0f};
  std::memcpy(t, p, sizeof(float) * static_cast<size_t>(n));
  return vld1q_f32(t);
}
inline void vstore_n(float* p, vf v, int n) {
  float t[4];
  vst1q_f32(t, v);
  std::memcpy(p, t, sizeof(float) * static_cast<size_t>(n));
}
inline vf vadd(vf a, vf b) { return vaddq_f32(a, b); }
inline vf vsub(vf a, vf b) { return vsubq_f32(a, b); }
inline vf vmul(vf a, vf b) { return vmulq_f32(a, b); }
inline vf vdiv(vf a, vf b) { return vdivq_f32(a, b); }
inline vf vmax(vf a, vf b) { return vbslq_f32(vcgtq_f32(a, b), a, b); }  // not vmaxq_f32 (NaN in, NaN out)
inline vf vmin(vf a, vf b) { return vbslq_f32(vcltq_f32(a, b), a, b); }
inline vf vfma(vf a, vf b, vf c) { return vfmaq_f32(c, a, b); }   // a*b + c, one rounding
inline vf vfnma(vf a, vf b, vf c) { return vfmsq_f32(c, a, b); }  // c - a*b, one rounding
inline vf vabs(vf a) { return vabsq_f32(a); }
inline vf vsqrt(vf a) { return vsqrtq_f32(a); }
inline vf vround(vf a) { return vrndnq_f32(a); }
inline float vsum(vf a) {
  const float32x2_t h = vadd_f32(vget_low_f32(a), vget_high_f32(a));  // lanes i + i+2
  return vget_lane_f32(h, 0) + vget_lane_f32(h, 1);
}
inline float vhmax(vf a) {
  const float32x2_t lo = vget_low_f32(a), hi = vget_high_f32(a);
  const float32x2_t h = vbsl_f32(vcgt_f32(lo, hi), lo, hi);
  const float x = vget_lane_f32(h, 0), y = vget_lane_f32(h, 1);
  return x > y ? x : y;
}
inline vf vselect_pos(vf c, vf a, vf b) { return vbslq_f32(vcgtq_f32(c, vzero()), a, b); }
inline vf vselect_lt(vf c, vf d, vf a, vf b) { return vbslq_f32(vcltq_f32(c, d), a, b); }
inline vf vcopysign(vf mag, vf sgn) { return vbslq_f32(vdupq_n_u32(0x7fffffffu), mag, sgn); }
inline vf vpow2i(vf n) {
  const int32x4_t i = vaddq_s32(vcvtnq_s32_f32(n), vdupq_n_s32(127));
  return vreinterpretq_f32_s32(vshlq_n_s32(i, 23));
}
inline vf vround_bf16(vf x) {
  const uint32x4_t i = vreinterpretq_u32_f32(x), top = vdupq_n_u32(0xffff0000u);
  const uint32x4_t e = vandq_u32(i, vdupq_n_u32(0x7f800000u));
  const uint32x4_t odd = vandq_u32(vshrq_n_u32(i, 16), vdupq_n_u32(1u));
  uint32x4_t r = vandq_u32(vaddq_u32(i, vaddq_u32(odd, vdupq_n_u32(0x7fffu))), top);
  const uint32x4_t tiny = vceqq_u32(e, vdupq_n_u32(0u));
  const uint32x4_t special = vceqq_u32(e, vdupq_n_u32(0x7f800000u));
  const uint32x4_t nan = vmvnq_u32(vceqq_f32(x, x));
  r = vbslq_u32(tiny, vandq_u32(i, vdupq_n_u32(0x80000000u)), r);
  r = vbslq_u32(special, vandq_u32(i, top), r);
  r = vorrq_u32(r, vandq_u32(nan, vdupq_n_u32(0x00400000u)));
  return vreinterpretq_f32_u32(r);
}
#else
using vf = float;
constexpr int W = 1;
inline vf vzero() { return 0.0f; }
inline vf vset1(float x) { return x; }
inline vf vload(const float* p) { return *p; }
inline void vstore(float* p, vf v) { *p = v; }
inline vf vload_n(const float* p, int n) { return n > 0 ? *p : 0.0f; }
inline void vstore_n(float* p, vf v, int n) { if (n > 0) *p = v; }
inline vf vadd(vf a, vf b) { return a + b; }
inline vf vsub(vf a, vf b) { return a - b; }
inline vf vmul(vf a, vf b) { return a * b; }
inline vf vdiv(vf a, vf b) { return a / b; }
inline vf vmax(vf a, vf b) { return a > b ? a : b; }
inline vf vmin(vf a, vf b) { return a < b ? a : b; }
inline vf vfma(vf a, vf b, vf c) { return std::fma(a, b, c); }
inline vf vfnma(vf a, vf b, vf c) { return std::fma(-a, b, c); }
inline vf vabs(vf a) { return std::fabs(a); }
inline vf vsqrt(vf a) { return std::sqrt(a); }
inline vf vround(vf a) { return std::nearbyint(a); }
inline float vsum(vf a) { return a; }
inline float vhmax(vf a) { return a; }
inline vf vselect_pos(vf c, vf a, vf b) { return c > 0.0f ? a : b; }
inline vf vselect_lt(vf c, vf d, vf a, vf b) { return c < d ? a : b; }
inline vf vcopysign(vf mag, vf sgn) { return std::copysign(mag, sgn); }
inline vf vpow2i(vf n) {  // the vector forms' bits: (round(n) + 127) << 23
  const uint32_t i = (static_cast<uint32_t>(std::lrint(n)) + 127u) << 23;
  float y;
  std::memcpy(&y, &i, sizeof y);
  return y;
}
inline vf vround_bf16(vf x) {
  uint32_t i;
  std::memcpy(&i, &x, sizeof i);
  const uint32_t e = i & 0x7f800000u;
  if (e == 0) i &= 0x80000000u;                                       // zero, denormal: signed zero
  else if (e == 0x7f800000u) i = (i & 0xffff0000u) | (x != x ? 0x00400000u : 0u);  // inf; NaN quieted
  else i = (i + 0x7fffu + ((i >> 16) & 1u)) & 0xffff0000u;           // to nearest, ties to even
  float y;
  std::memcpy(&y, &i, sizeof y);
  return y;
}
#endif

// The first n <= W lanes at p; n = W takes the plain load or store (masked moves are several times
// slower on AMD Zen).
inline vf vload_w(const float* p, int n) { return n == W ? vload(p) : vload_n(p, n); }
inline void vstore_w(float* p, vf x, int n) {
  if (n == W) vstore(p, x);
  else vstore_n(p, x, n);
}

// bfloat16 storage (ops::bf16: the upper 16 bits of a float, native/ops/schema.h; the activations of
// precision 'bf16'): vload_bf16_w widens the first n <= W values at p to floats (exactly; lanes past n
// zero), vstore_bf16_w stores the first n lanes of x rounded by vround_bf16 as bf16.
#if NF_AVX512
inline vf vload_bf16_w(const uint16_t* p, int n) {
  const __m256i h = n == W ? _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)) : _mm256_maskz_loadu_epi16(tail_mask(n), p);
  return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16));
}
inline void vstore_bf16_w(uint16_t* p, vf x, int n) {
#if NF_BF16_DOT  // vround_bf16's bits as vcvtneps2bf16 leaves them, not widened and narrowed again
  const __m256i h = reinterpret_cast<__m256i>(_mm512_cvtneps_pbh(x));
#else
  const __m256i h = _mm512_cvtepi32_epi16(_mm512_srli_epi32(_mm512_castps_si512(vround_bf16(x)), 16));
#endif
  if (n == W) _mm256_storeu_si256(reinterpret_cast<__m256i*>(p), h);
  else _mm256_mask_storeu_epi16(p, tail_mask(n), h);
}
#elif NF_ISA == 1
inline vf vload_bf16_w(const uint16_t* p, int n) {
  __m128i h;
  if (n == W) {
    h = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p));
  } else {
    uint16_t t[W] = {};
    std::memcpy(t, p, sizeof(uint16_t) * static_cast<size_t>(n));
    h = _mm_loadu_si128(reinterpret_cast<const __m128i*>(t));
  }
  return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16));
}
inline void vstore_bf16_w(uint16_t* p, vf x, int n) {
  const __m256i top = _mm256_srli_epi32(_mm256_castps_si256(vround_bf16(x)), 16);  // (each fits 16 bits: no saturation)
  const __m128i h = _mm256_castsi256_si128(_mm256_permute4x64_epi64(_mm256_packus_epi32(top, top), 0x08));
  if (n == W) {
    _mm_storeu_si128(reinterpret_cast<__m128i*>(p), h);
  } else {
    uint16_t t[W];
    _mm_storeu_si128(reinterpret_cast<__m128i*>(t), h);
    std::memcpy(p, t, sizeof(uint16_t) * static_cast<size_t>(n));
  }
}
#else
inline vf vload_bf16_w(const uint16_t* p, int n) {
  float t[W] = {};
  for (int i = 0; i < n && i < W; ++i) {
    const uint32_t bits = uint32_t(p[i]) << 16;
    std::memcpy(t + i, &bits, sizeof bits);
  }
  return vload(t);
}
inline void vstore_bf16_w(uint16_t* p, vf x, int n) {
  float t[W];
  vstore(t, vround_bf16(x));
  for (int i = 0; i < n && i < W; ++i) {
    uint32_t bits;
    std::memcpy(&bits, t + i, sizeof bits);
    p[i] = static_cast<uint16_t>(bits >> 16);
  }
}
#endif

// dst[0:n] = the bf16 values src[0:n] widened to floats (exactly), and src[0:n] stored as bf16 (rounded
// by vstore_bf16_w): rows of bf16 storage of any length.
inline void widen_bf16_n(float* dst, const uint16_t* src, int64_t n) {
  for (int64_t i = 0; i < n; i += W) {
    const int w = static_cast<int>(n - i < W ? n - i : W);
    vstore_w(dst + i, vload_bf16_w(src + i, w), w);
  }
}
inline void narrow_bf16_n(uint16_t* dst, const float* src, int64_t n) {
  for (int64_t i = 0; i < n; i += W) {
    const int w = static_cast<int>(n - i < W ? n - i : W);
    vstore_bf16_w(dst + i, vload_w(src + i, w), w);
  }
}

// dst[0:n] = vround_bf16(src[0:n]) (dst may be src).
inline void vround_bf16_n(float* dst, const float* src, int64_t n) {
  int64_t i = 0;
  for (; i + W <= n; i += W) vstore(dst + i, vround_bf16(vload(src + i)));
  if (i < n) vstore_n(dst + i, vround_bf16(vload_n(src + i, int(n - i))), int(n - i));
}

// acc + a·b lane by lane: fp32 values (vfma), or with kPairs (avx512bf16 only) bf16 pairs (vdot_bf16).
template <bool kPairs>
inline vf vdot_step(vf a, vf b, vf acc) {
#if NF_BF16_DOT
  if constexpr (kPairs) return vdot_bf16(acc, a, b);
#endif
  return vfma(a, b, acc);
}

// e^x. Cody-Waite range reduction x = n ln2 + r, |r| <= ln2/2, degree-6 polynomial for e^r.
inline vf vexp(vf x) {
  const vf hi = vset1(88.3762626647949f), lo = vset1(-87.3365447504f);
  vf xc = vmin(hi, x);  // NaN stays NaN (vmin returns its second operand then)
  vf n = vround(vmul(xc, vset1(1.44269504088896341f)));
  n = vmax(vset1(-126.0f), n);
  vf r = vfnma(n, vset1(0.693359375f), xc);
  r = vfnma(n, vset1(-2.12194440e-4f), r);
  vf p = vset1(1.9875691500e-4f);
  p = vfma(p, r, vset1(1.3981999507e-3f));
  p = vfma(p, r, vset1(8.3334519073e-3f));
  p = vfma(p, r, vset1(4.1665795894e-2f));
  p = vfma(p, r, vset1(1.6666665459e-1f));
  p = vfma(p, r, vset1(5.0000001201e-1f));
  p = vfma(p, vmul(r, r), vadd(r, vset1(1.0f)));
  vf y = vmul(p, vpow2i(n));
  return vselect_lt(x, lo, vzero(), y);  // underflow (and -inf) -> 0
}

// Φ(x) = ½ (1 + erf(x/√2)), the standard normal CDF, with erf from Abramowitz & Stegun 7.1.26
// (|error| < 1.5e-7) written as ½ erfc(|x|/√2) = t P(t) e^{-x²/2} (the ½ folded into P): that
// tail is used as is for x < 0 rather than as 1 − (1 − tail), which keeps its relative accuracy
// (about 3% even at x = −11, where Φ ≈ 1e-30) instead of rounding to 0 below x ≈ −5.4.
// vnormcdf_exp also returns that exponential, e = e^{-x²/2} (as e^{-z²}, z = |x|/√2): GELU's
// derivative Φ(x) + x φ(x) needs it for φ too, one exponential instead of two.
inline vf vnormcdf_exp(vf x, vf& e) {
  vf z = vmul(vabs(x), vset1(0.70710678118654752f));
  vf t = vdiv(vset1(1.0f), vfma(vset1(0.3275911f), z, vset1(1.0f)));
  vf p = vset1(0.5f * 1.061405429f);
  p = vfma(p, t, vset1(0.5f * -1.453152027f));
  p = vfma(p, t, vset1(0.5f * 1.421413741f));
  p = vfma(p, t, vset1(0.5f * -0.284496736f));
  p = vfma(p, t, vset1(0.5f * 0.254829592f));
  e = vexp(vfnma(z, z, vzero()));
  vf tail = vmul(vmul(p, t), e);
  return vselect_lt(x, vzero(), tail, vsub(vset1(1.0f), tail));
}
inline vf vnormcdf(vf x) {
  vf e;
  return vnormcdf_exp(x, e);
}

// Φ(x) for the GELU fused into the products of the reduced precisions ('int8', whose output is
// quantized per row next; 'bf16', rounded to 8 mantissa bits as the next product's input):
// erfc(z) ≈ (1 + a₁z + … + a₆z⁶)^−16 (Abramowitz & Stegun 7.1.28, |error| < 3e-7; the four
// squarings of fp32 make it < 1e-6), ½ erfc(|x|/√2) = Φ(−|x|). 17 operations to vnormcdf's 35 (no
// exponential), at the price of the lower tail's relative accuracy, which those precisions' steps
// (1/255 of a row's range, 2⁻⁸ relative) would not keep anyway.
inline vf vnormcdf_reduced(vf x) {
  const vf z = vmul(vabs(x), vset1(0.70710678118654752f));
  vf p = vset1(0.0000430638f);
  p = vfma(p, z, vset1(0.0002765672f));
  p = vfma(p, z, vset1(0.0001520143f));
  p = vfma(p, z, vset1(0.0092705272f));
  p = vfma(p, z, vset1(0.0422820123f));
  p = vfma(p, z, vset1(0.0705230784f));
  p = vfma(p, z, vset1(1.0f));
  vf t = vdiv(vset1(1.0f), p);
  t = vmul(t, t);
  t = vmul(t, t);
  t = vmul(t, t);
  const vf tail = vmul(vmul(t, t), vset1(0.5f));  // Φ(−|x|)
  return vselect_lt(x, vzero(), tail, vsub(vset1(1.0f), tail));
}

// tanh(x) = sign(x) (1 - 2 / (e^{2|x|} + 1)).
inline vf vtanh(vf x) {
  vf e = vexp(vmul(vmin(vset1(44.0f), vabs(x)), vset1(2.0f)));
  vf y = vsub(vset1(1.0f), vdiv(vset1(2.0f), vadd(e, vset1(1.0f))));
  return vcopysign(y, x);
}
