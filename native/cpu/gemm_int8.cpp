// The int8 product of precision 'int8' (gemm_int8.h has the math): dynamic quantization as
// onnxruntime's and PyTorch's quantize_dynamic, int32 sums, dequantize + bias + activation fused.
//   Activations: per row m, asymmetric u8 as onnxruntime's DynamicQuantizeLinear computes it for a
//   whole tensor: lo = min(0, min_k x), hi = max(0, max_k x), a_m = (hi − lo) / 255 (1 when hi = lo),
//   z_m = round(−lo / a_m), xq = clamp(round(x / a_m) + z_m, 0, 255). Asymmetric u8 because the
//   int8 dot-product instruction, vpdpbusd, multiplies u8 by s8, and because it spends all 256 levels
//   on the row's range (a GELU output lies mostly above 0); the zero point costs one correction per
//   output, −z_m · Σ_k q[n, k] (the column sums are stored with the weights: oneDNN's and
//   onnxruntime's compensation term). Weights: symmetric int8 per output channel (native/ops/packed.h).
//   Saturation: vpdpbusd adds its four u8 × s8 products into the int32 lane exactly (its saturating
//   form vpdpbusds is not used, and |Σ| ≤ 255 · 127 · K < 2³¹ for K ≤ kMaxInt8K). The AVX2 path does
//   not use vpmaddubsw, whose int16 pair sums saturate for u8 × s8 (2 · 255 · 127 > 32767, the flaw
//   onnxruntime documents for its AVX2 u8s8 kernels): both operands are int16 (the activations
//   quantized straight to int16, the weights widened once per call) and vpmaddwd forms int32 pair
//   sums, exactly. So every variant computes the same int32 sums; only the float epilogue's rounding
//   (FMA contraction) may differ.
// Layout: xq [Mp, K4] row-major, u8 (int16 on the avx2 kernels) (Mp = M rounded up to 12 rows, zero
// rows and columns past M, K), row scales a [Mp] and zero points z [Mp] in the calling thread's
// gemm_pack scratch; the weights' 32-column panels [K4 / 4][32][4] (the int8 packing), and on the
// avx2 kernels their int16 copy [K4 / 2][32][2] (k pairs) in the same scratch. Tiles, per variant:
//   avx512_vnni (this file's NF_ISA 2 pass, its own namespace, run only where CPUID reports
//     AVX-512 VNNI): 6 rows x 64 columns (two panels; one at the end of a task's panels), 24 zmm
//     int32 accumulators, one vpdpbusd per row and 16 columns per 4 k, the row's 4 bytes broadcast.
//   amx (the avx512_vnni pass, where the CPU has AMX-INT8 and Linux grants the tile state: int8_amx):
//     32 rows x 32 columns (one panel), four 16 x 16 int32 tiles, one tdpbusd per tile and 64 k (the
//     u8 x s8 products of vpdpbusd, summed the same way: the same int32 sums); xq rows then 64-byte
//     whole (ldq) and 16-row whole; the epilogue 8 rows x 32 columns at a time.
//   avx2 (also the avx512 variant's on a CPU without VNNI): 4 x 16, 8 ymm int32 accumulators, one
//     vpmaddwd + vpaddd per row and 8 columns per 2 k, the row's int16 pair broadcast. (6 rows need
//     16 ymm registers and GCC then spills accumulators on every k step.)
//   scalar: 4 x 8, int32 arithmetic.
// Threads: the row blocks (rows · K4 about 192 KiB, in L2) times the 32-column panels, panel fastest,
// in the pool's chunks (about 4 a thread); a panel (K4 · 32 bytes) serves every row tile of its block.
// Dimension key: M rows, N output features, K input features, K4 = 4·⌈K / 4⌉.
#include "gemm_int8.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <string>
#include <type_traits>
#include <vector>

#include "gemm.h"
#include "simd_probe.h"
#include "../core/allocator.h"
#include "../core/threadpool.h"
#include "../ops/packed.h"
#if NF_ISA == 2
#define NF_ISA_TARGET_EXTRA ",avx512vnni"  // clang's target attribute (isa.h) with VNNI for this file
#endif
#include "isa.h"

#if NF_ISA == 2
#define NF_INT8_NS avx512_vnni
#if NF_X86
// VNNI on top of isa.h's AVX-512 target (clang gets it through NF_ISA_TARGET_EXTRA above).
#ifndef __clang__
#pragma GCC target("avx512vnni")
#endif
#endif
#else
#define NF_INT8_NS NF_ISA_NS
#endif
// The AMX tiles, in the VNNI pass (NF_AMX_BUILD: not in the clang builds, which run the VNNI kernels
// on an AMX CPU too).
#if NF_ISA == 2 && NF_AMX_BUILD
#define NF_AMX 1
#pragma GCC target("amx-tile,amx-int8")
#else
#define NF_AMX 0
#endif

#if NF_ISA != 4  // the avx512bf16 variant runs avx512_vnni's (or avx2's) kernels: see gemm_int8 below
namespace nf::cpu::NF_INT8_NS {
#include "simd.h"
#include "activation_inl.h"

namespace {

// Per variant: the tile (MR rows x NT columns), its integer vectors vi of W int32 lanes, and the int32
// sums of a tile (dot_panels, dot_columns; dot_tile below calls them). They write the sums to memory
// and the epilogue, kept out of line, reads them back: with both inlined into one function GCC stored
// all 24 accumulators on every pass of the k loop (half the speed).
#if NF_ISA == 2 && NF_X86
constexpr int MR = 6, NT = 64;  // two panels
using xq_t = uint8_t;
using panel_t = int8_t;
using vi = __m512i;
inline vi vi_load(const int32_t* p) { return _mm512_loadu_si512(p); }
inline void vi_store(int32_t* p, vi x) { _mm512_storeu_si512(p, x); }
// W lanes of the exact int32 correction sums − z · colsum, as floats.
inline vf corrected(vi sums, int32_t z, vi colsum) {
  return _mm512_cvtepi32_ps(_mm512_sub_epi32(sums, _mm512_mullo_epi32(_mm512_set1_epi32(z), colsum)));
}
// out[r][n] = Σ_k xq[r, k] q[k, n] for the MR rows at xq (K4 apart) and the 32 columns of the panel
// at q0, then (kPanels 2) the 32 of the panel at q1: per 4 k, 2 · kPanels vector loads and MR
// broadcasts feed 2 · kPanels · MR vpdpbusd (6 x 64: 4 loads and 6 broadcasts a 24; 12 x 32 spent 12
// broadcasts on 24 and ran 7-8% slower).
template <int kPanels>
inline void dot_panels(const uint8_t* xq, int64_t K4, const int8_t* q0, const int8_t* q1, int32_t* out) {
  constexpr int V = 2 * kPanels;
  vi acc[MR][V];
#pragma GCC unroll 6
  for (int r = 0; r < MR; ++r)
#pragma GCC unroll 4
    for (int v = 0; v < V; ++v) acc[r][v] = _mm512_setzero_si512();
  for (int64_t k = 0; k < K4; k += 4, q0 += kInt8GroupBytes, q1 += kInt8GroupBytes) {
    vi b[V];
    b[0] = _mm512_loadu_si512(q0);
    b[1] = _mm512_loadu_si512(q0 + 64);
    if constexpr (kPanels == 2) {
      b[2] = _mm512_loadu_si512(q1);
      b[3] = _mm512_loadu_si512(q1 + 64);
    }
#pragma GCC unroll 6
    for (int r = 0; r < MR; ++r) {
      int32_t word;
      std::memcpy(&word, xq + r * K4 + k, sizeof word);
      const __m512i a = _mm512_set1_epi32(word);
#pragma GCC unroll 4
      for (int v = 0; v < V; ++v) acc[r][v] = _mm512_dpbusd_epi32(acc[r][v], a, b[v]);
    }
  }
#pragma GCC unroll 6
  for (int r = 0; r < MR; ++r)
#pragma GCC unroll 4
    for (int v = 0; v < V; ++v) vi_store(out + r * NT + v * W, acc[r][v]);
}
#elif NF_ISA == 1 && NF_X86
constexpr int MR = 4, NT = 16;
using xq_t = int16_t;      // the activations, stored widened: vpmaddwd multiplies int16 pairs
using panel_t = int16_t;   // the weights, widened per call (int8_widen)
using vi = __m256i;
inline vi vi_load(const int32_t* p) { return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)); }
inline void vi_store(int32_t* p, vi x) { _mm256_storeu_si256(reinterpret_cast<__m256i*>(p), x); }
inline vf corrected(vi sums, int32_t z, vi colsum) {
  return _mm256_cvtepi32_ps(_mm256_sub_epi32(sums, _mm256_mullo_epi32(_mm256_set1_epi32(z), colsum)));
}
// out[r][n] = Σ_k xq[r, k] q[k, n] for the MR int16 rows at xq (K4 apart) and the NT columns at qw
// (k pairs 64 int16 apart): per k pair and row, the row's pair broadcast and one vpmaddwd per 8
// columns into int32 (each lane the sum of two exact products), added to the accumulators.
inline void dot_columns(const int16_t* xq, int64_t K4, const int16_t* qw, int32_t* out) {
  vi acc[MR][2];
#pragma GCC unroll 4
  for (int r = 0; r < MR; ++r) acc[r][0] = acc[r][1] = _mm256_setzero_si256();
  for (int64_t k = 0; k < K4; k += 2, qw += 64) {
    const vi b0 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(qw));
    const vi b1 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(qw + 16));
#pragma GCC unroll 4
    for (int r = 0; r < MR; ++r) {
      int32_t pair;
      std::memcpy(&pair, xq + r * K4 + k, sizeof pair);
      const vi a = _mm256_set1_epi32(pair);
      acc[r][0] = _mm256_add_epi32(acc[r][0], _mm256_madd_epi16(a, b0));
      acc[r][1] = _mm256_add_epi32(acc[r][1], _mm256_madd_epi16(a, b1));
    }
  }
#pragma GCC unroll 4
  for (int r = 0; r < MR; ++r) {
    vi_store(out + r * NT, acc[r][0]);
    vi_store(out + r * NT + 8, acc[r][1]);
  }
}
#else
constexpr int MR = 4, NT = 8;
using xq_t = uint8_t;
using panel_t = int8_t;
struct vi {
  int32_t lane[W];
};
inline vi vi_load(const int32_t* p) {
  vi x;
  std::memcpy(x.lane, p, sizeof x.lane);
  return x;
}
inline void vi_store(int32_t* p, vi x) { std::memcpy(p, x.lane, sizeof x.lane); }
inline vf corrected(vi sums, int32_t z, vi colsum) {
  alignas(64) float t[W];
  for (int i = 0; i < W; ++i) t[i] = static_cast<float>(sums.lane[i] - z * colsum.lane[i]);
  return vload(t);
}
inline void dot_columns(const uint8_t* xq, int64_t K4, const int8_t* qp, int32_t* out) {
  int32_t sum[MR][NT] = {};
  for (int64_t k = 0; k < K4; k += 4, qp += kInt8GroupBytes)
    for (int r = 0; r < MR; ++r)
      for (int n = 0; n < NT; ++n)
        for (int j = 0; j < 4; ++j) sum[r][n] += int32_t(xq[r * K4 + k + j]) * int32_t(qp[n * 4 + j]);
  std::memcpy(out, sum, sizeof sum);
}
#endif
constexpr int NV = NT / W;  // vectors per tile row

// The tile's NT columns from `col` of panel p: in the int8 packing, or in int8_widen's int16 copy.
template <class P = panel_t>  // (a template, so that the other layout's branch is discarded)
const P* panel_columns(const Int8Call& c, int64_t p, int64_t col) {
  const int64_t panel = p * c.w.K4 * 32;  // either layout: K4 · 32 values a panel
  if constexpr (std::is_same_v<P, int16_t>) return c.wide + panel + col * 2;
  else return c.w.q + panel + col * 4;
}

// The tile's int32 sums at columns [j, min(j + NT, jend)) of the MR rows at xq, to out [MR][NT].
inline void dot_tile(const Int8Call& c, const xq_t* xq, int64_t j, int64_t jend, int32_t* out) {
#if NF_ISA == 2 && NF_X86
  const int8_t* q0 = panel_columns(c, j / 32, 0);  // (j starts a panel, and the tile spans two)
  if (j + 32 < jend) return dot_panels<2>(xq, c.w.K4, q0, panel_columns(c, j / 32 + 1, 0), out);
  dot_panels<1>(xq, c.w.K4, q0, q0, out);
#else
  (void)jend;
  dot_columns(xq, c.w.K4, panel_columns(c, j / 32, j % 32), out);
#endif
}

// The first n ≤ W lanes of q (integers in [0, 255]) at p, as xq_t.
inline void store_xq(xq_t* p, vf q, int n) {
#if NF_ISA == 2 && NF_X86
  const __m128i b = _mm512_cvtepi32_epi8(_mm512_cvtps_epi32(q));
  if (n == W) _mm_storeu_si128(reinterpret_cast<__m128i*>(p), b);
  else _mm_mask_storeu_epi8(p, tail_mask(n), b);
#elif NF_ISA == 1 && NF_X86
  const __m256i i = _mm256_cvtps_epi32(q);
  const __m128i w = _mm_packus_epi32(_mm256_castsi256_si128(i), _mm256_extracti128_si256(i, 1));
  if (n == W) {
    _mm_storeu_si128(reinterpret_cast<__m128i*>(p), w);
  } else {
    alignas(16) int16_t b[8];
    _mm_store_si128(reinterpret_cast<__m128i*>(b), w);
    std::memcpy(p, b, sizeof(int16_t) * n);
  }
#else
  float t[W];
  vstore(t, q);
  for (int i = 0; i < n; ++i) p[i] = static_cast<xq_t>(t[i]);
#endif
}

// Rows [m, m + mr) and columns [n0, n0 + nr) of y from the tile's int32 sums (acc [R][V · W], R rows of
// V vectors: the tile's MR x NT, or 8 rows of the AMX block's 32 columns), on registers as the float
// GEMM's epilogue: dequantize (the exact int32 correction, then one float product by a_m · s_n), bias,
// preact, then the activation over the whole tile at once (GELU with vnormcdf_reduced's Φ, its error far
// below int8's), store (rounded to bf16 with c.round). Every one of the R rows is computed (rows past
// mr are the next rows of xq, or its zero padding: m + R <= Mp). kFull: a whole tile (mr = R, nr = V · W)
// without preact, every vector moved unmasked and no test per vector (3-4% faster products at K 256).
template <Act A, int R = MR, int V = NV, bool kFull = false>
[[gnu::noinline]] void epilogue(const Int8Call& c, const int32_t* acc, int64_t m, int64_t n0, int mr, int nr) {
  const float* a = c.a + m;
  const int32_t* z = c.z + m;
  const float* s = c.w.scale + n0;  // scale and colsum are padded to whole panels: W lanes are readable
  const int32_t* colsum = c.w.colsum + n0;
  float* y = c.y + m * c.ldc + n0;
  float* pre = !kFull && c.preact ? c.preact + m * c.ldc + n0 : nullptr;
  const bool round = c.round;
  int width[V];
  vf bias[V], scale[V];
  vi cs[V];
  for (int v = 0; v < V; ++v) {  // (columns past the tile's nr, and their sums, are not read)
    width[v] = kFull ? W : std::clamp(nr - v * W, 0, W);
    bias[v] = c.b && width[v] > 0 ? vload_w(c.b + n0 + v * W, width[v]) : vzero();
    scale[v] = width[v] > 0 ? vload(s + v * W) : vzero();
    cs[v] = width[v] > 0 ? vi_load(colsum + v * W) : vi_load(colsum);
  }
  vf x[R][V];
#pragma GCC unroll 12
  for (int r = 0; r < R; ++r) {
    const vf ar = vset1(a[r]);
#pragma GCC unroll 8
    for (int v = 0; v < V; ++v) {
      x[r][v] = width[v] == 0 ? vzero()
                              : vadd(vmul(corrected(vi_load(acc + (r * V + v) * W), z[r], cs[v]), vmul(ar, scale[v])), bias[v]);
      if (pre && r < mr && width[v] > 0) vstore_w(pre + r * c.ldc + v * W, x[r][v], width[v]);
    }
  }
  act_tile<A, true>(x);
#pragma GCC unroll 12
  for (int r = 0; r < R; ++r) {
    if (r >= mr) break;
#pragma GCC unroll 8
    for (int v = 0; v < V; ++v) {
      const vf out = round ? vround_bf16(x[r][v]) : x[r][v];
      if (kFull) vstore(y + r * c.ldc + v * W, out);
      else if (width[v] > 0) vstore_w(y + r * c.ldc + v * W, out, width[v]);
    }
  }
}

// The epilogue of a tile of R rows and V vectors, in its kFull form where that applies.
template <Act A, int R = MR, int V = NV>
inline void store_sums(const Int8Call& c, const int32_t* acc, int64_t m, int64_t n0, int mr, int nr) {
  if (mr == R && nr == V * W && !c.preact) epilogue<A, R, V, true>(c, acc, m, n0, mr, nr);
  else epilogue<A, R, V>(c, acc, m, n0, mr, nr);
}

#if NF_AMX
// The AMX block: 32 rows x 32 columns (one panel) of int32 sums in four 16 x 16 tiles (0-3: rows
// 0-15 / 16-31 by columns 0-15 / 16-31), from two A tiles of xq (4, 5: 16 rows x 64 bytes, rows ldq
// apart) and two B tiles of the panel (6, 7: 16 k groups x 16 columns x 4 bytes, which is the int8
// packing's layout read 128 bytes a row, from the panel's column 0 and 16); one tdpbusd per C tile and
// 64 k, each A and B tile used twice. The last 16 rows of a block of 16 use tiles 0, 1, 4 and 6 only.
// Tile state is per thread: each call of amx_tiles configures it and releases it at the end.
#include "amx_inl.h"

struct Int8Product {  // (amx_block_sums' products)
  static void upper() {
    _tile_dpbusd(0, 4, 6);
    _tile_dpbusd(1, 4, 7);
  }
  static void lower() {
    _tile_dpbusd(2, 5, 6);
    _tile_dpbusd(3, 5, 7);
  }
};

// out [32][32] (or its first 16 rows: kRowTiles 1) = Σ_k xq[r, k] q[k, n] over the rows at xq (ldq
// apart, zero from K4 to the next multiple of 64) and the panel at q; its last k groups (K4 mod 64
// bytes a row) from `tail`, a copy padded with zero groups to 16 (the panel's own bytes past K4 are
// the next panel's, or past the packing's end).
template <int kRowTiles>
void amx_sums(const uint8_t* xq, int64_t ldq, const int8_t* q, const int8_t* tail, int64_t K4, int32_t* out) {
  const auto a_at = [&](int64_t s) { return xq + 64 * s; };
  const auto b_at = [&](int64_t s) { return K4 - 64 * s >= 64 ? q + 16 * s * kInt8GroupBytes : tail; };
  amx_block_sums<kRowTiles, Int8Product>((K4 + 63) / 64, a_at, ldq, b_at, kInt8GroupBytes, out, 32 * sizeof(int32_t));
}

// Rows [m0, m1) (16-row aligned, xq padded to whole 16 rows) and panels [p0, p1) of y.
template <Act A>
void amx_tiles(const Int8Call& c, int64_t m0, int64_t m1, int64_t p0, int64_t p1) {
  const int64_t K4 = c.w.K4;
  const uint8_t* xq = static_cast<const uint8_t*>(c.xq);
  alignas(64) int32_t acc[32 * 32];
  alignas(64) int8_t tail[16 * kInt8GroupBytes];
  amx_configure();
  for (int64_t p = p0; p < p1; ++p) {
    const int64_t j = 32 * p;
    const int nr = static_cast<int>(std::min<int64_t>(32, c.N - j));
    const int8_t* q = c.w.q + p * K4 * 32;
    amx_b_tail(q, K4 / 4, tail);  // (the panel's K4 / 4 groups of 128 bytes)
    for (int64_t m = m0; m < m1; m += 32) {
      const int rows = static_cast<int>(std::min<int64_t>(32, m1 - m));
      if (rows > 16) amx_sums<2>(xq + m * c.ldq, c.ldq, q, tail, K4, acc);
      else amx_sums<1>(xq + m * c.ldq, c.ldq, q, tail, K4, acc);
      for (int r = 0; r < rows; r += 8)
        store_sums<A, 8, 2>(c, acc + r * 32, m + r, j, std::min(8, rows - r), nr);
    }
  }
  _tile_release();
}
#endif

}  // namespace

void int8_quantize(const float* x, int64_t lda, int64_t K, int64_t K4, int64_t r0, int64_t r1, void* xq_out, float* scale,
                   int32_t* zero) {
  xq_t* xq = static_cast<xq_t*>(xq_out);
  for (int64_t r = r0; r < r1; ++r) {
    const float* row = x + r * lda;
    xq_t* q = xq + r * K4;
    vf lo = vzero(), hi = vzero();  // (the zero-filled tail lanes change neither: 0 is in the range)
    for (int64_t k = 0; k < K; k += W) {
      const vf v = K - k >= W ? vload(row + k) : vload_n(row + k, static_cast<int>(K - k));
      lo = vmin(lo, v);
      hi = vmax(hi, v);
    }
    const float l = -vhmax(vsub(vzero(), lo)), h = vhmax(hi);
    const float a = h > l ? (h - l) / 255.0f : 1.0f, inv = 1.0f / a;
    const float zf = std::clamp(std::nearbyint(-l * inv), 0.0f, 255.0f);
    const vf vinv = vset1(inv), vz = vset1(zf), v255 = vset1(255.0f);
    for (int64_t k = 0; k < K; k += W) {
      const int n = static_cast<int>(std::min<int64_t>(W, K - k));
      const vf v = n == W ? vload(row + k) : vload_n(row + k, n);
      store_xq(q + k, vmax(vmin(vadd(vround(vmul(v, vinv)), vz), v255), vzero()), n);
    }
    std::memset(q + K, 0, sizeof(xq_t) * (K4 - K));
    scale[r] = a;
    zero[r] = static_cast<int32_t>(zf);
  }
}

#if NF_ISA == 1 && NF_X86
void int8_widen(const Int8Weights& w, int64_t p0, int64_t p1, int16_t* wide) {
  // Per 8 columns of a k group (32 bytes: 4 columns a 128-bit lane, 4 k each): gather each column's
  // k 0-1 bytes, then its k 2-3 bytes, within the lanes; bring the two lanes' k 0-1 halves together
  // (and the k 2-3 halves); sign-extend each half to 16 int16.
  const __m256i by_pair = _mm256_setr_epi8(0, 1, 4, 5, 8, 9, 12, 13, 2, 3, 6, 7, 10, 11, 14, 15,  //
                                           0, 1, 4, 5, 8, 9, 12, 13, 2, 3, 6, 7, 10, 11, 14, 15);
  const int64_t K4 = w.K4;
  for (int64_t p = p0; p < p1; ++p) {
    const int8_t* src = w.q + p * K4 * 32;
    int16_t* dst = wide + p * K4 * 32;
    for (int64_t g = 0; g < K4 / 4; ++g, src += kInt8GroupBytes, dst += 128)
      for (int c = 0; c < 32; c += 8) {
        const __m256i v = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(src + c * 4));
        const __m256i halves = _mm256_permute4x64_epi64(_mm256_shuffle_epi8(v, by_pair), _MM_SHUFFLE(3, 1, 2, 0));
        _mm256_storeu_si256(reinterpret_cast<__m256i*>(dst + c * 2), _mm256_cvtepi8_epi16(_mm256_castsi256_si128(halves)));
        _mm256_storeu_si256(reinterpret_cast<__m256i*>(dst + 64 + c * 2),
                            _mm256_cvtepi8_epi16(_mm256_extracti128_si256(halves, 1)));
      }
  }
}
#endif

// The lane test's hook (simd_probe.h; test/simd.test.ts holds every variant to the definitions):
//   int8_dot_tile: arg[0] = K4, arg[1] = columns N (32 or 64; 0: 32); a = 12 rows of K4 bytes (u8
//     values as floats), b = N / 32 panels (each K4 / 4 groups of 32 x 4 bytes, s8 values as floats);
//     out [12][N] = Σ_k a[r][k] q[k][n], computed tile by tile with this variant's dot_tile.
//   int8_quantize: arg[0] = rows, arg[1] = K; a = x [rows, K]; out = xq [rows, K4] (as floats), then
//     the rows' scales, then their zero points.
void int8_probe(const SimdProbe& p, Status* status) {
  const std::string fn = p.fn;
  *status = Status::Ok();
  if (fn == "int8_dot_tile") {
    const int64_t K4 = p.arg[0], N = p.arg[1] ? p.arg[1] : 32;
    if (K4 < 4 || K4 % 4 || (N != 32 && N != 64) || !p.in[0] || !p.in[1] || p.n < 12 * K4 || p.n < K4 * N ||
        p.out_n < 12 * N) {
      *status = Status::Error("simd_probe", "int8_dot_tile: needs K4 a positive multiple of 4, N 32 or 64, a, b of n >= 12 K4 and N K4, out of 12 N");
      return;
    }
    std::vector<xq_t> xq(12 * K4);
    std::vector<int8_t> q(K4 * N);
    for (int64_t i = 0; i < 12 * K4; ++i) xq[i] = static_cast<xq_t>(p.in[0][i]);
    for (int64_t i = 0; i < K4 * N; ++i) q[i] = static_cast<int8_t>(p.in[1][i]);
    Int8Call c{};
    c.w = Int8Weights{nullptr, nullptr, q.data(), K4};
#if NF_ISA == 1 && NF_X86
    std::vector<int16_t> wide(K4 * N);
    int8_widen(c.w, 0, N / 32, wide.data());
    c.wide = wide.data();
#endif
    alignas(64) int32_t acc[MR * NT];
    for (int64_t m = 0; m < 12; m += MR)
      for (int64_t j = 0; j < N; j += NT) {
        dot_tile(c, xq.data() + m * K4, j, N, acc);
        for (int r = 0; r < MR; ++r)
          for (int64_t n = 0; n < std::min<int64_t>(NT, N - j); ++n) p.out[(m + r) * N + j + n] = static_cast<float>(acc[r * NT + n]);
      }
    return;
  }
#if NF_AMX
  if (fn == "int8_amx_tile") {  // (simd_probe.cpp routes it here on an AMX CPU only)
    const int64_t K4 = p.arg[0], rows = p.arg[1];
    if (K4 < 4 || K4 % 4 || (rows != 16 && rows != 32) || !p.in[0] || !p.in[1] || p.n < rows * K4 || p.n < 32 * K4 ||
        p.out_n < rows * 32) {
      *status = Status::Error("simd_probe", "int8_amx_tile: needs K4 a positive multiple of 4, rows 16 or 32, a, b of n >= rows K4 and 32 K4, out of rows 32");
      return;
    }
    const int64_t ldq = (K4 + 63) / 64 * 64;
    std::vector<uint8_t> xq(rows * ldq, 0);
    std::vector<int8_t> q(K4 * 32);
    for (int64_t r = 0; r < rows; ++r)
      for (int64_t k = 0; k < K4; ++k) xq[r * ldq + k] = static_cast<uint8_t>(p.in[0][r * K4 + k]);
    for (int64_t i = 0; i < K4 * 32; ++i) q[i] = static_cast<int8_t>(p.in[1][i]);
    alignas(64) int32_t acc[32 * 32];
    alignas(64) int8_t tail[16 * kInt8GroupBytes];
    amx_b_tail(q.data(), K4 / 4, tail);
    amx_configure();
    if (rows == 32) amx_sums<2>(xq.data(), ldq, q.data(), tail, K4, acc);
    else amx_sums<1>(xq.data(), ldq, q.data(), tail, K4, acc);
    _tile_release();
    for (int64_t i = 0; i < rows * 32; ++i) p.out[i] = static_cast<float>(acc[i]);
    return;
  }
#endif
  if (fn == "int8_quantize") {
    const int64_t rows = p.arg[0], K = p.arg[1], K4 = (K + 3) / 4 * 4;
    if (rows < 1 || K < 1 || !p.in[0] || p.n < rows * K || p.out_n < rows * (K4 + 2)) {
      *status = Status::Error("simd_probe", "int8_quantize: needs rows, K >= 1, a of rows K, out of rows (K4 + 2)");
      return;
    }
    std::vector<xq_t> xq(rows * K4);
    std::vector<float> a(rows);
    std::vector<int32_t> z(rows);
    int8_quantize(p.in[0], K, K, K4, 0, rows, xq.data(), a.data(), z.data());
    for (int64_t i = 0; i < rows * K4; ++i) p.out[i] = xq[i];
    for (int64_t r = 0; r < rows; ++r) p.out[rows * K4 + r] = a[r], p.out[rows * (K4 + 1) + r] = static_cast<float>(z[r]);
    return;
  }
  *status = Status::Error("simd_probe", "no helper named '" + fn + "'");
}

namespace {

template <Act A>
void tiles(const Int8Call& c, int64_t m0, int64_t m1, int64_t p0, int64_t p1) {
  const int64_t K4 = c.w.K4, jend = std::min(c.N, 32 * p1);
  const xq_t* xq = static_cast<const xq_t*>(c.xq);
  alignas(64) int32_t acc[MR * NT];
  for (int64_t j = 32 * p0; j < jend; j += NT) {
    const int nr = static_cast<int>(std::min<int64_t>(NT, jend - j));
    for (int64_t m = m0; m < m1; m += MR) {
      const int mr = static_cast<int>(std::min<int64_t>(MR, m1 - m));
      for (int r = 0; r < mr; ++r) {  // the tile of y, on its way to L1 while the k loop runs
        __builtin_prefetch(c.y + (m + r) * c.ldc + j, 1);
        __builtin_prefetch(c.y + (m + r) * c.ldc + j + nr - 1, 1);
      }
      dot_tile(c, xq + m * K4, j, jend, acc);
      store_sums<A>(c, acc, m, j, mr, nr);
    }
  }
}

}  // namespace

void int8_tiles(const Int8Call& c, int64_t m0, int64_t m1, int64_t p0, int64_t p1) {
  with_act(c.act, [&](auto a) {
#if NF_AMX
    if (c.amx) return amx_tiles<decltype(a)::value>(c, m0, m1, p0, p1);
#endif
    tiles<decltype(a)::value>(c, m0, m1, p0, p1);
  });
}

}  // namespace nf::cpu::NF_INT8_NS
#endif

#ifdef NF_ISA_PRIMARY
namespace nf::cpu {

namespace {

constexpr int64_t kRowPad = 12;              // every variant's MR divides it
constexpr int64_t kAmxRowPad = 16;           // the AMX tiles' rows
constexpr int64_t kRowBlockBytes = 192 << 10;  // xq rows of one row block

int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

}  // namespace

Int8Kernels int8_kernels(Isa isa) {
  static const bool vnni = cpu_has_avx512_vnni();
  static const bool amx = vnni && cpu_has_amx_int8();
  if (!NF_X86 || isa == Isa::scalar) return Int8Kernels::scalar;
  if (isa_rank(isa) < isa_rank(Isa::avx512) || !vnni) return Int8Kernels::avx2;
  return amx ? Int8Kernels::amx : Int8Kernels::vnni;
}

const char* int8_kernels_name(Int8Kernels kernels) {
  switch (kernels) {
    case Int8Kernels::amx: return "amx";
    case Int8Kernels::vnni: return "vnni";
    case Int8Kernels::avx2: return "avx2";
    default: return "scalar";
  }
}

Int8Weights int8_weights(const float* packed, int64_t N, int64_t K) {
  const int64_t Np = ops::packed_width(N);
  const float* body = packed + ops::kPackedHeader;
  return {body, reinterpret_cast<const int32_t*>(body + Np), reinterpret_cast<const int8_t*>(body + 2 * Np),
          (K + 3) / 4 * 4};
}

void quantize_weights(float* packed, const float* W, int64_t N, int64_t K) {
  const int32_t words[] = {ops::kPackedInt8Magic, -1, 32, static_cast<int32_t>((K + 3) / 4 * 4),
                           static_cast<int32_t>(N), static_cast<int32_t>(K),
                           static_cast<int32_t>(ops::Precision::int8)};
  std::memset(packed, 0, sizeof(float) * ops::kPackedHeader);
  std::memcpy(packed, words, sizeof words);
  const Int8Weights w = int8_weights(packed, N, K);
  const int64_t Np = ops::packed_width(N), K4 = w.K4;
  float* scale = const_cast<float*>(w.scale);
  int32_t* colsum = const_cast<int32_t*>(w.colsum);
  int8_t* q = const_cast<int8_t*>(w.q);
  parallel_for(Np / 32, [&](int64_t p0, int64_t p1) {
    for (int64_t p = p0; p < p1; ++p) {
      int8_t* panel = q + p * K4 * 32;
      std::memset(panel, 0, K4 * 32);
      for (int64_t n = 32 * p; n < 32 * (p + 1); ++n) {
        if (n >= N) {
          scale[n] = 0.0f;
          colsum[n] = 0;
          continue;
        }
        const float* row = W + n * K;
        float m = 0.0f;
        for (int64_t k = 0; k < K; ++k) m = std::max(m, std::abs(row[k]));
        const float s = m > 0.0f ? m / 127.0f : 1.0f;
        int32_t sum = 0;
        int8_t* column = panel + (n % 32) * 4;
        for (int64_t k = 0; k < K; ++k) {
          // round(W / s) to nearest even: lrint in the default rounding mode, one instruction
          // (cvtss2si; std::nearbyint is a libm call on the baseline x86-64 this code is built for).
          const int8_t v = static_cast<int8_t>(std::clamp<long>(std::lrint(row[k] / s), -127, 127));
          column[k / 4 * kInt8GroupBytes + k % 4] = v;
          sum += v;
        }
        scale[n] = s;
        colsum[n] = sum;
      }
    }
  });
}

bool gemm_int8(Isa isa, float* y, float* preact, const float* x, const float* W, const Int8Weights& given,
               const float* b, int64_t M, int64_t N, int64_t K, int64_t lda, int64_t ldc, ops::Act act,
               bool round_out) {
  if (M == 0 || N == 0) return true;
  Int8Weights w = given;
  float* own = nullptr;  // W quantized for this call
  if (!w) {
    own = static_cast<float*>(aligned_alloc64(sizeof(float) * ops::packed_int8_floats(N, K)));
    if (!own) return false;
    quantize_weights(own, W, N, K);
    w = int8_weights(own, N, K);
  }
  // Which kernels: x86 only has the avx2 and VNNI ones (another architecture's variants run the scalar ones).
  const Int8Kernels kernels = int8_kernels(isa);
  const bool amx = kernels == Int8Kernels::amx, vnni = amx || kernels == Int8Kernels::vnni, widen = kernels == Int8Kernels::avx2;
  // The scratch: row scales, zero points, xq (int16 values on the avx2 kernels; rows of whole 64-byte
  // tile rows and whole 16-row tiles for AMX), and for the avx2 kernels the weights widened to int16
  // pairs, 64-byte aligned.
  const int64_t K4 = w.K4, row_pad = amx ? kAmxRowPad : kRowPad, Mp = ceil_div(M, row_pad) * row_pad, panels = ceil_div(N, 32);
  const int64_t ldq = amx ? ceil_div(K4, 64) * 64 : K4;
  const int64_t xq_row = ldq * (widen ? 2 : 1), xq_end = 8 * Mp + Mp * xq_row, wide_at = ceil_div(xq_end, 64) * 64;
  auto* buffer = static_cast<char*>(
      thread_scratch(ScratchSlot::gemm_pack, widen ? wide_at + panels * K4 * 32 * 2 : xq_end));
  if (!buffer) {
    aligned_free(own);
    return false;
  }
  float* scale = reinterpret_cast<float*>(buffer);
  int32_t* zero = reinterpret_cast<int32_t*>(buffer + 4 * Mp);
  char* xq = buffer + 8 * Mp;
  int16_t* wide = widen ? reinterpret_cast<int16_t*>(buffer + wide_at) : nullptr;
  parallel_for(Mp, 16, [&](int64_t r0, int64_t r1) {
    const int64_t e = std::min(r1, M);
#if NF_X86
    if (vnni) avx512_vnni::int8_quantize(x, lda, K, ldq, r0, e, xq, scale, zero);
    else if (widen) avx2::int8_quantize(x, lda, K, ldq, r0, e, xq, scale, zero);
    else
#endif
      scalar::int8_quantize(x, lda, K, ldq, r0, e, xq, scale, zero);
    for (int64_t r = std::max(r0, M); r < r1; ++r) {  // the padding rows: zeros
      std::memset(xq + r * xq_row, 0, xq_row);
      scale[r] = 0.0f;
      zero[r] = 0;
    }
  });
#if NF_X86
  if (widen) parallel_for(panels, [&](int64_t p0, int64_t p1) { avx2::int8_widen(w, p0, p1, wide); });
#endif
  const Int8Call c{xq, ldq, scale, zero, w, wide, b, y, preact, M, N, ldc, act, round_out, amx};
  const int64_t mc = std::max<int64_t>(row_pad, kRowBlockBytes / xq_row / row_pad * row_pad);
  const int64_t blocks = ceil_div(M, mc), tasks = blocks * panels;
  // Tasks (row block, panel), claimed in the pool's chunks of about tasks / (4 threads): a row block is
  // usually short at its end (2,320 rows = 3 x 768 + 16), so whole row blocks a chunk (the old grain of
  // tasks / (2 threads)) left one of 2 threads with twice the other's rows (seed-stl10's K = 256
  // products ran at 55% of the VNNI peak on 2 threads, 71% on one; now 75-80%).
  parallel_for(tasks, 1, [&](int64_t t0, int64_t t1) {
    for (int64_t t = t0; t < t1;) {  // the panels of one row block at a time
      const int64_t ic = t / panels, p0 = t % panels, p1 = std::min(panels, p0 + (t1 - t));
      const int64_t m0 = ic * mc, m1 = std::min(M, m0 + mc);
#if NF_X86
      if (vnni) avx512_vnni::int8_tiles(c, m0, m1, p0, p1);
      else if (widen) avx2::int8_tiles(c, m0, m1, p0, p1);
      else
#endif
        scalar::int8_tiles(c, m0, m1, p0, p1);
      t += p1 - p0;
    }
  });
  aligned_free(own);
  return true;
}

}  // namespace nf::cpu
#endif
#include "isa_end.h"
