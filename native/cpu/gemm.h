// GEMM: C = act(alpha * op(A) op(B) + beta * C + bias), row-major, strided-batched.
// Dimension key: op(A) is [M, K], op(B) is [K, N], C is [M, N]; transA/transB mean A is stored
// [K, M] / B is stored [N, K] (so a Linear layer y = x W^T is gemm(transB=true)). lda/ldb/ldc are
// row strides in elements (0 = packed). bias is [N] (one per column), optional. When `preact` is
// given, the value before the activation is written there too (what an activation's backward
// needs). Batches: batch > 1 steps A, B, C (and preact) by strideA/strideB/strideC elements.
#pragma once
#include <cstdint>

#include "../ops/linear.h"
#include "gemm_int8.h"
#include "kernel_decl.h"

namespace nf::cpu {

// The GEMM descriptor, its checks and the activations are the op schema's (native/ops/linear.h),
// shared with every backend.
using Act = ops::Act;
using GemmDims = ops::GemmDims;
using ops::gemm_check;

// An op(B) already in the GEMM's micro-panel layout: a weight prepacked by the packWeights op
// (native/cpu/packed.h has the layout; packed_weight reads a buffer's header into one of these).
// The GEMM reads columns [col0, col0 + N) of it instead of packing B, with the same result bit for
// bit (the micro-kernel sees the same panels).
// With `int8` (precision 'int8', native/cpu/gemm_int8.h) the product runs quantized instead: from
// the int8 packing `q` (columns from its column 0), or, when q is empty, from W quantized per call.
struct PackedB {
  const float* panels = nullptr;  // the first k block (null: not packed, the GEMM packs B itself)
  int64_t ld = 0;                 // floats (bf16 pairs: words) per panel row of a k block: 32·⌈N / 32⌉
  int64_t col0 = 0;               // the column of op(B) the GEMM's column 0 is (a multiple of nr)
  int nr = 0;                     // the panels' width (the micro-kernel's NR)
  bool int8 = false;              // precision 'int8'
  Int8Weights q;                  // the int8 packing (int8 only; empty: quantize W per call)

  explicit operator bool() const { return panels != nullptr; }
  // Columns from `c` on; not packed (the GEMM then packs B itself) unless `c` starts a panel.
  PackedB from_column(int64_t c) const {
    if (int8) return {nullptr, 0, 0, 0, true, q.from_column(c)};
    if (!panels || c % nr != 0) return {};
    PackedB p = *this;
    p.col0 += c;
    return p;
  }
};

// Which of a product's matrices hold bfloat16 (ops::bf16, native/ops/schema.h: the activations of
// precision 'bf16' on the CPU) instead of float: A, B, and C (with preact and act_grad, laid out like
// C). Their pointers then point at bf16 values (storage_ptr): the GEMM reads them widened (exactly)
// and stores C and preact rounded to nearest even (vround_bf16), offsets counted in bf16 elements.
// Only at precision 'bf16', whose products take bf16-rounded inputs anyway, so the products are
// those of the float call on the same values.
struct GemmStorage {
  bool A = false, B = false, C = false;
};

// A tensor's storage as the GEMM's float pointer (bf16 storage says so in GemmStorage).
inline float* storage_ptr(float* p) { return p; }
inline const float* storage_ptr(const float* p) { return p; }
inline float* storage_ptr(ops::bf16* p) { return reinterpret_cast<float*>(p); }
inline const float* storage_ptr(const ops::bf16* p) { return reinterpret_cast<const float*>(p); }

// The gemm op: the public, ISA-dispatched entry point (validates, then runs on the thread pool).
Status run(const ops::Gemm<float>& p);

// One variant per ISA. Expects checked dims. Runs threaded unless called inside a parallel region.
// With `packed` (a packing of op(B) for this variant and precision, K = d.K), B is not read.
// `precision` (native/ops/precision.h): fp32 and tf32 multiply fp32; bf16 rounds the products'
// inputs to bfloat16 and accumulates in fp32 (vdpbf16ps in the avx512bf16 variant, emulated with
// fp32 FMA elsewhere; gemm.cpp). round_out: C rounded to bfloat16 as it is stored (vround_bf16 of
// simd.h, after the activation; preact is not): for an output that bf16 products read without a
// GEMM's packing (the attention core's Q, K, V). act_grad (row-major like C, ldc; else null): an
// activation's backward fused into the product that forms its output's gradient, C = (alpha op(A)
// op(B) + beta C + bias) ∘ d.act'(act_grad) instead of d.act applied: the same values, bit for bit,
// as the product stored and then act_backward_n (activation_inl.h), without the pass over C.
// storage: which matrices are bf16 (GemmStorage; C bf16 rounds C as round_out does).
NF_KERNEL_DECL(void gemm(float* C, float* preact, const float* A, const float* B, const float* bias,
                         const GemmDims& d, const PackedB& packed = {},
                         ops::Precision precision = ops::Precision::fp32, bool round_out = false,
                         const float* act_grad = nullptr, GemmStorage storage = {}))

// The kernels of precision 'bf16''s products on variant `isa`: "amx" (the avx512bf16 variant where
// cpu_has_amx_bf16(): tdpbf16ps tiles), "vdpbf16ps" (avx512bf16 elsewhere) or "fp32" (the other
// variants: the bf16 rounding with fp32 FMAs).
const char* bf16_gemm_kernels(Isa isa);

// The micro-kernel's panel width NR and the largest k block KC of each variant.
NF_KERNEL_DECL(void gemm_panel_shape(int* nr, int64_t* kc_max))
// Writes the panels of a packWeights buffer for this variant (everything after its header, see
// native/ops/packed.h): op(B) = Wᵀ for W [N, K], exactly as the GEMM would pack it block by block
// at `precision`.
NF_KERNEL_DECL(void pack_weights(float* panels, const float* W, int64_t N, int64_t K, ops::Precision precision))

}  // namespace nf::cpu
