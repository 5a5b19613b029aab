// Multi-head attention, forward and backward: QKV projection, a FlashAttention-2 style core, and
// the output projection.
// Math (per batch b and head h; scale = 1/sqrt(Dh)):
//   S = scale Q Kᵀ with blocked pairs set to -inf; P = softmax over each row of S (a row whose keys
//   are all blocked gives P = 0); O = (P ∘ Z) V, Z the dropout mask scaled by 1/(1-p);
//   out = proj(O of all heads side by side) = O Wprojᵀ + proj_bias.
//   Backward: Di = rowsum(dO ∘ O); dV = (P ∘ Z)ᵀ dO; dP = (dO Vᵀ) ∘ Z; dS = P ∘ (dP − Di);
//   dQ = scale dS K; dK = scale dSᵀ Q.
// Core: forward tasks are (b, h, chunk of queries): a chunk is split into blocks of at most kBQ
// queries, and keys are visited in tiles of kBK (each transposed once per chunk) with an
// online softmax (running row max m and sum l, the output rescaled when m grows), so no Tq x Tk
// matrix ever exists; lse = m + log l is saved and backward recomputes P = exp(S − lse) tile by
// tile. Backward tasks are (b, h): key tiles outer (so a task owns its dK, dV rows), query tiles
// inner (dQ rows accumulate). Causal tiles wholly above the diagonal are skipped. Every tile
// product is one micro-kernel, O += P V on rows (tile_accumulate), with K and V tiles transposed
// into scratch so keys lie along the vector lanes.
// Precision 'bf16' (native/ops/precision.h; the core does the same at 'int8' where core_pairs holds, whose
// projections are quantized instead): the projections' GEMMs take bf16-rounded inputs (gemm.cpp);
// their epilogues store Q, K, V rounded to bf16 (the saved qkv, or q and kv, and a decoding step's
// cache rows: as autocast's bf16 projections would give them), and the weights P ∘ Z are
// rounded before the product with V, so QKᵀ and PV take bf16 inputs with fp32 accumulation; the
// softmax, its sums and lse stay fp32. On avx512bf16 with AMX-BF16 tiles (core_amx: an Intel Xeon,
// which issues vdpbf16ps at half the FMA's rate) or where vdpbf16ps beats the FMA (bf16_dot_pays:
// Zen 4) those products run on bf16 pairs (core_pairs; tdpbf16ps tiles, or vdpbf16ps)
// (the key tile paired along the head dimension, unscaled, the scale applied in the softmax's
// exponent; the value tile paired along the keys; query rows and weights as pairs of neighbours),
// the other variants fp32 FMAs on the rounded values: the same function up to the order of fp32 sums.
// The backward's products (dO Vᵀ, Pᵀ dO, dS K, dSᵀ Q) read the rounded Q, K, V and dO, P, dS rounded
// (pairs: paired along each product's contraction), its scores recomputed as the forward's were.
// Projections: prepacked weights (qkvWeightPacked, projWeightPacked from packWeights), when given,
// replace the weights in the projections' GEMMs (cross-attention's K|V product reads the packed
// columns from D on when D starts a panel, else packs its rows of qkv_weight as without them).
// Layout: Q, K, V are read in place from the projection buffers with row strides (self-attention
// qkv [B, T, 3D] = Q | K | V per token; cross-attention q [B, Tq, D] and kv [B, Tk, 2D] = K | V;
// heads interleaved along D, [B, T, H, Dh]); O is ctx [B, Tq, D]; lse [B, H, Tq]; weights
// [B, H, Tq, Tk]. Dropout element ((b*H + h)*Tq + i)*Tk + j of the Philox stream (seed, offset).
// Dimension key: B batch, Tq/Tk query/key lengths, D model width, H heads, Dh = D/H head width.
#include "attention.h"

#include <algorithm>
#include <cstring>
#include <limits>

#include "../core/allocator.h"
#include "../core/philox.h"
#include "../core/threadpool.h"
#include "linear.h"
#include "packed.h"
#include "isa.h"

// AMX-BF16 tiles for the forward's bf16 pairs (see "The forward on AMX" below).
#if NF_BF16_DOT && NF_AMX_BUILD
#define NF_AMX_CORE 1
#pragma GCC target("amx-tile,amx-bf16")
#else
#define NF_AMX_CORE 0
#endif

namespace nf::cpu::NF_ISA_NS {
#include "simd.h"
#include "pack_inl.h"

namespace {

// Whether the core's bf16 products run on AMX-BF16 tiles (see the header).
bool core_amx() { return NF_AMX_CORE && cpu_has_amx_bf16(); }
// Whether the core's bf16 products multiply bf16 pairs: on AMX tiles, or by vdpbf16ps where it beats
// the FMA (see the header).
bool core_pairs() { return core_amx() || (NF_BF16_DOT && bf16_dot_pays()); }

constexpr int kBQ = 32;          // queries per tile
// Keys per tile, a multiple of every W: 80 takes T = 65 (a 32² image in 4² patches and the class
// token) in one tile, 145 in two and 197 in three, each tile one pass of the online softmax.
constexpr int kBK = 80;
constexpr float kNegInf = -std::numeric_limits<float>::infinity();

// Words of a row of bf16 pairs of Dh values in the core's buffers paired along d (query and dO rows;
// the key and value tiles' rows): ⌈Dh / 2⌉ rounded up to whole AMX steps of 16 pairs, the words past
// ⌈Dh / 2⌉ zero.
int64_t pair_words(int64_t Dh) { return ((Dh + 1) / 2 + 15) / 16 * 16; }
// Rows of a key or value tile paired along the keys (the forward's Vp, the backward's Kp): kBK / 2,
// rounded up to an AMX step.
constexpr int64_t kValuePairRows = (kBK / 2 + 15) / 16 * 16;

// Vectors of a score-tile row that hold keys, for a tile of nk keys: only these are computed, so
// a short last tile (T = 100: 80 + 20 keys) costs two vectors per row on AVX-512, not kBK / W.
int tile_vectors(int nk) { return (nk + W - 1) / W; }

// The factor the softmax still applies to a score tile: the scale with bf16 pairs (masked_scores
// leaves their S unscaled, saving a pass over it: the softmax's exponent is one FMA either way), 1
// otherwise. Running maxima are kept in S's units; lse is in scaled units as always.
float score_scale(const AttentionCoreDims& d, bool pairs) { return pairs ? d.scale : 1.0f; }

// Per-thread scratch (slot `tile`) of the core, in floats (the forward's chunks have at most Tq rows).
// (With bf16 pairs also the query rows (forward: a chunk's, backward: a block's), the value tile
// as pairs, and a tile's rows as pairs on their way to load_key_tile's transpose.)
// (With AMX 16 query rows more, 16 floats past the value tile and a block's P V: see forward_chunk.)
int64_t forward_scratch_floats(int64_t Dh, int64_t Tq) {
  const int64_t Dhp = pair_words(Dh);
  return std::max(Dh, Dhp) * kBK + kBQ * kBK + kBK + 2 * Tq + (Tq + 16) * Dhp + kValuePairRows * Dh + 16 +
         kBK * ((Dh + 1) / 2) + kBQ * ((Dh + 15) / 16 * 16);
}
int64_t backward_scratch_floats(int64_t Dh, int64_t Tq) {
  const int64_t Dhp = pair_words(Dh);
  return 2 * std::max(Dh, Dhp) * kBK + 2 * kBQ * kBK + kBK + Tq + kBQ * Dhp + kBQ * Dh + kBQ / 2 * kBK +
         kValuePairRows * Dh + 16 + kBK * ((Dh + 1) / 2) + kBK * 16 + kBK * ((Dh + 15) / 16 * 16);
}
// The backward's gradient buffer for the projections' outputs (slot `layer` of the calling thread):
// self-attention dqkv [B, T, 3D]; cross-attention dq [B, Tq, D] then dkv [B, Tk, 2D].
int64_t grad_floats(const AttentionDims& d) { return (d.B * d.Tq + 2 * d.B * d.Tk) * d.D; }

float dot(const float* a, const float* b, int64_t n) {
  vf acc = vzero();
  int64_t i = 0;
  for (; i + W <= n; i += W) acc = vfma(vload(a + i), vload(b + i), acc);
  if (i < n) acc = vfma(vload_n(a + i, int(n - i)), vload_n(b + i, int(n - i)), acc);
  return vsum(acc);
}

void scale_row(float* x, int64_t n, float s) {
  const vf vs = vset1(s);
  int64_t i = 0;
  for (; i + W <= n; i += W) vstore(x + i, vmul(vload(x + i), vs));
  if (i < n) vstore_n(x + i, vmul(vload_n(x + i, int(n - i)), vs), int(n - i));
}

// dst[c*ldd + r] = scale src[r*lds + c] for r < rows, c < cols; each dst row is zero-filled from
// rows to ldd. Whole 8 x 8 blocks are transposed in registers (transpose_8x8, every vector variant),
// the rest element by element; the scale follows, a vector at a time.
void transpose(float* dst, int64_t ldd, const float* src, int64_t lds, int64_t rows, int64_t cols, float scale) {
  int64_t r8 = 0, c8 = 0;  // the rows and columns of the whole blocks
#if NF_HAS_TRANSPOSE_8X8
  r8 = rows / 8 * 8, c8 = cols / 8 * 8;
  for (int64_t c = 0; c < c8; c += 8)
    for (int64_t r = 0; r < r8; r += 8) transpose_8x8(dst + c * ldd + r, ldd, src + r * lds + c, lds, 8);
#endif
  for (int64_t c = 0; c < cols; ++c) {
    float* t = dst + c * ldd;
    for (int64_t r = c < c8 ? r8 : 0; r < rows; ++r) t[r] = src[r * lds + c];
    std::memset(t + rows, 0, sizeof(float) * (ldd - rows));
    if (scale != 1.0f) scale_row(t, rows, scale);
  }
}

// Vectors of O a pass of accumulate_rows covers: R x NVec accumulators, NVec loads and a broadcast
// stay in registers (AVX-512: up to 24 + 5 + 1 of 32 zmm, so a score row of kBK = 80 keys is one
// pass; AVX2 and NEON 8 + 2 + 1, scalar likewise).
#if NF_AVX512
constexpr int kMaxV = 5;
#else
constexpr int kMaxV = 2;
#endif
// Rows of a pass of NVec vectors. AVX-512: 12, 8 or 4, the most that keep R x NVec <= 24 (a narrow O,
// such as a head of 32 columns in P V, dV, dK and dQ, would otherwise share each broadcast of P among
// 2 vectors and keep too few multiply-adds in flight; 12 leaves 8 rows of a 32-query block or of an
// 80-key tile to two passes of 4). The other variants: 4 (not measured otherwise).
template <int NVec>
constexpr int kPassRows = NF_AVX512 ? (12 * NVec <= 24 ? 12 : 8 * NVec <= 24 ? 8 : 4) : 4;

// O[r*ldo + 0:n] += Σ_{c < cols} P(r, c) V[c*ldv + 0:n] for r < R and the V vectors of columns from
// 0, the last wl <= W lanes wide (loaded and stored masked when short), P(r, c) = P[r*prs + c*pcs]
// (so P may be read transposed); kSet: O = the sum (the old O is not read); kPairs: P and V hold
// bf16 pairs (pack_inl.h) and c counts pairs. R rows at once share each load of V, V vectors each
// broadcast of P.
template <int R, int NVec, bool kSet, bool kPairs>
void accumulate_rows(float* O, int64_t ldo, const float* P, int64_t prs, int64_t pcs, int cols, const float* V,
                     int64_t ldv, int wl) {
  // (Every loop over r and v unrolled: an accumulator array indexed by a loop variable stays in
  // memory, and GCC then stores all of it on every pass of the c loop.)
  vf a[R][NVec];
#pragma GCC unroll 12
  for (int r = 0; r < R; ++r)
#pragma GCC unroll 5
    for (int v = 0; v < NVec; ++v) a[r][v] = kSet ? vzero() : vload_w(O + r * ldo + v * W, v == NVec - 1 ? wl : W);
  for (int c = 0; c < cols; ++c) {
    vf b[NVec];
#pragma GCC unroll 5
    for (int v = 0; v < NVec; ++v) b[v] = vload_w(V + c * ldv + v * W, v == NVec - 1 ? wl : W);
#pragma GCC unroll 12
    for (int r = 0; r < R; ++r) {
      const vf p = vset1(P[r * prs + c * pcs]);
#pragma GCC unroll 5
      for (int v = 0; v < NVec; ++v) a[r][v] = vdot_step<kPairs>(p, b[v], a[r][v]);
    }
  }
#pragma GCC unroll 12
  for (int r = 0; r < R; ++r)
#pragma GCC unroll 5
    for (int v = 0; v < NVec; ++v) vstore_w(O + r * ldo + v * W, a[r][v], v == NVec - 1 ? wl : W);
}

// accumulate_rows of one pass of NVec vectors over all `rows` rows: kPassRows<NVec> at a time, then
// 4, then 1.
template <int NVec, bool kSet, bool kPairs>
void accumulate_pass(float* O, int64_t ldo, const float* P, int64_t prs, int64_t pcs, int rows, int cols, const float* V,
                     int64_t ldv, int wl) {
  constexpr int R = kPassRows<NVec>;
  int r = 0;
  for (; r + R <= rows; r += R) accumulate_rows<R, NVec, kSet, kPairs>(O + r * ldo, ldo, P + r * prs, prs, pcs, cols, V, ldv, wl);
  if constexpr (R > 4)
    for (; r + 4 <= rows; r += 4) accumulate_rows<4, NVec, kSet, kPairs>(O + r * ldo, ldo, P + r * prs, prs, pcs, cols, V, ldv, wl);
  for (; r < rows; ++r) accumulate_rows<1, NVec, kSet, kPairs>(O + r * ldo, ldo, P + r * prs, prs, pcs, cols, V, ldv, wl);
}

// O[r*ldo + 0:n] += Σ_{c < cols} P[r*prs + c*pcs] V[c*ldv + 0:n] for r < rows (kSet: O = the
// sum; kPairs: bf16 pairs, c counting them): the one micro-kernel of every product in the core,
// in passes of kMaxV vectors of O's columns, then one of the rest. Each element of O is one chain
// of multiply-adds over c in order, however the rows and columns are grouped.
template <bool kSet = false, bool kPairs = false>
void tile_accumulate(float* O, int64_t ldo, const float* P, int64_t prs, int64_t pcs, int rows, int cols,
                     const float* V, int64_t ldv, int64_t n) {
  for (int64_t d = 0; d < n; d += kMaxV * W) {
    const int64_t left = n - d;
    const int nvec = int(std::min<int64_t>(kMaxV, (left + W - 1) / W));
    const int wl = int(std::min<int64_t>(W, left - (nvec - 1) * W));
    float* o = O + d;
    const float* v = V + d;
    switch (nvec) {
      case 1: accumulate_pass<1, kSet, kPairs>(o, ldo, P, prs, pcs, rows, cols, v, ldv, wl); break;
      case 2: accumulate_pass<2, kSet, kPairs>(o, ldo, P, prs, pcs, rows, cols, v, ldv, wl); break;
#if NF_AVX512
      case 3: accumulate_pass<3, kSet, kPairs>(o, ldo, P, prs, pcs, rows, cols, v, ldv, wl); break;
      case 4: accumulate_pass<4, kSet, kPairs>(o, ldo, P, prs, pcs, rows, cols, v, ldv, wl); break;
      case 5: accumulate_pass<5, kSet, kPairs>(o, ldo, P, prs, pcs, rows, cols, v, ldv, wl); break;
#endif
    }
  }
}

#if NF_AMX_CORE
// The forward on AMX (the avx512bf16 variant where cpu_has_amx_bf16: Intel Sapphire Rapids on, Linux):
// its two products on the pairs the vdpbf16ps path uses, 16 rows at a time, in steps of 16 pairs of
// the contraction (tdpbf16ps: products of bf16 pairs exact in fp32, summed in fp32 in another order).
//   scores: A = the query rows as pairs along d (Qp, pair_words apart, zero past ⌈Dh / 2⌉), B = the
//   key tile Kt [pair_words(Dh)][kBK] (rows past ⌈Dh / 2⌉ zero): one 16 x 16 tile per vector of keys.
//   P V: A = the weights as pairs of neighbouring keys (softmax_step's rows, zeroed from ⌈nk / 2⌉ to
//   the step), B = the value tile Vp [kValuePairRows][Dh] (pair rows past ⌈nk / 2⌉ zero), into a
//   scratch block then added to O's rows.
// A tile reads whole 16-row groups and 16-column tiles: rows past the block's (and columns past Dh)
// compute on whatever lies there and land in rows (columns) of the output that nothing reads; the
// scratch keeps room for those reads (forward_scratch_floats). Tile state is per thread: the core's
// tasks configure it (amx_configure) and release it.
#include "amx_inl.h"
static_assert(W == 16, "a vector of keys is one 16-column tile");

// op(T, B) for each C tile T < NT with the B tile it takes (6, 7 in turn): literals, as the AMX
// intrinsics stringify tile numbers. (Inside amx_panel.)
#define NF_AMX_C_TILES(op)          \
  {                                 \
    op(0, 6);                       \
    if constexpr (NT > 1) op(1, 7); \
    if constexpr (NT > 2) op(2, 6); \
    if constexpr (NT > 3) op(3, 7); \
    if constexpr (NT > 4) op(4, 6); \
  }
#define NF_AMX_ZERO(T, B) _tile_zero(T)
#define NF_AMX_LOAD(T, B) _tile_loadd(T, out + 64 * T, ldo)
#define NF_AMX_STORE(T, B) _tile_stored(T, out + 64 * T, ldo)
#define NF_AMX_PRODUCT(T, B)           \
  {                                    \
    _tile_loadd(B, bs + 64 * T, ldb);  \
    _tile_dpbf16ps(T, 5, B);           \
  }

// out [16][16 NT] (ldo bytes apart) = Σ_{s < steps} A(s) B(s) (kAdd: out += the sum): A(s) 16 rows of
// 16 pairs at a + 64 s (lda bytes apart), B(s) 16 pair rows at b + 16 s ldb (ldb apart), its column
// tile t at 64 t bytes. C tiles 0 .. NT-1, A tile 5, B tiles 6 and 7 in turn.
template <int NT, bool kAdd>
void amx_panel(char* out, int64_t ldo, const char* a, int64_t lda, const char* b, int64_t ldb, int64_t steps) {
  static_assert(NT >= 1 && NT <= 5, "five C tiles at most");
  if constexpr (kAdd) NF_AMX_C_TILES(NF_AMX_LOAD)
  else NF_AMX_C_TILES(NF_AMX_ZERO)
  for (int64_t s = 0; s < steps; ++s) {
    const char* bs = b + 16 * s * ldb;
    _tile_loadd(5, a + 64 * s, lda);
    NF_AMX_C_TILES(NF_AMX_PRODUCT)
  }
  NF_AMX_C_TILES(NF_AMX_STORE)
}
#undef NF_AMX_C_TILES
#undef NF_AMX_ZERO
#undef NF_AMX_LOAD
#undef NF_AMX_STORE
#undef NF_AMX_PRODUCT

// C[r, 0:16 nt] (ldc floats apart) = Σ_{p < 16 steps} A[r, p] B[p, 0:16 nt] (kAdd: C += the sums) for
// the 16-row groups that cover r < rows: A rows of bf16 pairs lda floats apart, B rows of pairs ldb
// floats apart.
template <bool kAdd>
void amx_product(float* C, int64_t ldc, const float* A, int64_t lda, int rows, const float* B, int64_t ldb,
                 int64_t steps, int nt) {
  for (int r = 0; r < rows; r += 16)
    for (int t = 0; t < nt; t += 5) {
      char* out = reinterpret_cast<char*>(C + r * ldc + 16 * t);
      const char* a = reinterpret_cast<const char*>(A + r * lda);
      const char* b = reinterpret_cast<const char*>(B + 16 * t);
      const int64_t ldo = 4 * ldc, la = 4 * lda, lb = 4 * ldb;
      switch (std::min(5, nt - t)) {
        case 1: amx_panel<1, kAdd>(out, ldo, a, la, b, lb, steps); break;
        case 2: amx_panel<2, kAdd>(out, ldo, a, la, b, lb, steps); break;
        case 3: amx_panel<3, kAdd>(out, ldo, a, la, b, lb, steps); break;
        case 4: amx_panel<4, kAdd>(out, ldo, a, la, b, lb, steps); break;
        default: amx_panel<5, kAdd>(out, ldo, a, la, b, lb, steps); break;
      }
    }
}

// O[r, 0:Dh] += Σ_{p < 16 steps} A[r, p] B[p, 0:Dh] for r < rows (O ldo apart; A's rows and B's rows
// of pairs lda and ldb apart): whole 16-row groups of O in the tiles when Dh is whole tiles, the rest
// through the scratch block Oa [⌈rows / 16⌉ 16][⌈Dh / 16⌉ 16] (a tile must not write past O's rows and columns:
// other tasks' rows, or the next head's columns).
void amx_add_product(float* O, int64_t ldo, int rows, const float* A, int64_t lda, const float* B, int64_t ldb,
                     int64_t steps, int64_t Dh, float* Oa) {
  const int64_t width = (Dh + 15) / 16 * 16;
  const int whole = Dh == width ? rows / 16 * 16 : 0;
  if (whole > 0) amx_product<true>(O, ldo, A, lda, whole, B, ldb, steps, int(width / 16));
  if (whole == rows) return;
  amx_product<false>(Oa, width, A + whole * lda, lda, rows - whole, B, ldb, steps, int(width / 16));
  for (int r = whole; r < rows; ++r) {
    float* o = O + r * ldo;
    const float* a = Oa + (r - whole) * width;
    int64_t c = 0;
    for (; c + W <= Dh; c += W) vstore(o + c, vadd(vload(o + c), vload(a + c)));
    if (c < Dh) vstore_n(o + c, vadd(vload_n(o + c, int(Dh - c)), vload_n(a + c, int(Dh - c))), int(Dh - c));
  }
}

// O[r, 0:Dh] += Σ_c P(r, c) V[c, 0:Dh] for r < nq, c < nk: P rows of bf16 pairs of neighbouring keys at
// S (kBK apart: softmax_step's weights, the backward's scale dS; the pairs past ⌈nk / 2⌉ zeroed here),
// Vp the key tile's rows as pair rows (pack_tile_pairs). Oa [32][⌈Dh / 16⌉ 16].
void amx_weights_values(float* O, int64_t ldo, float* S, int nq, int nk, const float* Vp, int64_t Dh, float* Oa) {
  const int64_t np = (nk + 1) / 2, steps = (np + 15) / 16;
  for (int r = 0; r < nq; ++r) std::fill(S + r * kBK + np, S + r * kBK + 16 * steps, 0.0f);
  amx_add_product(O, ldo, nq, S, kBK, Vp, Dh, steps, Dh, Oa);
}

// O[c, 0:Dh] += Σ_r P(r, c) X[r, 0:Dh] for c < nk, r < nq <= 32 (the backward's dV and dK): Pp the
// block's P rows as pairs of neighbouring query rows [⌈nq / 2⌉][kBK] (pack_row_pairs), Xp its X rows so
// paired [16][Dh] (the pair rows from ⌈nq / 2⌉ zeroed here); At [kBK][16] takes Pp transposed, one step
// of 16 pairs. Oa [kBK][⌈Dh / 16⌉ 16].
void amx_transposed_product(float* O, int64_t ldo, const float* Pp, int nq, int nk, float* Xp, int64_t Dh, float* At,
                            float* Oa) {
  const int nq2 = (nq + 1) / 2;
  transpose(At, 16, Pp, kBK, nq2, nk, 1.0f);
  std::fill(Xp + nq2 * Dh, Xp + 16 * Dh, 0.0f);
  amx_add_product(O, ldo, nk, At, 16, Xp, Dh, 1, Dh, Oa);
}
#endif

// S[r, 0:n] = Σ_d A[r*lda + d] Bt[d, 0:n] for r < rows, n = the tile_vectors(nk) vectors of keys:
// rows of A against a transposed tile Bt [Dh, kBK] (keys along the vector lanes); with pairs, A's
// rows and Bt as bf16 pairs along d (pack_inl.h), Bt [⌈Dh / 2⌉, kBK]; with amx too, on AMX tiles (A's
// rows and Bt pair_words(Dh) deep, zero past ⌈Dh / 2⌉; S rows up to the next 16 written).
void tile_scores(float* S, const float* A, int64_t lda, int rows, const float* Bt, int64_t Dh, int nk, bool pairs = false,
                 [[maybe_unused]] bool amx = false) {
#if NF_AMX_CORE
  if (amx) return amx_product<false>(S, kBK, A, lda, rows, Bt, kBK, pair_words(Dh) / 16, tile_vectors(nk));
#endif
#if NF_BF16_DOT
  if (pairs) return tile_accumulate<true, true>(S, kBK, A, lda, 1, rows, int((Dh + 1) / 2), Bt, kBK, tile_vectors(nk) * W);
#endif
  tile_accumulate<true>(S, kBK, A, lda, 1, rows, int(Dh), Bt, kBK, tile_vectors(nk) * W);
}

// Scores of queries i0 .. i0+nq-1 against the key tile Kt (keys j0 .. j0+nk-1, transposed and
// scaled; with pairs, qrows and Kt are bf16 pairs and Kt unscaled): S[r, c] = scale q·k (pairs: q·k,
// the softmax applies the scale, see score_scale), or -inf where the pair is blocked and in the
// padding columns c >= nk.
void masked_scores(float* S, const float* qrows, int64_t ldq, const float* Kt, const AttentionMasks& m,
                   const AttentionCoreDims& d, int64_t b, int64_t i0, int nq, int64_t j0, int nk, bool pairs = false,
                   bool amx = false) {
  tile_scores(S, qrows, ldq, nq, Kt, d.Dh, nk, pairs, amx);
  for (int r = 0; r < nq; ++r) {
    const int64_t i = i0 + r;
    const uint8_t* kp = m.key_padding_mask ? m.key_padding_mask + b * d.Tk + j0 : nullptr;
    const uint8_t* am = m.attn_mask ? m.attn_mask + ((m.attn_batched ? b * d.Tq : 0) + i) * d.Tk + j0 : nullptr;
    const int64_t open = m.causal ? std::clamp<int64_t>(i - j0 + 1, 0, nk) : nk;  // keys not after i
    float* s = S + r * kBK;
    std::fill(s + open, s + kBK, kNegInf);
    if (kp)
      for (int64_t c = 0; c < open; ++c)
        if (kp[c]) s[c] = kNegInf;
    if (am)
      for (int64_t c = 0; c < open; ++c)
        if (am[c]) s[c] = kNegInf;
  }
}

// Kt for keys [0, nk) at k (rows ldk apart): the tile transposed and scaled, [Dh, kBK]; with pairs
// (avx512bf16, bf16 inputs) paired along d and unscaled, [⌈Dh / 2⌉, kBK]: each key's row converted to
// pairs of neighbours in Kr [nk, ⌈Dh / 2⌉], whose words are then transposed as floats (half the
// transpose of the fp32 tile, and no pass pairing its rows).
void load_key_tile(float* Kt, [[maybe_unused]] float* Kr, const float* k, int64_t ldk, int nk, int64_t Dh, float scale,
                   bool pairs) {
#if NF_BF16_DOT
  if (pairs) {
    const int64_t Dh2 = (Dh + 1) / 2;
    pack_rows(Kr, Dh2, k, ldk, nk, Dh);
    return transpose(Kt, kBK, Kr, Dh2, nk, Dh2, 1.0f);
  }
#endif
  transpose(Kt, kBK, k, ldk, nk, Dh, scale);
}

#if NF_BF16_DOT
// Qp [rows, pair_words(Dh)] = the rows at q (ldq apart) as bf16 pairs along d, zero past ⌈Dh / 2⌉.
void pack_query_pairs(float* Qp, const float* q, int64_t ldq, int64_t rows, int64_t Dh) {
  const int64_t Dh2 = (Dh + 1) / 2, Dhp = pair_words(Dh);
  pack_rows(Qp, Dhp, q, ldq, rows, Dh);
  for (int64_t r = 0; r < rows; ++r) std::fill(Qp + r * Dhp + Dh2, Qp + (r + 1) * Dhp, 0.0f);
}

// Tp [kValuePairRows, Dh] = the nk rows at t (ldt apart: a key or value tile) paired along the keys, two
// keys to a row (pack_row_pairs), the pair rows from ⌈nk / 2⌉ to the next AMX step zero: once per tile,
// for every query block's product with it.
void pack_tile_pairs(float* Tp, const float* t, int64_t ldt, int nk, int64_t Dh) {
  const int64_t np = (nk + 1) / 2;
  pack_row_pairs(Tp, Dh, t, ldt, nk, Dh);
  std::fill(Tp + np * Dh, Tp + (np + 15) / 16 * 16 * Dh, 0.0f);
}
#endif

// The backward's scores: masked_scores of the nq query rows at q (ldq apart) against a load_key_tile;
// with pairs the rows go through Qp [nq, pair_words(Dh)] as bf16 pairs (amx: on AMX tiles). The forward
// scores the same way (its chunk's rows packed once for all key tiles), so the backward's
// P = exp(S − lse) is the forward's.
void block_scores(float* S, float* Qp, const float* q, int64_t ldq, const float* Kt, const AttentionMasks& m,
                  const AttentionCoreDims& d, int64_t b, int64_t i0, int nq, int64_t j0, int nk, bool pairs, bool amx) {
#if NF_BF16_DOT
  if (pairs) {
    pack_query_pairs(Qp, q, ldq, nq, d.Dh);
    return masked_scores(S, Qp, pair_words(d.Dh), Kt, m, d, b, i0, nq, j0, nk, true, amx);
  }
#endif
  masked_scores(S, q, ldq, Kt, m, d, b, i0, nq, j0, nk);
}

// z[c] = 1/(1-p) where dropout keeps element base + c of the stream, else 0, for c < n (the rule
// of nf::dropout_keep, one Philox block per 4 elements); z[n..kBK) = 0.
void dropout_row(float* z, const AttentionDropout& dr, uint64_t base, int n) {
  const float keep_scale = 1.0f / (1.0f - dr.p);
  for (int c = 0; c < n;) {
    const uint64_t e = base + c;
    const PhiloxBlock blk = philox4x32_10(e >> 2, dr.offset, dr.seed);
    for (unsigned lane = e & 3; lane < 4 && c < n; ++lane, ++c)
      z[c] = philox_bits_to_uniform(blk.v[lane]) >= dr.p ? keep_scale : 0.0f;
  }
  std::fill(z + n, z + kBK, 0.0f);
}

// Asks for one row of a head's matrix (Dh floats at p) to be brought toward L2, a cache line at a
// time. A head's rows are strided lines that the head before it did not touch (its own columns of
// every token), so the core fetches the next task's rows while it computes, a row per row of its
// work (cold, their first loads were a third of the backward's time outside its products at T 65,
// head width 32; the layer's backward runs 3-4% faster with it).
void prefetch_row(const float* p, int64_t Dh) {
  for (int64_t c = 0; c < Dh; c += 64 / sizeof(float)) __builtin_prefetch(p + c, 0, 2);
  __builtin_prefetch(p + Dh - 1, 0, 2);  // (a row that does not start a line ends in one more)
  asm volatile("");                      // (GCC deletes a loop of nothing but prefetches)
}

// Queries per forward task: whole blocks of kBQ, as many as keep the chunk's Q and O rows within
// about 256 KiB (2 x 32K floats) of L2, and few enough to leave every thread four tasks or more.
int64_t chunk_rows(const AttentionCoreDims& d) {
  const int64_t nqb = (d.Tq + kBQ - 1) / kBQ;
  const int64_t by_cache = std::max<int64_t>(1, (int64_t(1) << 15) / (d.Dh * kBQ));
  const int64_t by_threads = std::max<int64_t>(1, d.B * d.H * nqb / (4 * num_threads()));
  return std::max<int64_t>(1, std::min({nqb, by_cache, by_threads}) * kBQ);
}

// Query blocks of a chunk of R rows: as even as whole 4-row groups allow (65 rows: 24 + 24 + 17,
// not 32 + 32 + 1), at most kBQ rows each.
int block_rows(int64_t R) {
  const int64_t nb = (R + kBQ - 1) / kBQ, even = (R + nb - 1) / nb;
  return int(std::min<int64_t>(kBQ, (even + 3) / 4 * 4));
}

// What softmax_step leaves in S for the product with V: the weights in fp32, rounded to bfloat16
// (bf16 on the variants without vdpbf16ps), or as rows of bf16 pairs of neighbours (pack_bf16_row's
// layout, row r at S + r·kBK, zero past the tile's keys) for vdpbf16ps.
enum class Weights { fp32, rounded, pairs };

// The online-softmax step of nq query rows against one key tile: S (scores, nv vectors a row, to be
// multiplied by sc: score_scale) becomes exp(sc (S − m_new)) ∘ Z, the running max m and sum l
// advance, and each output row is rescaled by alpha = exp(sc (m_old − m_new)) (not while m_old is
// -inf: the row of O is still zero). Dropout row r is element base + r·Tk of the stream.
// Every row's max first, then the rescale factors of all rows a vector at a time, then the
// exponentials of all rows: streams of independent vectors rather than a horizontal max and a
// scalar exponential between each row's few (a tile of 80 keys is 5 vectors a row).
void softmax_step(float* S, float sc, float* mrow, float* lrow, float* ob, int64_t ldo, int64_t Dh, int nq, int nk,
                  float* z, const AttentionDropout& dr, uint64_t base, int64_t Tk, Weights out) {
  const int nv = tile_vectors(nk);
  const bool drop = dr.p > 0.0f;
  float m_new[kBQ], alpha[kBQ];
  for (int r = 0; r < nq; ++r) {
    const float* s = S + r * kBK;
    vf vmx = vset1(kNegInf);
    for (int c = 0; c < nv; ++c) vmx = vmax(vmx, vload(s + c * W));
    m_new[r] = std::max(mrow[r], vhmax(vmx));
  }
  const vf vsc = vset1(sc);
  for (int r = 0; r < nq; r += W) {  // (NaN for a row still blocked: not used)
    const int n = std::min(W, nq - r);
    vstore_w(alpha + r, vexp(vmul(vsub(vload_w(mrow + r, n), vload_w(m_new + r, n)), vsc)), n);
  }
  for (int r = 0; r < nq; ++r) {
    float* s = S + r * kBK;
    if (m_new[r] == kNegInf) {  // every key so far is blocked: nothing to add
      std::memset(s, 0, sizeof(float) * kBK);
      continue;
    }
    if (drop) dropout_row(z, dr, base + uint64_t(r * Tk), nk);
    const vf vm = vset1(-sc * m_new[r]);
    vf sum = vzero();
    for (int c = 0; c < nv; ++c) {
      vf p = vexp(vfma(vload(s + c * W), vsc, vm));
      sum = vadd(sum, p);
      if (drop) p = vmul(p, vload(z + c * W));
      vstore(s + c * W, out == Weights::rounded ? vround_bf16(p) : p);
    }
#if NF_BF16_DOT
    if (out == Weights::pairs) pack_bf16_row(s, s, nk);  // (the row is still in L1)
#endif
    const bool first = mrow[r] == kNegInf;
    lrow[r] = first ? vsum(sum) : lrow[r] * alpha[r] + vsum(sum);
    mrow[r] = m_new[r];
    if (!first && alpha[r] != 1.0f) scale_row(ob + r * ldo, Dh, alpha[r]);
  }
}

// Forward of queries c0 .. c0+R-1 of head (b, h). Key tiles outer, so each tile is transposed
// once for every query block of the chunk; query blocks inner, each with its running max and sum.
// With bf16_p on avx512bf16 the products take bf16 pairs (vdpbf16ps, twice the fp32 FMA rate): the
// key tile's rows paired along d, the value tile's rows paired along the keys, and each query block's
// rows and weights converted to pairs of neighbours (the values are bf16 already: exact).
void forward_chunk(float* o, float* lse, float* weights, const float* q, const float* k, const float* v,
                   const AttentionMasks& m, const AttentionCoreDims& d, int64_t b, int64_t h, int64_t c0, int64_t R,
                   float* scratch, bool bf16_p) {
  const int64_t Dh = d.Dh, Tk = d.Tk, Dh2 = (Dh + 1) / 2, Dhp = pair_words(Dh);
  const bool pairs = core_pairs() && bf16_p, amx = core_amx() && bf16_p;
  float* Kt = scratch;            // [Dh, kBK] the key tile, transposed and scaled (pairs: [Dhp, kBK], unscaled)
  float* S = Kt + std::max(Dh, Dhp) * kBK;  // [kBQ, kBK] scores, then weights
  float* z = S + kBQ * kBK;       // [kBK] dropout factors of one row
  float* mrow = z + kBK;          // [R] running max
  float* lrow = mrow + R;         // [R] running sum, then lse
  float* Qp = lrow + R;           // [R (+ 16 read by AMX), Dhp] (pairs) the chunk's query rows, two dimensions to a word
  [[maybe_unused]] float* Vp = Qp + (R + 16) * Dhp;  // [kValuePairRows, Dh] (+ 16) (pairs) the value tile's rows, two keys to a word
  float* Kr = Vp + kValuePairRows * Dh + 16;  // [kBK, Dh2] (pairs) load_key_tile's rows
  [[maybe_unused]] float* Oa = Kr + kBK * Dh2;  // [kBQ, ⌈Dh / 16⌉ 16] (AMX) a query block's P V
  const float* qb = q + b * d.q.batch + h * d.q.head + c0 * d.q.row;
  const float* kb = k + b * d.k.batch + h * d.k.head;
  const float* vb = v + b * d.v.batch + h * d.v.head;
  float* ob = o + b * d.o.batch + h * d.o.head + c0 * d.o.row;
  const int64_t row0 = (b * d.H + h) * d.Tq + c0;  // this chunk's first row of lse / weights
  const int bq = block_rows(R);
  // Causal: keys after the chunk's last query are blocked for all of its queries, and a key tile
  // wholly after a block's last query adds nothing to that block.
  const int64_t jend = m.causal ? std::min(Tk, c0 + R) : Tk;
  auto skipped = [&](int64_t j0, int64_t i, int nq) { return m.causal && j0 >= c0 + i + nq; };
  auto load_keys = [&](int64_t j0, int nk) { load_key_tile(Kt, Kr, kb + j0 * d.k.row, d.k.row, nk, Dh, d.scale, pairs); };
  auto scores = [&](int64_t i, int nq, int64_t j0, int nk) {  // S for queries c0+i .. c0+i+nq-1
    if (pairs) masked_scores(S, Qp + i * Dhp, Dhp, Kt, m, d, b, c0 + i, nq, j0, nk, true, amx);
    else masked_scores(S, qb + i * d.q.row, d.q.row, Kt, m, d, b, c0 + i, nq, j0, nk);
  };
  const Weights weights_out = pairs ? Weights::pairs : bf16_p ? Weights::rounded : Weights::fp32;
  const float sc = score_scale(d, pairs);
  // The next task's rows (prefetch_row), during the first key tile: the next chunk's queries, or the
  // next head's first chunk and, as far as its rows reach, its keys and values.
  const bool next_head = c0 + R >= d.Tq, last = next_head && b * d.H + h + 1 == d.B * d.H;
  const int64_t nbh = b * d.H + h + next_head, nb = nbh / d.H, nh = nbh % d.H, nc0 = next_head ? 0 : c0 + R;
  auto prefetch_next = [&](int64_t i) {
    if (last) return;
    if (nc0 + i < d.Tq) prefetch_row(q + nb * d.q.batch + nh * d.q.head + (nc0 + i) * d.q.row, Dh);
    if (next_head && i < Tk) {
      prefetch_row(k + nb * d.k.batch + nh * d.k.head + i * d.k.row, Dh);
      prefetch_row(v + nb * d.v.batch + nh * d.v.head + i * d.v.row, Dh);
    }
  };
#if NF_BF16_DOT
  if (pairs) {  // once for all the key tiles; Kt's rows past Dh2 zero
    pack_query_pairs(Qp, qb, d.q.row, R, Dh);
    std::fill(Kt + Dh2 * kBK, Kt + Dhp * kBK, 0.0f);
  }
#endif

  for (int64_t r = 0; r < R; ++r) {
    std::memset(ob + r * d.o.row, 0, sizeof(float) * Dh);
    mrow[r] = kNegInf;
    lrow[r] = 0.0f;
  }
  for (int64_t j0 = 0; j0 < jend; j0 += kBK) {
    const int nk = int(std::min<int64_t>(kBK, Tk - j0));
    load_keys(j0, nk);
#if NF_BF16_DOT
    if (pairs) pack_tile_pairs(Vp, vb + j0 * d.v.row, d.v.row, nk, Dh);
#endif
    for (int64_t i = 0; i < R; i += bq) {
      const int nq = int(std::min<int64_t>(bq, R - i));
      if (skipped(j0, i, nq)) continue;
      scores(i, nq, j0, nk);
      softmax_step(S, sc, mrow + i, lrow + i, ob + i * d.o.row, d.o.row, Dh, nq, nk, z, d.dropout,
                   uint64_t((row0 + i) * Tk + j0), Tk, weights_out);
      if (j0 == 0)
        for (int r = 0; r < nq; ++r) prefetch_next(i + r);
#if NF_AMX_CORE
      if (amx) {
        amx_weights_values(ob + i * d.o.row, d.o.row, S, nq, nk, Vp, Dh, Oa);
        continue;
      }
#endif
#if NF_BF16_DOT
      if (pairs) {
        tile_accumulate<false, true>(ob + i * d.o.row, d.o.row, S, kBK, 1, nq, (nk + 1) / 2, Vp, Dh, Dh);
        continue;
      }
#endif
      tile_accumulate(ob + i * d.o.row, d.o.row, S, kBK, 1, nq, nk, vb + j0 * d.v.row, d.v.row, Dh);
    }
  }
  for (int64_t r = 0; r < R; ++r) {  // normalise; a fully blocked row keeps O = 0 and gets lse = -inf
    if (lrow[r] > 0.0f) {
      scale_row(ob + r * d.o.row, Dh, 1.0f / lrow[r]);
      lrow[r] = sc * mrow[r] + std::log(lrow[r]);
    } else {
      lrow[r] = kNegInf;
    }
    if (lse) lse[row0 + r] = lrow[r];
  }
  if (!weights) return;
  // The (pre-dropout) weights exp(S − lse), recomputed tile by tile.
  float* wb = weights + row0 * Tk;
  std::memset(wb, 0, sizeof(float) * R * Tk);
  for (int64_t j0 = 0; j0 < jend; j0 += kBK) {
    const int nk = int(std::min<int64_t>(kBK, Tk - j0));
    const int nv = tile_vectors(nk);
    load_keys(j0, nk);
    for (int64_t i = 0; i < R; i += bq) {
      const int nq = int(std::min<int64_t>(bq, R - i));
      if (skipped(j0, i, nq)) continue;
      scores(i, nq, j0, nk);
      for (int r = 0; r < nq; ++r) {
        if (lrow[i + r] == kNegInf) continue;
        float* s = S + r * kBK;
        const vf vl = vset1(-lrow[i + r]), vsc = vset1(sc);
        for (int c = 0; c < nv; ++c) vstore(s + c * W, vexp(vfma(vload(s + c * W), vsc, vl)));
        std::memcpy(wb + (i + r) * Tk + j0, s, sizeof(float) * nk);
      }
    }
  }
}

// Backward of head (b, h): overwrites its rows of dq, dk, dv. With bf16 the products take bf16 inputs
// as autocast's would: dO, P ∘ Z and scale dS are rounded (Q, K, V are already), fp32 accumulation.
// With pairs (bf16 on avx512bf16) they run vdpbf16ps: every operand paired along its product's
// contraction (d for the scores and dO Vᵀ; the queries of the block for dV and dK; the keys of the
// tile for dQ), the scores recomputed as the forward computed them (block_scores).
void backward_head(float* dq, float* dk, float* dv, const float* dout, const float* q, const float* k,
                   const float* v, const float* o, const float* lse, const AttentionMasks& m,
                   const AttentionCoreDims& d, int64_t b, int64_t h, float* scratch, bool bf16, bool pairs, bool amx) {
  const int64_t Dh = d.Dh, Tq = d.Tq, Tk = d.Tk, Dh2 = (Dh + 1) / 2, Dhp = pair_words(Dh);
  float* Kt = scratch;            // [Dh, kBK] key tile, transposed and scaled (load_key_tile; pairs: [Dhp, kBK])
  float* Vt = Kt + std::max(Dh, Dhp) * kBK;  // [Dh, kBK] value tile, transposed (pairs: [Dhp, kBK])
  float* S = Vt + std::max(Dh, Dhp) * kBK;   // [kBQ, kBK] scores, then scale dS
  float* dP = S + kBQ * kBK;      // [kBQ, kBK] dO Vᵀ, then P ∘ Z
  float* z = dP + kBQ * kBK;      // [kBK] dropout factors of one row
  float* Di = z + kBK;            // [Tq] rowsum(dO ∘ O)
  float* Qp = Di + Tq;            // [kBQ, Dhp] (pairs) a query block's rows, then its dO rows
  float* R = Qp + kBQ * Dhp;      // [kBQ, Dh] bf16: the block's dO rounded; pairs: two rows to a word
  float* dSt = R + kBQ * Dh;      // [kBQ / 2, kBK] (pairs) scale dS, two queries to a word
  [[maybe_unused]] float* Kp = dSt + kBQ / 2 * kBK;  // [kValuePairRows, Dh] (+ 16) (pairs) the key tile, two keys to a word
  float* Kr = Kp + kValuePairRows * Dh + 16;  // [kBK, Dh2] (pairs) load_key_tile's rows
  [[maybe_unused]] float* At = Kr + kBK * Dh2;  // [kBK, 16] (AMX) P ∘ Z or scale dS paired, transposed
  [[maybe_unused]] float* Oa = At + kBK * 16;   // [kBK, ⌈Dh / 16⌉ 16] (AMX) a product before it is added
  const int64_t qo = b * d.q.batch + h * d.q.head, ko = b * d.k.batch + h * d.k.head;
  const int64_t vo = b * d.v.batch + h * d.v.head, oo = b * d.o.batch + h * d.o.head;
  const float* lb = lse + (b * d.H + h) * Tq;
  const bool drop = d.dropout.p > 0.0f;
  const vf ones = vset1(1.0f), vscale = vset1(d.scale), vsc = vset1(score_scale(d, pairs));
  const int bq = block_rows(Tq);
  const bool round_inputs = bf16 && !pairs;  // (pairs: the conversion to pairs rounds them)
  // The next head's rows (prefetch_row), a query row's and a key row's during each row of the first key tile.
  const int64_t nbh = b * d.H + h + 1, nb = nbh / d.H, nh = nbh % d.H;
  auto prefetch_next = [&](int64_t i) {
    if (nbh == d.B * d.H) return;
    if (i < Tq) {
      prefetch_row(q + nb * d.q.batch + nh * d.q.head + i * d.q.row, Dh);
      prefetch_row(dout + nb * d.o.batch + nh * d.o.head + i * d.o.row, Dh);
      prefetch_row(o + nb * d.o.batch + nh * d.o.head + i * d.o.row, Dh);
    }
    if (i < Tk) {
      prefetch_row(k + nb * d.k.batch + nh * d.k.head + i * d.k.row, Dh);
      prefetch_row(v + nb * d.v.batch + nh * d.v.head + i * d.v.row, Dh);
    }
  };

  for (int64_t i = 0; i < Tq; ++i) {
    Di[i] = dot(dout + oo + i * d.o.row, o + oo + i * d.o.row, Dh);
    std::memset(dq + qo + i * d.q.row, 0, sizeof(float) * Dh);
  }
  for (int64_t j = 0; j < Tk; ++j) {
    std::memset(dk + ko + j * d.k.row, 0, sizeof(float) * Dh);
    std::memset(dv + vo + j * d.v.row, 0, sizeof(float) * Dh);
  }
  if (pairs) {  // the key and value tiles' rows past Dh2 (load_key_tile writes the others)
    std::fill(Kt + Dh2 * kBK, Kt + Dhp * kBK, 0.0f);
    std::fill(Vt + Dh2 * kBK, Vt + Dhp * kBK, 0.0f);
  }
  for (int64_t j0 = 0; j0 < Tk; j0 += kBK) {
    const int nk = int(std::min<int64_t>(kBK, Tk - j0));
    const int nv = tile_vectors(nk);
    const float* kj = k + ko + j0 * d.k.row;
    float* dkj = dk + ko + j0 * d.k.row;
    float* dvj = dv + vo + j0 * d.v.row;
    load_key_tile(Kt, Kr, kj, d.k.row, nk, Dh, d.scale, pairs);
    load_key_tile(Vt, Kr, v + vo + j0 * d.v.row, d.v.row, nk, Dh, 1.0f, pairs);
#if NF_BF16_DOT
    if (pairs) pack_tile_pairs(Kp, kj, d.k.row, nk, Dh);
#endif
    // Causal: query blocks ending before key j0 see none of this tile.
    for (int64_t i0 = m.causal ? j0 / bq * bq : 0; i0 < Tq; i0 += bq) {
      const int nq = int(std::min<int64_t>(bq, Tq - i0));
      const float* qi = q + qo + i0 * d.q.row;
      const float* doi = dout + oo + i0 * d.o.row;
      int64_t ldo = d.o.row;
      block_scores(S, Qp, qi, d.q.row, Kt, m, d, b, i0, nq, j0, nk, pairs, amx);
#if NF_BF16_DOT
      if (pairs) {
        pack_query_pairs(Qp, doi, d.o.row, nq, Dh);
        tile_scores(dP, Qp, Dhp, nq, Vt, Dh, nk, true, amx);
      } else
#endif
      {
        if (bf16) {  // the block's dO, rounded
          for (int r = 0; r < nq; ++r) vround_bf16_n(R + r * Dh, doi + r * d.o.row, Dh);
          doi = R, ldo = Dh;
        }
        tile_scores(dP, doi, ldo, nq, Vt, Dh, nk);
      }
      for (int r = 0; r < nq; ++r) {
        float* s = S + r * kBK;
        float* dp = dP + r * kBK;
        const float L = lb[i0 + r];
        if (j0 == 0) prefetch_next(i0 + r);
        if (L == kNegInf) {  // fully blocked row: no gradient
          std::memset(s, 0, sizeof(float) * kBK);
          std::memset(dp, 0, sizeof(float) * kBK);
          continue;
        }
        if (drop) dropout_row(z, d.dropout, uint64_t(((b * d.H + h) * Tq + i0 + r) * Tk + j0), nk);
        const vf vl = vset1(-L), vd = vset1(Di[i0 + r]);
        for (int c = 0; c < nv; ++c) {
          const vf p = vexp(vfma(vload(s + c * W), vsc, vl));
          const vf zc = drop ? vload(z + c * W) : ones;
          const vf g = vmul(zc, vload(dp + c * W));  // dL/dP
          const vf ds = vmul(vmul(p, vsub(g, vd)), vscale), pz = vmul(p, zc);  // scale dS, P ∘ Z
          vstore(s + c * W, round_inputs ? vround_bf16(ds) : ds);
          vstore(dp + c * W, round_inputs ? vround_bf16(pz) : pz);
        }
      }
#if NF_BF16_DOT
      if (pairs) {
        const int nq2 = (nq + 1) / 2;
        // The block's queries paired: P ∘ Z and dS rows, dO and Q rows.
        pack_row_pairs(dP, kBK, dP, kBK, nq, nk);
        pack_row_pairs(dSt, kBK, S, kBK, nq, nk);
        pack_row_pairs(R, Dh, dout + oo + i0 * d.o.row, d.o.row, nq, Dh);
#if NF_AMX_CORE
        if (amx) {
          amx_transposed_product(dvj, d.v.row, dP, nq, nk, R, Dh, At, Oa);  // dV += (P∘Z)ᵀ dO
          pack_row_pairs(R, Dh, qi, d.q.row, nq, Dh);
          amx_transposed_product(dkj, d.k.row, dSt, nq, nk, R, Dh, At, Oa);  // dK += scale dSᵀ Q
          pack_rows(S, kBK, S, kBK, nq, nk);
          amx_weights_values(dq + qo + i0 * d.q.row, d.q.row, S, nq, nk, Kp, Dh, Oa);  // dQ += scale dS K
          continue;
        }
#endif
        tile_accumulate<false, true>(dvj, d.v.row, dP, 1, kBK, nk, nq2, R, Dh, Dh);  // dV += (P∘Z)ᵀ dO
        pack_row_pairs(R, Dh, qi, d.q.row, nq, Dh);
        tile_accumulate<false, true>(dkj, d.k.row, dSt, 1, kBK, nk, nq2, R, Dh, Dh);  // dK += scale dSᵀ Q
        pack_rows(S, kBK, S, kBK, nq, nk);
        tile_accumulate<false, true>(dq + qo + i0 * d.q.row, d.q.row, S, kBK, 1, nq, (nk + 1) / 2, Kp, Dh, Dh);  // dQ += scale dS K
        continue;
      }
#endif
      tile_accumulate(dvj, d.v.row, dP, 1, kBK, nk, nq, doi, ldo, Dh);  // dV += (P∘Z)ᵀ dO
      tile_accumulate(dkj, d.k.row, S, 1, kBK, nk, nq, qi, d.q.row, Dh);    // dK += scale dSᵀ Q
      tile_accumulate(dq + qo + i0 * d.q.row, d.q.row, S, kBK, 1, nq, nk, kj, d.k.row, Dh);  // dQ += scale dS K
    }
  }
}

// The core's view of the layer's buffers (see the header comment).
AttentionCoreDims core_dims(const AttentionDims& d, bool cross) {
  AttentionCoreDims c;
  c.B = d.B, c.H = d.H, c.Tq = d.Tq, c.Tk = d.Tk, c.Dh = d.D / d.H;
  const int64_t qw = cross ? d.D : 3 * d.D, kw = cross ? 2 * d.D : 3 * d.D;  // row widths
  c.q = {d.Tq * qw, qw, c.Dh};
  c.k = c.v = {d.Tk * kw, kw, c.Dh};
  c.o = {d.Tq * d.D, d.D, c.Dh};
  c.scale = ops::softmax_scale<float>(d.scale, c.Dh);
  c.dropout = d.dropout;
  return c;
}

}  // namespace

void attention_core_forward(float* o, float* lse, float* weights, const float* q, const float* k, const float* v,
                            const AttentionMasks& masks, const AttentionCoreDims& d, bool bf16_p) {
  const int64_t rows = chunk_rows(d), chunks = (d.Tq + rows - 1) / rows;
  parallel_for(d.B * d.H * chunks, [&](int64_t t0, int64_t t1) {
    float* scratch = static_cast<float*>(thread_scratch(ScratchSlot::tile, sizeof(float) * forward_scratch_floats(d.Dh, d.Tq)));
    if (!scratch) return report_failure();  // (the op fails)
#if NF_AMX_CORE
    const bool amx = core_amx() && bf16_p;
    if (amx) amx_configure();
#endif
    for (int64_t t = t0; t < t1; ++t) {
      const int64_t bh = t / chunks, c0 = t % chunks * rows;
      forward_chunk(o, lse, weights, q, k, v, masks, d, bh / d.H, bh % d.H, c0, std::min(rows, d.Tq - c0), scratch, bf16_p);
    }
#if NF_AMX_CORE
    if (amx) _tile_release();
#endif
  });
}

void attention_core_backward(float* dq, float* dk, float* dv, const float* dout, const float* q, const float* k,
                             const float* v, const float* o, const float* lse, const AttentionMasks& masks,
                             const AttentionCoreDims& d, bool bf16) {
  parallel_for(d.B * d.H, [&](int64_t t0, int64_t t1) {
    float* scratch = static_cast<float*>(thread_scratch(ScratchSlot::tile, sizeof(float) * backward_scratch_floats(d.Dh, d.Tq)));
    if (!scratch) return report_failure();  // (the op fails)
    const bool amx = core_amx() && bf16;
#if NF_AMX_CORE
    if (amx) amx_configure();
#endif
    for (int64_t t = t0; t < t1; ++t)
      backward_head(dq, dk, dv, dout, q, k, v, o, lse, masks, d, t / d.H, t % d.H, scratch, bf16, core_pairs() && bf16, amx);
#if NF_AMX_CORE
    if (amx) _tile_release();
#endif
  });
}

void attention_forward(const ops::AttentionForward<float>& p, const PackedB& qkv_p, const PackedB& proj_p) {
  const AttentionDims& d = p.d;
  const AttentionMasks& masks = p.m;
  float *out = p.out, *weights = p.weights, *qkv = p.qkv, *q = p.q, *kv = p.kv, *ctx = p.ctx, *lse = p.lse;
  const float *x = p.x, *memory = p.memory, *qkv_weight = p.qkv_weight, *qkv_bias = p.qkv_bias, *proj_weight = p.proj_weight, *proj_bias = p.proj_bias;
  const int64_t D = d.D, rq = d.B * d.Tq, rk = d.B * d.Tk;
  const bool cross = memory != nullptr, bf16 = ops::attention_core_bf16(p.precision, core_pairs());
  // With bf16, Q, K, V are rounded to bf16 as the projections' epilogues store them.
  if (cross) {  // Q from x (weight rows 0..D-1), K | V from memory (rows D..3D-1: packed columns from D)
    NF_ISA_NS::linear_forward(q, nullptr, x, qkv_weight, qkv_bias, {rq, D, D}, Act::none, qkv_p, p.precision, bf16);
    NF_ISA_NS::linear_forward(kv, nullptr, memory, qkv_weight + D * D, qkv_bias ? qkv_bias + D : nullptr, {rk, D, 2 * D},
                              Act::none, qkv_p.from_column(D), p.precision, bf16);
  } else {
    NF_ISA_NS::linear_forward(qkv, nullptr, x, qkv_weight, qkv_bias, {rq, D, 3 * D}, Act::none, qkv_p, p.precision, bf16);
  }
  const float* Q = cross ? q : qkv;
  const float* K = cross ? kv : qkv + D;
  NF_ISA_NS::attention_core_forward(ctx, lse, weights, Q, K, K + D, masks, core_dims(d, cross), bf16);
  NF_ISA_NS::linear_forward(out, nullptr, ctx, proj_weight, proj_bias, {rq, D, D}, Act::none, proj_p, p.precision);
}

void attention_decode(const ops::AttentionDecode<float>& p, const PackedB& qkv_p, const PackedB& proj_p) {
  const AttentionDecodeDims& d = p.d;
  float *out = p.out, *cache = p.cache;
  const float *x = p.x, *qkv_weight = p.qkv_weight, *qkv_bias = p.qkv_bias, *proj_weight = p.proj_weight, *proj_bias = p.proj_bias;
  const int64_t B = d.B, D = d.D;
  const ops::AttentionDecodeCore core = ops::attention_decode_core(d, cache != nullptr, p.key_padding_mask);
  // The projected query (self-attention: q | k | v) [B, 3D], then the context [B, D].
  float* proj_in = static_cast<float*>(thread_scratch(ScratchSlot::layer, sizeof(float) * B * 4 * D));
  float* ctx = proj_in + B * 3 * D;
  const bool bf16 = ops::attention_core_bf16(p.precision, core_pairs());
  NF_ISA_NS::linear_forward(proj_in, nullptr, x, qkv_weight, qkv_bias, {B, D, core.qkv_width}, Act::none, qkv_p,
                            p.precision, bf16);  // (cross-attention: kv was made at bf16)
  if (cache)
    for (int64_t b = 0; b < B; ++b)
      std::memcpy(cache + (b * d.max_t + d.t) * 2 * D, proj_in + b * 3 * D + D, sizeof(float) * 2 * D);
  const float* K = cache ? cache : p.kv;
  NF_ISA_NS::attention_core_forward(ctx, nullptr, nullptr, proj_in, K, K + D, core.masks, core.dims, bf16);
  NF_ISA_NS::linear_forward(out, nullptr, ctx, proj_weight, proj_bias, {B, D, D}, Act::none, proj_p, p.precision);
}

void attention_backward(const ops::AttentionBackward<float>& p) {
  const AttentionDims& d = p.d;
  const AttentionMasks& masks = p.m;
  float *dx = p.dx, *dmemory = p.dmemory, *d_qkv_weight = p.d_qkv_weight, *d_qkv_bias = p.d_qkv_bias, *d_proj_weight = p.d_proj_weight, *d_proj_bias = p.d_proj_bias;
  const float *dout = p.dout, *qkv = p.qkv, *q = p.q, *kv = p.kv, *ctx = p.ctx, *lse = p.lse, *x = p.x;
  const float *memory = p.memory, *qkv_weight = p.qkv_weight, *proj_weight = p.proj_weight;
  const int64_t D = d.D, rq = d.B * d.Tq, rk = d.B * d.Tk;
  const bool cross = memory != nullptr;
  // dctx = dout proj_weight lives in dx until the input projections' backward overwrites it.
  float* dctx = dx;
  NF_ISA_NS::linear_backward(dctx, d_proj_weight, d_proj_bias, dout, ctx, proj_weight, {rq, D, D}, p.precision);
  // Gradients of the projections' outputs, laid out like the saved buffers.
  float* grad = static_cast<float*>(thread_scratch(ScratchSlot::layer, sizeof(float) * grad_floats(d)));
  const float* Q = cross ? q : qkv;
  const float* K = cross ? kv : qkv + D;
  float* dK = cross ? grad + rq * D : grad + D;
  NF_ISA_NS::attention_core_backward(grad, dK, dK + D, dctx, Q, K, K + D, ctx, lse, masks, core_dims(d, cross),
                                     p.precision == ops::Precision::bf16);
  if (cross) {
    NF_ISA_NS::linear_backward(dx, d_qkv_weight, d_qkv_bias, grad, x, qkv_weight, {rq, D, D}, p.precision);
    NF_ISA_NS::linear_backward(dmemory, d_qkv_weight + D * D, d_qkv_bias ? d_qkv_bias + D : nullptr, grad + rq * D, memory,
                               qkv_weight + D * D, {rk, D, 2 * D}, p.precision);
  } else {
    NF_ISA_NS::linear_backward(dx, d_qkv_weight, d_qkv_bias, grad, x, qkv_weight, {rq, D, 3 * D}, p.precision);
  }
}

}  // namespace nf::cpu::NF_ISA_NS

#ifdef NF_ISA_PRIMARY
namespace nf::cpu {

// The checked prepacked weights of a forward op (see packed_weight).
template <class P>
Status attention_packed(PackedB* qkv_p, PackedB* proj_p, const P& p, int64_t D, Isa isa, const char* op) {
  NF_TRY(packed_weight(qkv_p, p.qkv_weight_packed, 3 * D, D, isa, p.precision, op, "qkvWeightPacked"));
  return packed_weight(proj_p, p.proj_weight_packed, D, D, isa, p.precision, op, "projWeightPacked");
}

Status run(const ops::AttentionForward<float>& p) {
  const AttentionDims& d = p.d;
  const char* op = "attention_forward";
  NF_TRY(ops::attention_check(op, d, p.memory != nullptr, p.qkv, p.q, p.kv));
  const Isa isa = active_isa();
  PackedB qkv_p, proj_p;
  NF_TRY(attention_packed(&qkv_p, &proj_p, p, d.D, isa, op));
  NF_CHECK(thread_scratch(ScratchSlot::tile, sizeof(float) * scalar::forward_scratch_floats(d.D / d.H, d.Tq)), op,
           "out of memory for the attention tiles");
  NF_DISPATCH_TO(isa, attention_forward, p, qkv_p, proj_p);
  return Status::Ok();
}

Status run(const ops::AttentionDecode<float>& p) {
  const char* op = "attention_decode";
  const AttentionDecodeDims& d = p.d;
  NF_CHECK(d.B >= 1 && d.D >= 1 && d.H >= 1 && d.D % d.H == 0, op, "B, D, H must be positive with D divisible by H");
  NF_CHECK((p.cache != nullptr) != (p.kv != nullptr), op,
           "exactly one of cache (self-attention) and kv (cross-attention)");
  if (p.cache) NF_CHECK(d.t >= 0 && d.t < d.max_t, op, "t must be in [0, max_t)");
  else NF_CHECK(d.Tk >= 1, op, "Tk must be at least 1");
  const Isa isa = active_isa();
  PackedB qkv_p, proj_p;
  NF_TRY(attention_packed(&qkv_p, &proj_p, p, d.D, isa, op));
  NF_CHECK(thread_scratch(ScratchSlot::layer, sizeof(float) * d.B * 4 * d.D) &&
               thread_scratch(ScratchSlot::tile, sizeof(float) * scalar::forward_scratch_floats(d.D / d.H, 1)),
           op, "out of memory for the decode buffers");
  NF_DISPATCH_TO(isa, attention_decode, p, qkv_p, proj_p);
  return Status::Ok();
}

Status run(const ops::AttentionBackward<float>& p) {
  NF_TRY(ops::int8_inference_check("attention_backward", p.precision, "a backward"));
  const AttentionDims& d = p.d;
  NF_TRY(ops::attention_check("attention_backward", d, p.memory != nullptr, p.qkv, p.q, p.kv));
  NF_CHECK(p.memory || !p.dmemory, "attention_backward", "dmemory is only for cross-attention");
  NF_CHECK(thread_scratch(ScratchSlot::layer, sizeof(float) * scalar::grad_floats(d)) &&
               thread_scratch(ScratchSlot::tile, sizeof(float) * scalar::backward_scratch_floats(d.D / d.H, d.Tq)),
           "attention_backward", "out of memory for the attention gradients");
  NF_DISPATCH(attention_backward, p);
  return Status::Ok();
}

}  // namespace nf::cpu
#endif
#include "isa_end.h"
