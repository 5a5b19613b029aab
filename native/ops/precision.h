// The precision of an op's matrix products: the `precision` module property (DESIGN.md: precision is
// a module property, the same meaning on every device) as the ops that run GEMMs see it. One choice
// field, declared here once (precision_field) and read by every such op:
//   fp32  float32 multiply-add (the default: exactly the numbers of an op without the field).
//   tf32  float32 tensors, the products' inputs rounded to TF32 with float32 accumulation (PyTorch's
//         allow_tf32; cuBLASLt CUBLAS_COMPUTE_32F_FAST_TF32). The CPU has no TF32 unit: it computes fp32.
//   bf16  float32 tensors, the products' inputs rounded to bfloat16 with float32 accumulation
//         (cuBLASLt CUBLAS_COMPUTE_32F_FAST_16BF). On the CPU: vdpbf16ps in the avx512bf16 variant,
//         round-to-nearest-even then fp32 FMA in the others (native/cpu/gemm.cpp), the backward's
//         products (dX = dY W, dW = dYᵀ X) too; there the attention core's QKᵀ and PV also take
//         bf16-rounded inputs (native/cpu/attention.cpp).
// Statistics (LayerNorm, softmax, losses) and the optimizer stay fp32 whatever the precision.
#pragma once
#include "schema.h"

namespace nf::ops {

enum class Precision : int { fp32 = 0, tf32 = 1, bf16 = 2 };

inline constexpr Choice<Precision> kPrecisionList[] = {
    {"fp32", Precision::fp32}, {"tf32", Precision::tf32}, {"bf16", Precision::bf16}};
inline constexpr Choices<Precision> kPrecisions{"Precision", kPrecisionList};

// The `precision` field of an op that runs GEMMs (read after its dims).
template <class R>
void precision_field(R& r, Precision& v) {
  r.choice(v, "precision", kPrecisions, Precision::fp32);
}

}  // namespace nf::ops
