// GEMM kernels. C[M,N] = act(alpha * op(A)[M,K] op(B)[K,N] + beta * C + bias[N]).
// Layout: row-major with leading dimensions; see gemm.h for the dimension key (M, N, K).
//
// Structure (BLIS / GotoBLAS): K is cut into blocks of kc, M into row blocks (about mc rows) and
// N into column blocks (nc columns). Per k block, op(B) is packed into NR-column micro-panels
// ([kc][NR] each) and op(A) into MR-row micro-panels ([kc][MR] each); transA/transB are resolved
// while packing and edges are zero-padded, so the micro-kernel always sees the same layout and
// computes a whole MR x NR tile (MR / 3 or 2 MR / 3 rows for a short last row panel), kept in
// registers across the k loop. The tile is stored through the epilogue, in registers: alpha, beta
// (first k block only; later blocks accumulate), and on the last k block the bias, the preact copy
// and the activation (over the whole tile at once), or instead of the activation its backward: the
// product times act'(act_grad) elementwise (gemm.h).
//   Packing (pack_inl.h): a k-major operand (op(A) when transA, op(B) when B is not transposed)
// is copied one source row per k; a row-major one (op(A) when A is not transposed, and the weights
// [N, K] of a Linear layer, transB) is transposed in registers 8 k by up to 8 rows at a time (AVX2
// shuffles, which the AVX-512 variant uses too), element by element in the scalar variant and at
// the edges.
//   Cache blocking: the B micro-panel (kc x NR) stays in L1 while the kernel walks the packed A
//   block (mc x kc, in L2); the packed B block (kc x nc) lives in L2/L3.
// Long K (a weight gradient dW = dyᵀ x over many rows, K >= 4 max(M, N)): K is cut into kRanges
// ranges of whole k blocks, each a product of its own into a partial C (alpha 1, beta 0), summed
// afterwards in a fixed order, C = alpha (P0 + P1 + ...) + beta C. Cutting M or N instead makes every
// thread pack all of the other operand (the long one); this way each is packed once. The cut
// depends on the shape only, so the result does not depend on the thread count.
// Threads: one parallel_for over macro-tiles (batch entry or K range, column block, row block), row block
// fastest, in two contiguous chunks per thread claimed dynamically: a thread packs each B block
// once for all the row blocks of its chunk, and a thread slowed down by another process on its
// core hands its second chunk to the others (+7-19% with one busy neighbour on 2 cores, no cost
// on a quiet machine). Inside a parallel region it runs on the calling thread alone.
// Scratch: ScratchSlot::gemm_pack of the running thread holds the packed B block followed by the packed A block;
// ScratchSlot::partials of the calling thread the partial sums of a long K's ranges, ScratchSlot::bf16_sums
// the fp32 sums behind a bf16 C over several k blocks.
// Prepacked B (PackedB, a weight packed once by pack_weights for the packWeights op): op(B) whole in
// the same panels, k block after k block (native/ops/packed.h), so a column block of a k block is
// a contiguous run of panels that macro_tiles reads in place instead of packing; pack_weights packs
// each panel with the same packer, so the micro-kernel sees the same values either way.
// Precision 'bf16' (native/ops/precision.h): the products' inputs rounded to bfloat16 (vround_bf16),
// fp32 accumulation, the epilogue in fp32. Two forms, the same function of the inputs up to the
// order of the fp32 sums:
//   avx512bf16 (NF_BF16_DOT): the panels hold bf16 pairs, element (i, k) and (i, k + 1) of a panel
//   in one 32-bit word (k even; an odd last k paired with 0), [⌈kc / 2⌉][P] words per panel, made in
//   one pass from the source (pack_operand: vcvtneps2bf16 and vcvtne2ps2bf16, the words of a
//   row-major operand transposed as floats); the micro-kernel runs vdot_bf16 (vdpbf16ps), two k per
//   instruction, products exact in fp32 (bf16 denormals read as zero, as the conversion already
//   made them).
//   every other variant (emulated): the fp32 panels, each value rounded to bf16 once packed, and the
//   fp32 micro-kernel: the products of bf16 values are exact in fp32, so only the order of the sums
//   differs from the avx512bf16 form.
// K is cut into blocks of an even kc (all but the last), so a pair never straddles two blocks.
// bf16 storage (GemmStorage: the activations of precision 'bf16' as bfloat16 bits): an A or B source
// of bf16 values is paired from its bits as they lie (avx512bf16: pack_rows_bf16, pack_bf16_pair_rows_bf16)
// or widened a panel at a time into fp32 (`wide`, the other variants) and packed as a float source: the
// panels, so the products, are those of the float call on the same values. A bf16 C (with preact and
// act_grad) is read widened and stored rounded by the epilogue (store_tile's k16); over more than one k
// block its running sums stay fp32 in a scratch [M][N] (a bf16 C would round each block's), and the
// epilogue runs from them afterwards (store_bf16_sums), as the float call's last block would.
#include "gemm.h"

#include <algorithm>
#include <cstring>
#include <type_traits>

#include "../core/allocator.h"
#include "../core/threadpool.h"
#include "isa.h"

// AMX-BF16 tiles for the bf16 pairs (see "Precision 'bf16' on AMX" below).
#if NF_BF16_DOT && NF_AMX_BUILD
#define NF_AMX_BF16 1
#pragma GCC target("amx-tile,amx-bf16")
#else
#define NF_AMX_BF16 0
#endif

namespace nf::cpu::NF_ISA_NS {
#include "simd.h"
#include "activation_inl.h"
#include "pack_inl.h"

namespace {

// Register tile MR x NR (NV vectors of W floats per row) and cache blocks, per ISA.
//   AVX-512: 12 x 32 = 24 zmm accumulators, 2 B vectors, 1 broadcast.
//   AVX2:     6 x 16 = 12 ymm accumulators, 2 B vectors, 1 broadcast.
//   NEON:     6 x 16 = 24 q-register accumulators (of 32), 4 B vectors, 1 broadcast; the AVX2
//             tile in floats, with KC and MC as AVX2's (not tuned: no arm64 machine here, only qemu).
//   scalar:   4 x 4 floats.
// KC: the depth of the B micro-panel (KC x NR floats) that the kernel reuses while it walks the
// A block; MC x KC is the A block resident in L2 (512 KiB on Zen 3, 1 MiB on Zen 4). On AVX-512,
// KC 256 ran 1-11% faster than 192 at every model shape on a Zen 4 (single-thread CPU time), and
// KC 512 (a 64 KiB micro-panel, twice L1d, streamed from L2; half the passes over C) 0-6% faster
// than 256 at the models' shapes (1576x3072x768: 102 against 99 GFLOP/s; dW = dyᵀ x 2304x768x1576:
// 103 against 99), level at M = 197. The AVX2 variant keeps 256: its CPUs (Zen 3) have half the L2.
#if NF_AVX512
constexpr int MR = 12, NV = 2;
constexpr int64_t KC = 512, MC = 240;
#elif NF_ISA == 1
constexpr int MR = 6, NV = 2;
constexpr int64_t KC = 256, MC = 144;
#elif NF_ISA == 3
constexpr int MR = 6, NV = 4;
constexpr int64_t KC = 256, MC = 144;
#else
constexpr int MR = 4, NV = 4;
constexpr int64_t KC = 256, MC = 128;
#endif
constexpr int NR = NV * W;
constexpr int64_t kMaxBlockFloats = int64_t(1) << 20;  // packed B block (kc x nc): at most 4 MiB

int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }
int64_t round_up(int64_t a, int64_t b) { return ceil_div(a, b) * b; }

// Element `i` of a matrix whose storage is float or (b16) bf16 (GemmStorage), as the GEMM's float pointer.
template <class F>
F* at(F* p, int64_t i, bool b16) {
  using U = std::conditional_t<std::is_const_v<F>, const uint16_t, uint16_t>;
  return b16 ? reinterpret_cast<F*>(reinterpret_cast<U*>(p) + i) : p + i;
}

// How a call is cut into blocks: K into nKC blocks of kc (grouped into nKS ranges of a long-K
// product, else one); the MR-row panels of M into nIC row blocks and the NR-column panels of N into
// nJC column blocks, as evenly as whole panels allow.
struct Plan {
  int64_t kc, nKC, nKS, nIC, nJC;
  int64_t row_panels, col_panels;  // ceil(M / MR), ceil(N / NR)
  int64_t row(int64_t ic) const { return ic * row_panels / nIC * MR; }  // first row of block ic
  int64_t col(int64_t jc) const { return jc * col_panels / nJC * NR; }  // first column of block jc
  // Packing scratch: one B block (kc x the widest column block), then one A block (the tallest
  // row block x kc). Never empty, so that thread_scratch never sees a request for 0 bytes.
  int64_t b_block_floats() const { return round_up(ceil_div(col_panels, nJC) * NR * kc, 16); }
  // Then (bf16 pairs) one fp32 panel of the widest packer, kc rows deep, before its conversion, and
  // (bf16 storage) a panel's source widened to floats (pack_operand), as large.
  size_t scratch_bytes() const { return sizeof(float) * amx_offset(); }
  int64_t panel_buffer_offset() const { return b_block_floats() + round_up(ceil_div(row_panels, nIC) * MR * kc, 16); }
  int64_t wide_offset() const { return panel_buffer_offset() + round_up(kc * NR, 16); }
  int64_t amx_offset() const { return wide_offset() + round_up(kc * NR, 16) + 16; }
  // Then (bf16 on AMX) the A block in the tiles' layout, the pairs it is made from, and a B tail.
  int64_t amx_a_floats() const { return round_up(ceil_div(row_panels, nIC) * MR, 16) * round_up((kc + 1) / 2, 16); }
  size_t amx_scratch_bytes() const { return scratch_bytes() + sizeof(float) * (2 * amx_a_floats() + 16 * NR); }
  int64_t first_block(int64_t range) const { return range * nKC / nKS; }  // k blocks of K range `range`
};

// K cut into *n blocks of *kc (the last may be shorter): as few as KC allows (aiming at a multiple
// of `multiple`), as even as possible with kc even (so that bf16 pairs of k never straddle two
// blocks; KC is even).
void k_blocks(int64_t K, int64_t* n, int64_t* kc, int64_t multiple = 1) {
  if (K == 0) {
    *n = 1, *kc = 0;
    return;
  }
  *kc = round_up(ceil_div(K, round_up(std::max<int64_t>(1, ceil_div(K, KC)), multiple)), 2);
  *n = std::max<int64_t>(1, ceil_div(K, *kc));
}

// The K ranges of a long-K product (see the header; 1: K is not cut): products without an
// epilogue beyond alpha and beta, B not prepacked, one batch entry, and partial sums of at most
// kMaxPartialFloats in all.
constexpr int64_t kRanges = 4;
constexpr int64_t kMaxPartialFloats = int64_t(1) << 20;

int64_t k_ranges(const GemmDims& d, bool epilogue, const PackedB& packed) {
  const bool long_k = d.K >= 4 * std::max(d.M, d.N) && d.K >= kRanges * KC / 2;
  return long_k && !epilogue && !packed && d.batch == 1 && kRanges * d.M * d.N <= kMaxPartialFloats ? kRanges : 1;
}

Plan make_plan(const GemmDims& d, int64_t nKS = 1) {
  Plan p;
  k_blocks(d.K, &p.nKC, &p.kc, nKS);
  p.nKS = std::min(nKS, p.nKC);
  p.row_panels = ceil_div(d.M, MR);
  p.col_panels = ceil_div(d.N, NR);
  // Column blocks as wide as the B block budget allows; row blocks of about MC.
  p.nJC = ceil_div(p.col_panels, std::max<int64_t>(1, kMaxBlockFloats / (NR * std::max<int64_t>(1, p.kc))));
  p.nIC = ceil_div(d.M, MC);
  const int64_t threads = num_threads();
  // Threads that share row blocks each pack all of B: when B is the larger operand (M < N; a
  // Linear layer on a few hundred rows, such as ViT-B/16 at batch 1), give each thread its own
  // column blocks instead, so that it packs its share of B and all of the smaller A.
  if (d.batch == 1 && p.nKS == 1 && d.M < d.N) p.nJC = std::max(p.nJC, std::min(p.col_panels, round_up(p.nJC, threads)));
  // Equal shares: gemm() deals the macro-tiles out in chunks of ceil(tiles / (2 threads)), so
  // unless their count is a multiple of 2 threads (of the thread count when it is at most that),
  // one thread gets a chunk more than another (6 tiles on 2 threads: chunks 2 + 2 + 2, one thread
  // doing 4; 10 tiles: 3 + 3 + 3 + 1, one doing 6). Round the count up by splitting the longer of
  // M and N further (each thread packs all of the other operand), else the shorter.
  if (threads > 1) {
    const int64_t entries = d.batch * p.nKS;
    const int64_t tiles = entries * p.nJC * p.nIC, q = tiles <= threads ? threads : 2 * threads;
    auto split = [&](int64_t& n, int64_t panels, int64_t other) {  // the least n' >= n with q | other n'
      for (int64_t c = n; c <= std::min(panels, n + q); ++c)
        if (other * c % q == 0) return n = c, true;
      return false;
    };
    if (d.M >= d.N) split(p.nIC, p.row_panels, entries * p.nJC) || split(p.nJC, p.col_panels, entries * p.nIC);
    else split(p.nJC, p.col_panels, entries * p.nIC) || split(p.nIC, p.row_panels, entries * p.nJC);
  }
  return p;
}

// What the store of one tile does besides writing alpha * acc.
struct Epilogue {
  float alpha, beta;    // beta: the weight of the old C (0: C is not read)
  const float* bias;    // added on the last k block, else null
  float* preact;        // row-major like C (ldc), written on the last k block, else null
  const float* act_grad;  // row-major like C (ldc): C ∘= act'(act_grad) instead of act(C), on the last k block, else null
  Act act;              // applied on the last k block, else Act::none
  int64_t ldc;
  bool reduced;         // bf16 products: GELU's Φ from vnormcdf_reduced (its 1e-6 far below bf16's rounding)
  bool round;           // C rounded to bf16 as stored (gemm's round_out), on the last k block
};

// How a call's products take their inputs: fp32 (precision fp32 and tf32), bf16 emulated (fp32
// panels rounded to bf16) or bf16 pairs (avx512bf16 only).
enum class Dot { fp32, bf16_rounded, bf16_pairs };

Dot dot_of(ops::Precision p) {
  if (p != ops::Precision::bf16) return Dot::fp32;
  return NF_BF16_DOT ? Dot::bf16_pairs : Dot::bf16_rounded;
}

// Rows of a panel of depth kc as the micro-kernel steps through them: kc floats, or ⌈kc / 2⌉ pairs.
int64_t panel_depth(int64_t kc, Dot dot) { return dot == Dot::bf16_pairs ? (kc + 1) / 2 : kc; }

// The tile's accumulators: acc = ap[kd][MR] (the first R rows of each k) * bp[kd][NR] over kd
// panel rows of fp32 values or (kPairs) bf16 pairs.
template <int R, bool kPairs>
void accumulate_tile(vf (&acc)[R][NV], int64_t kd, const float* ap, const float* bp) {
  for (int64_t k = 0; k < kd; ++k, ap += MR, bp += NR) {
    vf b[NV];
#pragma GCC unroll 4
    for (int v = 0; v < NV; ++v) b[v] = vload(bp + v * W);
#pragma GCC unroll 16
    for (int r = 0; r < R; ++r) {
      const vf a = vset1(ap[r]);
#pragma GCC unroll 4
      for (int v = 0; v < NV; ++v) acc[r][v] = vdot_step<kPairs>(a, b[v], acc[r][v]);
    }
  }
}

// The first n <= W values from element i of C (or preact, act_grad), stored as floats or (k16) bf16.
template <bool k16>
inline vf load_c(const float* p, int64_t i, int n) {
  if constexpr (k16) return vload_bf16_w(reinterpret_cast<const uint16_t*>(p) + i, n);
  else return vload_w(p + i, n);
}
template <bool k16>
inline void store_c(float* p, int64_t i, vf x, int n) {
  if constexpr (k16) vstore_bf16_w(reinterpret_cast<uint16_t*>(p) + i, x, n);
  else vstore_w(p + i, x, n);
}

// store_tile's activation, or its derivative with act_grad (acc ∘= act'(act_grad)), over the whole tile
// at once (R x NV independent vectors, padding rows too), so that its long dependency chains (GELU: a
// division and an exponential) overlap. Out of line, on a copy of the tile: the accumulators' address
// never escapes store_tile, so they stay in registers on the path without an activation.
template <bool k16, int R, class Width>
[[gnu::noinline]] void activate_tile(vf (&acc)[R][NV], const Epilogue& e, const Width& width) {
  if (e.act_grad) {
    vf g[R][NV];
#pragma GCC unroll 16
    for (int r = 0; r < R; ++r)
#pragma GCC unroll 4
      for (int v = 0; v < NV; ++v) {
        const int n = width(r, v);
        g[r][v] = n > 0 ? load_c<k16>(e.act_grad, r * e.ldc + v * W, n) : vzero();
      }
    act_derivative_tile(g, e.act);
#pragma GCC unroll 16
    for (int r = 0; r < R; ++r)
#pragma GCC unroll 4
      for (int v = 0; v < NV; ++v) acc[r][v] = vmul(acc[r][v], g[r][v]);
  } else {
    act_tile(acc, e.act, e.reduced);
  }
}

// The epilogue on the registers: x = alpha acc + beta C + bias, preact = x, C = act(x) or, with
// act_grad, C = x ∘ act'(act_grad) (rounded to bf16 with e.round), into C[0:mr, 0:nr]. Each step is
// one branch over the whole tile (not a test per vector), alpha 1 skipped (x · 1 = x): with the
// accumulators' address kept from escaping (activate_tile), GCC keeps them in registers to the last
// store (before, it spilled the tile to the stack on every call: a K-128 product ran 13% slower).
// kFull: a whole tile (mr = R, nr = NR), every vector moved unmasked.
// Inlined, so that the tile stays in registers, and `e` taken by value, so that its fields are not
// read again after each store to C (which the compiler must otherwise assume may alias them).
// k16: C, preact and act_grad hold bf16 (GemmStorage::C; C and preact rounded as stored).
template <bool kFull, bool k16 = false, int R>
[[gnu::always_inline]] inline void store_tile(vf (&acc)[R][NV], float* C, int mr, int nr, const Epilogue e) {
  const auto width = [&](int r, int v) { return kFull ? W : r < mr ? std::max(0, std::min(nr - v * W, W)) : 0; };
  const auto each = [&](auto&& f) {  // f(r, v, width) on every vector of the tile, the branches above the loops
#pragma GCC unroll 16
    for (int r = 0; r < R; ++r)
#pragma GCC unroll 4
      for (int v = 0; v < NV; ++v) f(r, v, width(r, v));
  };
  if (e.alpha != 1.0f) each([&, alpha = vset1(e.alpha)](int r, int v, int) { acc[r][v] = vmul(alpha, acc[r][v]); });
  if (e.beta != 0.0f)
    each([&, beta = vset1(e.beta)](int r, int v, int n) {
      if (n > 0) acc[r][v] = vfma(beta, load_c<k16>(C, r * e.ldc + v * W, n), acc[r][v]);
    });
  if (e.bias) {
    vf bias[NV];
#pragma GCC unroll 4
    for (int v = 0; v < NV; ++v) bias[v] = vload_w(e.bias + v * W, width(0, v));  // (row 0 is always stored: mr >= 1)
    each([&](int r, int v, int) { acc[r][v] = vadd(acc[r][v], bias[v]); });
  }
  if (e.preact) each([&](int r, int v, int n) { if (n > 0) store_c<k16>(e.preact, r * e.ldc + v * W, acc[r][v], n); });
  if (e.act_grad || e.act != Act::none) {
    vf tile[R][NV];  // (a copy: see activate_tile)
    each([&](int r, int v, int) { tile[r][v] = acc[r][v]; });
    activate_tile<k16>(tile, e, width);
    each([&](int r, int v, int) { acc[r][v] = tile[r][v]; });
  }
  each([&](int r, int v, int n) {
    if (n > 0) store_c<k16>(C, r * e.ldc + v * W, e.round ? vround_bf16(acc[r][v]) : acc[r][v], n);
  });
}

// One R x NR tile (R = MR; fewer rows for a short last row panel, whose padding rows are then not
// computed): acc = ap * bp over kd panel rows (accumulate_tile), then C[0:mr, 0:nr] = epilogue(acc),
// mr <= R.
template <int R, bool kPairs, bool k16>
void micro_tile(int64_t kd, const float* ap, const float* bp, float* C, int mr, int nr, const Epilogue& e) {
  vf acc[R][NV];
#pragma GCC unroll 16
  for (int r = 0; r < R; ++r) {
#pragma GCC unroll 4
    for (int v = 0; v < NV; ++v) acc[r][v] = vzero();
    if (r < mr) {  // the tile of C, on its way to L1 while the k loop runs
      __builtin_prefetch(at(C, r * e.ldc, k16), 1);
      __builtin_prefetch(at(C, r * e.ldc + NR - 1, k16), 1);
    }
  }
  accumulate_tile<R, kPairs>(acc, kd, ap, bp);
  if (mr == R && nr == NR) store_tile<true, k16>(acc, C, mr, nr, e);
  else store_tile<false, k16>(acc, C, mr, nr, e);
}

#if NF_BF16_DOT
// pack_operand's bf16 pairs from a float source (E = float: converted) or a bf16 one (E = uint16_t, bf16
// storage: paired from its bits as they lie).
template <int P, class E>
void pack_pairs(float* dst, const E* src, int64_t ld, int64_t n, int64_t kc, bool row_major, float* buf) {
  constexpr bool b16 = std::is_same_v<E, uint16_t>;
  const int64_t kd = (kc + 1) / 2;
  if (row_major) {
    for (int64_t i = 0; i < n; i += P, dst += kd * P) {
      const int64_t rows = std::min<int64_t>(P, n - i);
      if constexpr (b16) pack_rows_bf16(buf, kd, src + i * ld, ld, rows, kc);
      else pack_rows(buf, kd, src + i * ld, ld, rows, kc);
      pack_transposed<P>(dst, buf, kd, rows, kd);
    }
    return;
  }
  constexpr int64_t kAhead = 4;  // pairs of source rows prefetched ahead of the conversion
  for (int64_t kk = 0; kk < kd; ++kk) {  // (source rows outer, as pack_k_major: each is read once)
    const E* s = src + 2 * kk * ld;
    if (2 * (kk + kAhead) + 1 < kc)
      for (int64_t i = 0; i < n; i += 16) {
        __builtin_prefetch(s + 2 * kAhead * ld + i);
        __builtin_prefetch(s + (2 * kAhead + 1) * ld + i);
      }
    const E* hi = 2 * kk + 1 < kc ? s + ld : nullptr;
    for (int64_t i = 0; i < n; i += P) {
      const int64_t rows = std::min<int64_t>(P, n - i);
      float* d = dst + i / P * kd * P + kk * P;
      if constexpr (b16) pack_bf16_pair_rows_bf16(d, s + i, hi ? hi + i : nullptr, rows);
      else pack_bf16_pair_rows(d, s + i, hi ? hi + i : nullptr, rows);
      std::fill(d + rows, d + P, 0.0f);
    }
  }
}
#endif

// Packs rows [0, n) x depth [0, kc) of op(A) or op(B) into P-row panels for `dot`: row-major
// (element (i, k) at src[i * ld + k]) or k-major (src[k * ld + i]) as pack_inl.h says; bf16_rounded
// rounds the panels' values; bf16_pairs makes the pairs in one pass from the source (pack_pairs): a
// row-major panel's rows become their bf16 arrays in `buf` (P x ⌈kc / 2⌉ words: pairs of neighbours),
// whose words are then transposed as floats; a k-major panel pairs source rows k and k + 1 directly.
// src16 (bf16 storage, GemmStorage): src holds bf16 values; the pairs come from its bits as they lie,
// the other forms widen each panel's source into `wide` (P x kc floats) first.
template <int P>
void pack_operand(float* dst, const float* src, int64_t ld, int64_t n, int64_t kc, bool row_major, Dot dot, float* buf,
                  bool src16 = false, float* wide = nullptr) {
  const uint16_t* s16 = reinterpret_cast<const uint16_t*>(src);
#if NF_BF16_DOT
  if (dot == Dot::bf16_pairs) {
    if (src16) pack_pairs<P>(dst, s16, ld, n, kc, row_major, buf);
    else pack_pairs<P>(dst, src, ld, n, kc, row_major, buf);
    return;
  }
#endif
  if (src16) {  // panel by panel: its source widened, then packed as a float source
    for (int64_t i = 0; i < n; i += P, dst += panel_depth(kc, dot) * P) {
      const int64_t rows = std::min<int64_t>(P, n - i);
      if (row_major)
        for (int64_t r = 0; r < rows; ++r) widen_bf16_n(wide + r * kc, s16 + (i + r) * ld, kc);
      else
        for (int64_t k = 0; k < kc; ++k) widen_bf16_n(wide + k * P, s16 + k * ld + i, rows);
      pack_operand<P>(dst, wide, row_major ? kc : P, rows, kc, row_major, dot, buf);
    }
    return;
  }
  if (row_major) pack_transposed<P>(dst, src, ld, n, kc);
  else pack_k_major<P>(dst, src, ld, n, kc);
  if (dot == Dot::bf16_rounded) vround_bf16_n(dst, dst, ceil_div(n, P) * P * kc);
}

// One tile of the row panel at `a` (mr rows) and the column panel at `b` (nr columns), kd panel rows
// deep. A short last row panel (M % MR rows) runs a narrower tile: MR / 3 or 2 MR / 3 rows.
template <bool kPairs, bool k16>
void run_tile(int64_t kd, const float* a, const float* b, float* c, int mr, int nr, const Epilogue& e) {
  if (mr <= MR / 3) micro_tile<MR / 3, kPairs, k16>(kd, a, b, c, mr, nr, e);
  else if (mr <= 2 * MR / 3) micro_tile<2 * MR / 3, kPairs, k16>(kd, a, b, c, mr, nr, e);
  else micro_tile<MR, kPairs, k16>(kd, a, b, c, mr, nr, e);
}

#if NF_AMX_BF16
// Precision 'bf16' on AMX (the avx512bf16 variant where cpu_has_amx_bf16(): Intel Sapphire Rapids on,
// Linux). C in blocks of 32 x 32 (one column panel), four 16 x 16 fp32 tiles (0-3: rows 0-15 / 16-31
// by columns 0-15 / 16-31), one tdpbf16ps per tile and 16 pairs of k, each A and B tile used twice.
//   B tiles (6, 7): 16 pair rows x 16 columns of a column panel as the GEMM packs it for the bf16
//   pairs ([kd][NR = 32] words), 128 bytes a row, from its columns 0 and 16; a last group of fewer
//   than 16 pair rows from a copy padded with zero rows (past it lie the next panel or the buffer's end).
//   A tiles (4, 5): 16 rows x 16 pairs of the A block in the tiles' layout, [⌈kd / 16⌉][mc16][16]
//   words (pack_amx_a; rows padded to 16 and pairs to 16 with zeros).
// The sums go to memory and through store_tile 8 rows at a time: the micro-kernel's epilogue. The
// products of bf16 pairs are exact in fp32 and summed in fp32 as vdpbf16ps sums them, in another
// order (a tile's 16 pairs in turn per output, where the micro-kernel runs one chain per output too).
// Tile state is per thread: gemm's chunks configure it (amx_configure) and release it.
#include "amx_inl.h"

struct Bf16Product {  // (amx_block_sums' products)
  static void upper() {
    _tile_dpbf16ps(0, 4, 6);
    _tile_dpbf16ps(1, 4, 7);
  }
  static void lower() {
    _tile_dpbf16ps(2, 5, 6);
    _tile_dpbf16ps(3, 5, 7);
  }
};
// The A block, rows [0, mc) x depth [0, kc) of op(A) (row-major: element (i, k) at src[i * ld + k];
// else src[k * ld + i]), into dst [⌈kd / 16⌉][mc16][16] words of bf16 pairs (k, k + 1 of a row), zeros
// past mc and kd; tmp holds the pairs first ([mc][kd], or [kd][mc16] transposed into dst 16 pairs at
// a time as floats).
// src16: src holds bf16 values (bf16 storage), paired from their bits.
void pack_amx_a(float* dst, float* tmp, const float* src, int64_t ld, int64_t mc, int64_t kc, bool row_major, bool src16) {
  const int64_t kd = (kc + 1) / 2, mc16 = round_up(mc, 16), groups = ceil_div(kd, 16);
  const uint16_t* s16 = reinterpret_cast<const uint16_t*>(src);
  if (!row_major) {
    if (src16) pack_row_pairs_bf16(tmp, mc16, s16, ld, kc, mc);
    else pack_row_pairs(tmp, mc16, src, ld, kc, mc);
    if (mc < mc16)
      for (int64_t kk = 0; kk < kd; ++kk) std::fill(tmp + kk * mc16 + mc, tmp + (kk + 1) * mc16, 0.0f);
    pack_transposed<16>(dst, tmp, mc16, kd, mc16);
    return;
  }
  if (src16) pack_rows_bf16(tmp, kd, s16, ld, mc, kc);
  else pack_rows(tmp, kd, src, ld, mc, kc);
  static_assert(W == 16, "a group of 16 pairs is one vector");
  for (int64_t g = 0; g < groups; ++g) {
    const int n = static_cast<int>(std::min<int64_t>(16, kd - 16 * g));
    float* d = dst + g * mc16 * 16;
    for (int64_t i = 0; i < mc; ++i) vstore(d + i * 16, vload_w(tmp + i * kd + 16 * g, n));
    std::fill(d + mc * 16, d + mc16 * 16, 0.0f);
  }
}

// C[0:mc, 0:nc] of one k block from the A block at aq (pack_amx_a, mc rows) and the B block at b
// ([nc / NR panels][kd][NR] words); epilogue(i, j) is the store's for rows from i, columns from j.
template <bool k16, class MakeEpilogue>
void amx_block(const float* aq, const float* b, float* C, int64_t ldc, int64_t mc, int64_t nc, int64_t kd, float* tail,
               MakeEpilogue&& epilogue) {
  alignas(64) float out[32 * NR];
  const int64_t gs = round_up(mc, 16) * 16;
  for (int64_t j = 0; j < nc; j += NR) {
    const float* bj = b + j * kd;
    static_assert(NR * sizeof(float) == 128, "a panel row is one B tile row pair: 128 bytes");
    amx_b_tail(bj, kd, tail);  // (the panel's kd pair rows)
    const int nr = static_cast<int>(std::min<int64_t>(NR, nc - j));
    for (int64_t i = 0; i < mc; i += 32) {
      const int64_t rows = std::min<int64_t>(32, mc - i);
      // Step g: 16 pairs of the A block's rows (gs words a group), and of the panel (its last
      // kd % 16 pair rows from tail [16][NR], a copy padded with zero rows).
      const auto a_at = [&](int64_t g) { return aq + i * 16 + g * gs; };
      const auto b_at = [&](int64_t g) { return kd - 16 * g >= 16 ? bj + 16 * g * NR : tail; };
      constexpr int64_t kRow = NR * sizeof(float);
      if (rows > 16) amx_block_sums<2, Bf16Product>(ceil_div(kd, 16), a_at, 64, b_at, kRow, out, kRow);
      else amx_block_sums<1, Bf16Product>(ceil_div(kd, 16), a_at, 64, b_at, kRow, out, kRow);
      for (int64_t r = 0; r < rows; r += 8) {
        vf acc[8][NV];
#pragma GCC unroll 8
        for (int q = 0; q < 8; ++q)
#pragma GCC unroll 4
          for (int v = 0; v < NV; ++v) acc[q][v] = vload(out + (r + q) * NR + v * W);
        const int mr = static_cast<int>(std::min<int64_t>(8, rows - r));
        float* c = at(C, (i + r) * ldc + j, k16);
        if (mr == 8 && nr == NR) store_tile<true, k16>(acc, c, mr, nr, epilogue(i + r, j));
        else store_tile<false, k16>(acc, c, mr, nr, epilogue(i + r, j));
      }
    }
  }
}
#endif

// Row blocks [ic0, ic1) of column block jc of one batch entry, over k blocks [pc0, pc1) (all of K,
// or one K range): for each k block, the B block is packed once into bp (or found in `packed`) and
// reused by every row block, each packed in turn into ap (buf: the fp32 panel of a bf16 pair
// conversion; amx: the bf16 pairs on AMX tiles, ap then the AMX scratch, Plan::amx_scratch_bytes).
// wide: the widening buffer of bf16 storage (Plan::wide_offset); st: which matrices are bf16.
void macro_tiles(float* C, float* preact, const float* act_grad, const float* A, const float* B, float* bp, float* ap,
                 float* buf, float* wide, const float* bias, const GemmDims& d, const Plan& p, int64_t jc, int64_t ic0,
                 int64_t ic1, int64_t pc0, int64_t pc1, const PackedB& packed, Dot dot, bool round_out, bool amx,
                 GemmStorage st) {
  const int64_t j0 = p.col(jc), nc = std::min(d.N, p.col(jc + 1)) - j0;
  const int64_t kstep = dot == Dot::bf16_pairs ? 2 : 1;  // k per panel row
  for (int64_t pc = pc0; pc < pc1; ++pc) {
    const int64_t k0 = pc * p.kc, kc = std::min(p.kc, d.K - k0), kd = panel_depth(kc, dot);
    const bool first = pc == pc0, last = pc == pc1 - 1;
    const float* b = bp;  // the B block: [nc / NR panels][kd][NR]
    if (packed)
      b = packed.panels + k0 / kstep * packed.ld + (packed.col0 + j0) * kd;
    else
      pack_operand<NR>(bp, at(B, d.transB ? j0 * d.ldb + k0 : k0 * d.ldb + j0, st.B), d.ldb, nc, kc, d.transB, dot, buf,
                       st.B, wide);
    for (int64_t ic = ic0; ic < ic1; ++ic) {
      const int64_t i0 = p.row(ic), mc = std::min(d.M, p.row(ic + 1)) - i0;
      const float* a_src = at(A, d.transA ? k0 * d.lda + i0 : i0 * d.lda + k0, st.A);
      // The store of rows from i, columns from j of this row block.
      const auto epilogue = [&](int64_t i, int64_t j) {
        return Epilogue{d.alpha, first ? d.beta : 1.0f, last && bias ? bias + j0 + j : nullptr,
                        last && preact ? at(preact, (i0 + i) * d.ldc + j0 + j, st.C) : nullptr,
                        last && act_grad ? at(act_grad, (i0 + i) * d.ldc + j0 + j, st.C) : nullptr, last ? d.act : Act::none, d.ldc,
                        dot != Dot::fp32, last && round_out};
      };
#if NF_AMX_BF16
      if (amx) {
        float* aq = ap + p.amx_a_floats();
        pack_amx_a(aq, ap, a_src, d.lda, mc, kc, !d.transA, st.A);
        float* c = at(C, i0 * d.ldc + j0, st.C);
        if (st.C) amx_block<true>(aq, b, c, d.ldc, mc, nc, kd, aq + p.amx_a_floats(), epilogue);
        else amx_block<false>(aq, b, c, d.ldc, mc, nc, kd, aq + p.amx_a_floats(), epilogue);
        continue;
      }
#endif
      pack_operand<MR>(ap, a_src, d.lda, mc, kc, !d.transA, dot, buf, st.A, wide);
      for (int64_t j = 0; j < nc; j += NR) {
        Epilogue e = epilogue(0, j);
        const int nr = static_cast<int>(std::min<int64_t>(NR, nc - j));
        for (int64_t i = 0; i < mc; i += MR) {
          const int mr = static_cast<int>(std::min<int64_t>(MR, mc - i));
          const float *a = ap + i * kd, *bj = b + j * kd;
          float* c = at(C, (i0 + i) * d.ldc + j0 + j, st.C);
          const bool pairs = NF_BF16_DOT && dot == Dot::bf16_pairs;
          if (st.C) pairs ? run_tile<NF_BF16_DOT, true>(kd, a, bj, c, mr, nr, e) : run_tile<false, true>(kd, a, bj, c, mr, nr, e);
          else pairs ? run_tile<NF_BF16_DOT, false>(kd, a, bj, c, mr, nr, e) : run_tile<false, false>(kd, a, bj, c, mr, nr, e);
          if (e.preact) e.preact = at(e.preact, MR * d.ldc, st.C);
          if (e.act_grad) e.act_grad = at(e.act_grad, MR * d.ldc, st.C);
        }
      }
    }
  }
}

// C = alpha (P0 + P1 + ...) + beta C over the nKS partial products [nKS][M][N] of a long-K product
// (summed in range order).
void sum_partials(float* C, const float* partials, const GemmDims& d, int64_t nKS) {
  const int64_t MN = d.M * d.N;
  parallel_for(d.M, std::max<int64_t>(1, 4096 / d.N), [&](int64_t r0, int64_t r1) {
    const vf alpha = vset1(d.alpha), beta = vset1(d.beta);
    for (int64_t i = r0; i < r1; ++i)
      for (int64_t j = 0; j < d.N; j += W) {
        const int n = static_cast<int>(std::min<int64_t>(W, d.N - j));
        const float* s = partials + i * d.N + j;
        vf x = vload_w(s, n);
        for (int64_t r = 1; r < nKS; ++r) x = vadd(x, vload_w(s + r * MN, n));
        float* c = C + i * d.ldc + j;
        x = vmul(alpha, x);
        if (d.beta != 0.0f) x = vfma(beta, vload_w(c, n), x);
        vstore_w(c, x, n);
      }
  });
}

// C (bf16) = the epilogue (alpha 1, d's beta, bias, preact, act or act_grad) of the float32 sums
// [batch][M][N] of a product: the second half of a bf16 C over more than one k block (see gemm).
void store_bf16_sums(float* C, float* preact, const float* act_grad, const float* sums, const float* bias, const GemmDims& d,
                     bool reduced) {
  constexpr int R = 8;
  const int64_t groups = ceil_div(d.M, R);
  parallel_for(d.batch * groups, std::max<int64_t>(1, 2048 / std::max<int64_t>(1, d.N)), [&](int64_t t0, int64_t t1) {
    for (int64_t t = t0; t < t1; ++t) {
      const int64_t e = t / groups, i = t % groups * R;
      const int mr = static_cast<int>(std::min<int64_t>(R, d.M - i));
      for (int64_t j = 0; j < d.N; j += NR) {
        const int nr = static_cast<int>(std::min<int64_t>(NR, d.N - j));
        vf acc[R][NV];
        for (int r = 0; r < R; ++r)
          for (int v = 0; v < NV; ++v) {
            const int n = r < mr ? std::max(0, std::min(nr - v * W, W)) : 0;
            acc[r][v] = n > 0 ? vload_w(sums + (e * d.M + i + r) * d.N + j + v * W, n) : vzero();
          }
        const int64_t c = e * d.strideC + i * d.ldc + j;
        store_tile<false, true>(acc, at(C, c, true), mr, nr,
                                Epilogue{1.0f, d.beta, bias ? bias + j : nullptr, preact ? at(preact, c, true) : nullptr,
                                         act_grad ? at(act_grad, c, true) : nullptr, d.act, d.ldc, reduced, false});
      }
    }
  });
}

}  // namespace

void gemm_scratch_bytes(const GemmDims& d, size_t* bytes) { *bytes = make_plan(d).scratch_bytes(); }

void gemm(float* C, float* preact, const float* A, const float* B, const float* bias, const GemmDims& d,
          const PackedB& packed, ops::Precision precision, bool round_out, const float* act_grad, GemmStorage st) {
  if (d.M == 0 || d.N == 0) return;
  // A bf16 C over more than one k block: the blocks' running sums in float32 (a bf16 C would round each),
  // in the calling thread's bf16_sums slot, the product's epilogue then from them (store_bf16_sums).
  if (st.C && make_plan(d).nKC > 1) {
    float* sums = static_cast<float*>(thread_scratch(ScratchSlot::bf16_sums, sizeof(float) * d.batch * d.M * d.N));
    if (!sums) return report_failure();  // (the op fails)
    GemmDims ds = d;
    ds.beta = 0.0f, ds.act = Act::none, ds.ldc = d.N, ds.strideC = d.M * d.N;
    gemm(sums, nullptr, A, B, nullptr, ds, packed, precision, false, nullptr, {st.A, st.B, false});
    store_bf16_sums(C, preact, act_grad, sums, bias, d, dot_of(precision) != Dot::fp32);
    return;
  }
  Plan p = make_plan(d, k_ranges(d, bias || preact || act_grad || d.act != Act::none || round_out || st.C, packed));
  const Dot dot = dot_of(precision);
  const bool amx = NF_AMX_BF16 && dot == Dot::bf16_pairs && cpu_has_amx_bf16();
  // A long-K product writes its K ranges' partial sums [nKS][M][N] into the calling thread's
  // `partials` slot (or, out of memory for them, runs uncut).
  float* partials = nullptr;
  GemmDims dk = d;  // a K range's product: into its partial sum, with alpha 1 and beta 0
  if (p.nKS > 1) {
    partials = static_cast<float*>(thread_scratch(ScratchSlot::partials, sizeof(float) * p.nKS * d.M * d.N));
    if (partials) dk.alpha = 1.0f, dk.beta = 0.0f, dk.ldc = d.N;
    else p = make_plan(d);
  }
  // Macro-tiles t = (batch entry or K range, column block, row block), row block fastest; two
  // contiguous chunks per thread (see the header), each packing its B blocks once for all its row blocks.
  const int64_t tiles = d.batch * p.nKS * p.nJC * p.nIC;
  parallel_for(tiles, ceil_div(tiles, 2 * num_threads()), [&](int64_t t0, int64_t t1) {
    float* bp = static_cast<float*>(thread_scratch(ScratchSlot::gemm_pack, amx ? p.amx_scratch_bytes() : p.scratch_bytes()));
    if (!bp) return report_failure();  // (the op fails)
    float* ap = bp + p.b_block_floats();
    float* buf = bp + p.panel_buffer_offset();
    float* wide = bp + p.wide_offset();
#if NF_AMX_BF16
    if (amx) {
      ap = bp + p.amx_offset();  // (past the conversion panels: the AMX scratch)
      amx_configure();
    }
#endif
    for (int64_t t = t0; t < t1;) {
      const int64_t group = t / p.nIC, e = group / p.nJC, jc = group % p.nJC;
      const int64_t ic0 = t % p.nIC, ic1 = std::min(p.nIC, ic0 + (t1 - t));
      if (partials)  // K range e
        macro_tiles(partials + e * d.M * d.N, nullptr, nullptr, A, B, bp, ap, buf, wide, nullptr, dk, p, jc, ic0, ic1,
                    p.first_block(e), p.first_block(e + 1), packed, dot, false, amx, {st.A, st.B, false});
      else  // batch entry e
        macro_tiles(at(C, e * d.strideC, st.C), preact ? at(preact, e * d.strideC, st.C) : nullptr,
                    act_grad ? at(act_grad, e * d.strideC, st.C) : nullptr, at(A, e * d.strideA, st.A),
                    at(B, e * d.strideB, st.B), bp, ap, buf, wide, bias, d, p, jc, ic0, ic1, 0, p.nKC, packed, dot,
                    round_out, amx, st);
      t += ic1 - ic0;
    }
#if NF_AMX_BF16
    if (amx) _tile_release();
#endif
  });
  if (partials) sum_partials(C, partials, d, p.nKS);
}

void gemm_panel_shape(int* nr, int64_t* kc_max) {
  *nr = NR;
  *kc_max = KC;
}

// For each k block of the GEMM's plan for K, the 32·⌈N / 32⌉ / NR panels of op(B) = Wᵀ (W [N, K] is
// B stored transposed), each packed as macro_tiles packs it for `precision`; panels wholly past N
// are zero. One panel (all its k blocks) per task.
void pack_weights(float* panels, const float* W, int64_t N, int64_t K, ops::Precision precision) {
  int64_t nKC = 0, kc = 0;
  k_blocks(K, &nKC, &kc);
  const Dot dot = dot_of(precision);
  const int64_t ld = ops::packed_width(N), kstep = dot == Dot::bf16_pairs ? 2 : 1;
  parallel_for(ld / NR, [&](int64_t p0, int64_t p1) {
    alignas(64) float buf[KC * NR];  // bf16 pairs: one fp32 panel before its conversion
    for (int64_t j0 = p0 * NR; j0 < p1 * NR; j0 += NR)
      for (int64_t pc = 0; pc < nKC; ++pc) {
        const int64_t k0 = pc * kc, depth = std::min(kc, K - k0), kd = panel_depth(depth, dot);
        float* dst = panels + k0 / kstep * ld + j0 * kd;
        if (j0 < N) pack_operand<NR>(dst, W + j0 * K + k0, K, std::min<int64_t>(NR, N - j0), depth, true, dot, buf);
        else std::memset(dst, 0, sizeof(float) * kd * NR);
      }
  });
}

}  // namespace nf::cpu::NF_ISA_NS

#ifdef NF_ISA_PRIMARY
namespace nf::cpu {

// The packing scratch one thread needs for a call (per ISA; defined above).
NF_KERNEL_DECL(void gemm_scratch_bytes(const GemmDims& d, size_t* bytes))

const char* bf16_gemm_kernels(Isa isa) {
  if (isa != Isa::avx512bf16) return "fp32";
  return cpu_has_amx_bf16() ? "amx" : "vdpbf16ps";
}

Status run(const ops::Gemm<float>& p) {
  NF_TRY(ops::int8_inference_check("gemm", p.precision, "the general gemm op (linearForward runs int8)"));
  GemmDims d = p.d;
  NF_TRY(gemm_check(&d));
  if (d.M == 0 || d.N == 0) return Status::Ok();
  size_t bytes = 0;
  NF_DISPATCH(gemm_scratch_bytes, d, &bytes);
  NF_CHECK(thread_scratch(ScratchSlot::gemm_pack, bytes), "gemm", "out of memory for the packing buffers");
  NF_DISPATCH(gemm, p.C, p.preact, p.A, p.B, p.bias, d, {}, p.precision);
  return Status::Ok();
}

}  // namespace nf::cpu
#endif
#include "isa_end.h"
