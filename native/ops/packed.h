// Prepacked weights: a Linear weight W [N, K] (y = x Wᵀ) copied once into the CPU GEMM's own
// micro-panel layout, so inference products read it as it is instead of repacking W on every call
// (the packWeights op; linearForward, feedforwardForward, attentionForward and attentionDecode take
// such buffers as optional inputs next to their weights).
// Layout (floats): a 16-float header (64 bytes, so the panels keep the buffer's 64-byte alignment)
// holding int32 bit patterns — kPackedMagic, the ISA variant (0 scalar, 1 avx2, 2 avx512,
// 3 neon, 4 avx512bf16), NR, KC, N, K, the precision (0 fp32, for 'fp32' and 'tf32'; 2 bf16), then zeros —
// followed by op(B) = Wᵀ [K, N] cut into the GEMM's k blocks (K in as few blocks of kc ≤ KC rows as
// possible, kc = ⌈K / ⌈K / KC⌉⌉ rounded up to even, the last one what is left), each block
// Np = 32·⌈N / 32⌉ columns wide and stored as Np / NR panels [depth][NR] one after the other:
// element (k, n) of the block starting at row k0, `depth` rows deep, lies at
//   16 + k0·Np + (n / NR)·depth·NR + (k − k0)·NR + n % NR,
// and columns n ≥ N are zero. At precision bf16 the values are rounded to bfloat16, and the
// avx512bf16 variant stores them as pairs instead: 32-bit words each holding elements (k, n) (low
// half) and (k + 1, n) (high half) for even k − k0 (an odd depth's last k paired with 0), word
// 16 + k0·Np / 2 + (n / NR)·⌈depth / 2⌉·NR + (k − k0) / 2·NR + n % NR. NR (the micro-kernel's
// width: 32 on AVX-512, 16 on AVX2, 4 on scalar) divides 32, so the size, 16 + K·Np floats, is the
// same for every variant and precision but int8. The layout belongs to the CPU kernels of one variant and
// precision: a kernel given a buffer packed for another variant, precision or other dims rejects it
// (ERR_NF_INVALID_ARG naming the field); other backends ignore such buffers.
// The int8 packing (packWeights with precision 'int8', read by the same ops at precision 'int8'):
// W quantized per output channel, symmetric (onnxruntime's and PyTorch's quantize_dynamic with int8
// weights): s_n = max_k |W[n, k]| / 127 (1 for an all-zero row), q[n, k] = round(W[n, k] / s_n) in
// [-127, 127]. Layout (floats, the same for every ISA variant): the 16-float header (kPackedInt8Magic,
// ISA word -1, NR 32, KC K4, N, K, precision 3 int8), then s [Np] (float), then Σ_k q[n, k] [Np] (int32: the compensation
// term of the activations' zero points), then q as bytes in panels of 32 columns: byte (k, n) lies at
//   (n / 32)·K4·32 + (k / 4)·128 + (n % 32)·4 + k % 4,     K4 = 4·⌈K / 4⌉,
// (each 32-bit word is 4 consecutive k of one column, what vpdpbusd takes), zeros past N and K.
// Size: 16 + 32·⌈N / 32⌉·(2 + ⌈K / 4⌉) floats, about a quarter of the float32 packing.
// Dimension key: N output features (columns of op(B)), K input features (the reduction).
#pragma once
#include <cstdint>

#include "precision.h"
#include "schema.h"

namespace nf::ops {

constexpr int64_t kPackedHeader = 16;  // floats before the panels
constexpr int64_t kPackedWidth = 32;   // columns are padded to a multiple of this (every NR divides it)
// The header's first word: an arbitrary int32 whose float value (0.806) is unremarkable, so that it
// does not dominate a relative comparison of two packings.
constexpr int32_t kPackedMagic = 0x3F4E4650;
constexpr int32_t kPackedInt8Magic = 0x3F4E4638;  // the int8 packing's (float value 0.806 too)
// The header's words, in order.
enum PackedWord { kWordMagic = 0, kWordIsa, kWordNR, kWordKC, kWordN, kWordK, kWordPrecision };

// The width of a k block of the packing of an [N, K] weight, Np = 32 · ⌈N / 32⌉, and its floats,
// 16 + K · Np.
inline int64_t packed_width(int64_t N) { return (N + kPackedWidth - 1) / kPackedWidth * kPackedWidth; }
inline int64_t packed_floats(int64_t N, int64_t K) { return kPackedHeader + K * packed_width(N); }
// The int8 packing's floats: 16 + Np·(2 + ⌈K / 4⌉).
inline int64_t packed_int8_floats(int64_t N, int64_t K) { return kPackedHeader + packed_width(N) * (2 + (K + 3) / 4); }
inline int64_t packed_floats(int64_t N, int64_t K, Precision p) {
  return p == Precision::int8 ? packed_int8_floats(N, K) : packed_floats(N, K);
}

// The shape of the packing of W [n, k] at precision `prec` (dims named by their fields, e.g. "outFeatures").
#define NF_PACKED_SHAPE(prec, n, k, n_text, k_text)                                                          \
  ::nf::ops::Shape("[16 + " k_text " · 32 · ⌈" n_text " / 32⌉] (precision 'int8': [16 + 32 · ⌈" n_text \
                   " / 32⌉ · (2 + ⌈" k_text " / 4⌉)])",                                                     \
                   ::nf::ops::packed_floats((n), (k), (prec)))

// Dims of packed weights fit the header's int32 words.
constexpr int64_t kMaxPackedDim = (int64_t(1) << 31) - 1;

template <class T>
struct PackWeights {
  static constexpr const char* name = "packWeights";
  static constexpr const char* summary =
      "Packs a Linear weight W [N, K] (outputs × inputs, y = x Wᵀ) for the active CPU kernel variant and `precision` "
      "(that of the ops that will read it): packed [16 + K · 32 · ⌈N / 32⌉] receives a 16-float header (magic, ISA "
      "variant, NR, KC, N, K, precision as int32 bit patterns) and Wᵀ in the GEMM's micro-panel layout "
      "(native/ops/packed.h; bf16: rounded, or as bf16 pairs on avx512bf16). linearForward (WPacked), feedforwardForward "
      "(W1Packed, W2Packed), attentionForward and attentionDecode (qkvWeightPacked, projWeightPacked) read it "
      "instead of packing W on every call, with bit-identical results; they reject a buffer packed for another "
      "variant (after setIsa), another precision or other dims. Repack whenever W changes. CPU only. With precision "
      "'int8' it quantizes W per output channel instead (the int8 packing of native/ops/packed.h, [16 + 32 · ⌈N / 32⌉ · "
      "(2 + ⌈K / 4⌉)], the same for every variant), which the ops read at precision 'int8'.";
  // The layout is a CPU kernel variant's own (its NR, KC): no device has a use for it.
  static constexpr bool host_only = true;
  int64_t N = 0, K = 0;
  Precision precision = Precision::fp32;
  T* packed = nullptr;
  const T* W = nullptr;

  template <class R>
  static void fields(R& r, PackWeights& p) {
    r.dim(p.N, "N", 1, kMaxPackedDim);
    r.dim(p.K, "K", 1, kMaxPackedDim);
    precision_field(r, p.precision);
    r.out(p.packed, "packed", NF_PACKED_SHAPE(p.precision, p.N, p.K, "N", "K"));
    r.in(p.W, "W", NF_SHAPE(p.N, p.K));
  }
};

}  // namespace nf::ops
