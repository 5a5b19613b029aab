// GEMM operand packing (native/cpu/gemm.cpp), per ISA: copies a block of op(A) or op(B) into
// P-row micro-panels, each [kc][P] (element (i, k) of the block at panel i / P, offset k * P + i % P),
// rows past n zeroed, so the micro-kernel always reads one layout whatever the transposes were.
//   k-major source (element (i, k) at src[k * ld + i]): one contiguous source row per k.
//   row-major source (element (i, k) at src[i * ld + k]): transposed 8 k by up to 8 rows at a time
//   in registers (transpose_8x8: AVX2 shuffles, which the AVX-512 variant uses too; NEON 4 x 4
//   blocks), element by element in the scalar variant, for the last kc % 8 and for a partial last
//   panel.
//   bf16 pairs (avx512bf16 only): panels of [⌈kc / 2⌉][P] 32-bit words, each holding bf16(element
//   (i, k)) in its low half and bf16(element (i, k + 1)) in its high half (vround_bf16's rounding;
//   an odd kc's last k paired with 0): what vdot_bf16 multiplies. pack_bf16_pair_rows makes one
//   row of pairs from two rows (k and k + 1 of a k-major source), pack_bf16_row pairs a row's
//   neighbours (its bf16 array: a row-major source, whose words are then transposed as floats);
//   pack_row_pairs and pack_rows do so for every row of a strided matrix (also the attention core's).
// Dimension key: n rows (M or N), kc the depth of one k block, ld the source's row stride.
// Include inside `namespace nf::cpu::NF_ISA_NS` after simd.h (needs <algorithm> and <cstring>).
// test/simd.test.ts checks every function here on every variant against the definition above.
#pragma once

// Packs rows [0, n) x depth [0, kc) of a k-major operand into P-row panels, each [kc][P] (rows
// past n zeroed): element (i, k) is src[k * ld + i]. That is op(A) when transA and op(B)ᵀ when B is
// not transposed: one contiguous source row per k feeds every panel.
template <int P>
void pack_k_major(float* dst, const float* src, int64_t ld, int64_t n, int64_t kc) {
  constexpr int64_t kAhead = 8;  // rows prefetched ahead of the copy
  for (int64_t k = 0; k < kc; ++k) {
    const float* s = src + k * ld;
    if (k + kAhead < kc)
      for (int64_t i = 0; i < n; i += 16) __builtin_prefetch(s + kAhead * ld + i);
    float* d = dst + k * P;
    int64_t i = 0;
    for (; i + P <= n; i += P, d += kc * P) std::memcpy(d, s + i, sizeof(float) * P);
    if (i < n) {
      std::memcpy(d, s + i, sizeof(float) * (n - i));
      std::memset(d + (n - i), 0, sizeof(float) * (P - (n - i)));
    }
  }
}

// Every vector variant has transpose_8x8; the scalar one copies element by element.
#define NF_HAS_TRANSPOSE_8X8 (NF_ISA != 0)

#if NF_ISA == 1 || NF_AVX512
// dst[c * ldd + r] = src[r * lds + c] for r < rows, c < 8: an 8 x 8 transpose in registers (AVX2;
// the AVX-512 variant uses it too), of `rows` source rows (8, 6 or 4; a constant once inlined)
// padded with zeros, storing only the first `rows` floats of each of the 8 output columns.
inline void transpose_8x8(float* dst, int64_t ldd, const float* src, int64_t lds, int rows) {
  __m256 r[8], t[8];
  for (int i = 0; i < 8; ++i) r[i] = i < rows ? _mm256_loadu_ps(src + i * lds) : _mm256_setzero_ps();
  for (int i = 0; i < 8; i += 2) {  // rows i, i+1 interleaved: (i,0 i+1,0 i,1 i+1,1 | i,4 ...)
    t[i] = _mm256_unpacklo_ps(r[i], r[i + 1]);
    t[i + 1] = _mm256_unpackhi_ps(r[i], r[i + 1]);
  }
  for (int i = 0; i < 8; i += 4) {  // rows i..i+3 of columns c, c+4 for c = 0, 1, 2, 3
    r[i] = _mm256_shuffle_ps(t[i], t[i + 2], _MM_SHUFFLE(1, 0, 1, 0));
    r[i + 1] = _mm256_shuffle_ps(t[i], t[i + 2], _MM_SHUFFLE(3, 2, 3, 2));
    r[i + 2] = _mm256_shuffle_ps(t[i + 1], t[i + 3], _MM_SHUFFLE(1, 0, 1, 0));
    r[i + 3] = _mm256_shuffle_ps(t[i + 1], t[i + 3], _MM_SHUFFLE(3, 2, 3, 2));
  }
  const auto store = [rows](float* d, __m256 col) {  // the first `rows` floats of a column
    if (rows == 8) {
      _mm256_storeu_ps(d, col);
      return;
    }
    _mm_storeu_ps(d, _mm256_castps256_ps128(col));
    if (rows == 6) _mm_storel_pi(reinterpret_cast<__m64*>(d + 4), _mm256_extractf128_ps(col, 1));
  };
  for (int c = 0; c < 4; ++c) {  // rows 0..3 from r[c], rows 4..7 from r[c + 4]
    store(dst + c * ldd, _mm256_permute2f128_ps(r[c], r[c + 4], 0x20));
    store(dst + (c + 4) * ldd, _mm256_permute2f128_ps(r[c], r[c + 4], 0x31));
  }
}
#elif NF_ISA == 3
// The same on NEON, as 4 x 4 blocks: rows rb..rb+3 (rb = 0, and 4 unless rows == 4; rows 6 and 7
// zeros when rows == 6) by columns cb..cb+3 (cb = 0, 4), each transposed with trn1/trn2 on 32-bit
// lanes, then on 64-bit halves; a block of rows 4, 5 stores 2 floats per column.
inline void transpose_8x8(float* dst, int64_t ldd, const float* src, int64_t lds, int rows) {
  for (int rb = 0; rb < rows; rb += 4) {
    const int n = rows - rb < 4 ? rows - rb : 4;  // 4, or 2 for rows 4, 5 of 6
    for (int cb = 0; cb < 8; cb += 4) {
      float32x4_t q[4];
      for (int i = 0; i < 4; ++i) q[i] = i < n ? vld1q_f32(src + (rb + i) * lds + cb) : vdupq_n_f32(0.0f);
      // t0 = (q0[0] q1[0] q0[2] q1[2]), t1 = (q0[1] q1[1] q0[3] q1[3]); t2, t3 likewise of q2, q3
      const float32x4_t t0 = vtrn1q_f32(q[0], q[1]), t1 = vtrn2q_f32(q[0], q[1]);
      const float32x4_t t2 = vtrn1q_f32(q[2], q[3]), t3 = vtrn2q_f32(q[2], q[3]);
      const auto lo = [](float32x4_t a, float32x4_t b) {  // (a[0] a[1] b[0] b[1])
        return vreinterpretq_f32_f64(vtrn1q_f64(vreinterpretq_f64_f32(a), vreinterpretq_f64_f32(b)));
      };
      const auto hi = [](float32x4_t a, float32x4_t b) {  // (a[2] a[3] b[2] b[3])
        return vreinterpretq_f32_f64(vtrn2q_f64(vreinterpretq_f64_f32(a), vreinterpretq_f64_f32(b)));
      };
      const float32x4_t col[4] = {lo(t0, t2), lo(t1, t3), hi(t0, t2), hi(t1, t3)};
      for (int c = 0; c < 4; ++c) {
        float* d = dst + (cb + c) * ldd + rb;
        if (n == 4) vst1q_f32(d, col[c]);
        else vst1_f32(d, vget_low_f32(col[c]));
      }
    }
  }
}
#endif

// Packs rows [0, n) x depth [0, kc) of a row-major operand (element (i, k) at src[i * ld + k]:
// op(A) when not transposed, op(B)ᵀ when transB) into P-row panels, each [kc][P], rows past n
// zeroed. Full panels are transposed 8 k at a time in registers, in groups of up to 8 rows (every
// vector variant); the scalar variant, the last kc % 8 and a partial last panel are copied element
// by element.
template <int P>
void pack_transposed(float* dst, const float* src, int64_t ld, int64_t n, int64_t kc) {
  for (int64_t i = 0; i < n; i += P, dst += kc * P) {  // P source rows per panel, contiguous in k
    const float* s = src + i * ld;
    if (i + P > n) {
      for (int64_t k = 0; k < kc; ++k)
        for (int r = 0; r < P; ++r) dst[k * P + r] = i + r < n ? s[r * ld + k] : 0.0f;
      continue;
    }
    const bool prefetch = i + 2 * P <= n;  // the next panel's rows, while this one is copied
    for (int64_t kb = 0; kb < kc; kb += 16) {
      if (prefetch)
        for (int r = 0; r < P; ++r) __builtin_prefetch(s + (P + r) * ld + kb);
      const int64_t ke = std::min(kc, kb + 16);
      int64_t k = kb;
#if NF_HAS_TRANSPOSE_8X8
      for (; k + 8 <= ke; k += 8)
#pragma GCC unroll 4
        for (int r = 0; r < P; r += 8) transpose_8x8(dst + k * P + r, P, s + r * ld + k, ld, std::min(8, P - r));
#endif
      for (; k < ke; ++k) {
#pragma GCC unroll 16
        for (int r = 0; r < P; ++r) dst[k * P + r] = s[r * ld + k];
      }
    }
  }
}

#if NF_BF16_DOT
// dst[0:n] = words j of bf16(lo[j]) in the low half and bf16(hi[j]) (0 without hi) in the high half:
// two rows of n floats as one row of pairs (dst may be lo: each vector is read before it is written).
inline void pack_bf16_pair_rows(float* dst, const float* lo, const float* hi, int64_t n) {
  // vcvtne2ps2bf16(hi, lo) puts lo's 16 conversions below hi's; this permutation of 16-bit words
  // interleaves them: word j of the result is lo_j | hi_j << 16.
  const __m512i interleave = _mm512_set_epi32(0x001F000F, 0x001E000E, 0x001D000D, 0x001C000C, 0x001B000B, 0x001A000A,
                                              0x00190009, 0x00180008, 0x00170007, 0x00160006, 0x00150005, 0x00140004,
                                              0x00130003, 0x00120002, 0x00110001, 0x00100000);
  const auto pair = [&](__m512 l, __m512 h) {
    return _mm512_permutexvar_epi16(interleave, reinterpret_cast<__m512i>(_mm512_cvtne2ps_pbh(h, l)));
  };
  int64_t j = 0;
  for (; j + W <= n; j += W)  // (whole vectors unmasked: masked moves are slow on AMD Zen)
    _mm512_storeu_si512(dst + j, pair(_mm512_loadu_ps(lo + j), hi ? _mm512_loadu_ps(hi + j) : _mm512_setzero_ps()));
  if (j < n) {  // the last, partial vector
    const __mmask16 m = tail_mask(int(n - j));
    const __m512 h = hi ? _mm512_maskz_loadu_ps(m, hi + j) : _mm512_setzero_ps();
    _mm512_mask_storeu_epi32(dst + j, m, pair(_mm512_maskz_loadu_ps(m, lo + j), h));
  }
}

// dst[0:⌈n / 2⌉] = the row src[0:n] as bf16 pairs of neighbours: word j holds bf16(src[2j]) low and
// bf16(src[2j + 1]) (0 past n) high, the bf16 array of the row. dst may be src (each vector of src
// is read before the half as long stretch of dst it becomes is written, at or below it).
inline void pack_bf16_row(float* dst, const float* src, int64_t n) {
  int64_t i = 0;
  for (; i + W <= n; i += W) {  // (whole vectors unmasked: masked moves are slow on AMD Zen)
    const __m256i h = reinterpret_cast<__m256i>(_mm512_cvtneps_pbh(_mm512_loadu_ps(src + i)));
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(dst + i / 2), h);
  }
  if (i < n) {  // the last, partial vector
    const int k = int(n - i);
    const __m256i h = reinterpret_cast<__m256i>(_mm512_cvtneps_pbh(_mm512_maskz_loadu_ps(tail_mask(k), src + i)));
    _mm256_mask_storeu_epi32(dst + i / 2, static_cast<__mmask8>((1u << ((k + 1) / 2)) - 1u), h);
  }
}

// dst row r / 2 (ldd apart) = rows r and r + 1 of src (lds apart; a missing last one: zeros) as one
// row of n bf16 pairs (pack_bf16_pair_rows), for the rows < rows: a matrix paired along its rows. dst
// may be src (row r / 2 is written after rows r, r + 1 are read).
inline void pack_row_pairs(float* dst, int64_t ldd, const float* src, int64_t lds, int64_t rows, int64_t n) {
  for (int64_t r = 0; r < rows; r += 2)
    pack_bf16_pair_rows(dst + r / 2 * ldd, src + r * lds, r + 1 < rows ? src + (r + 1) * lds : nullptr, n);
}

// dst row r (ldd apart) = row r of src (lds apart) as ⌈n / 2⌉ pairs of neighbours (pack_bf16_row),
// for r < rows: a matrix paired along its columns (dst may be src).
inline void pack_rows(float* dst, int64_t ldd, const float* src, int64_t lds, int64_t rows, int64_t n) {
  for (int64_t r = 0; r < rows; ++r) pack_bf16_row(dst + r * ldd, src + r * lds, n);
}

// The same three from bfloat16 storage (ops::bf16 bits; the values are bf16 already, so pairing is
// copying): pack_rows_bf16 as pack_rows (a row's bits as they lie, the high half of an odd n's last
// word zeroed), pack_bf16_pair_rows_bf16 as pack_bf16_pair_rows (word j = lo[j] | hi[j] << 16),
// pack_row_pairs_bf16 as pack_row_pairs.
inline void pack_rows_bf16(float* dst, int64_t ldd, const uint16_t* src, int64_t lds, int64_t rows, int64_t n) {
  for (int64_t r = 0; r < rows; ++r) {
    uint16_t* d = reinterpret_cast<uint16_t*>(dst + r * ldd);
    std::memcpy(d, src + r * lds, sizeof(uint16_t) * n);
    if (n % 2) d[n] = 0;
  }
}
inline void pack_bf16_pair_rows_bf16(float* dst, const uint16_t* lo, const uint16_t* hi, int64_t n) {
  const auto pair = [&](__m256i l, __m256i h) {  // word j = l_j | h_j << 16
    return _mm512_or_si512(_mm512_cvtepu16_epi32(l), _mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16));
  };
  int64_t j = 0;
  for (; j + W <= n; j += W) {  // (whole vectors unmasked: masked moves are slow on AMD Zen)
    const __m256i l = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(lo + j));
    const __m256i h = hi ? _mm256_loadu_si256(reinterpret_cast<const __m256i*>(hi + j)) : _mm256_setzero_si256();
    _mm512_storeu_si512(dst + j, pair(l, h));
  }
  if (j < n) {  // the last, partial vector
    const __mmask16 m = tail_mask(int(n - j));
    const __m256i h = hi ? _mm256_maskz_loadu_epi16(m, hi + j) : _mm256_setzero_si256();
    _mm512_mask_storeu_epi32(dst + j, m, pair(_mm256_maskz_loadu_epi16(m, lo + j), h));
  }
}
inline void pack_row_pairs_bf16(float* dst, int64_t ldd, const uint16_t* src, int64_t lds, int64_t rows, int64_t n) {
  for (int64_t r = 0; r < rows; r += 2)
    pack_bf16_pair_rows_bf16(dst + r / 2 * ldd, src + r * lds, r + 1 < rows ? src + (r + 1) * lds : nullptr, n);
}
#endif

