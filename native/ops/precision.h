// The precision of an op's matrix products: the `precision` module property (DESIGN.md: precision is
// a module property, the same meaning on every device) as the ops that run GEMMs see it. One choice
// field, declared here once (precision_field) and read by every such op:
//   fp32  float32 multiply-add (the default: exactly the numbers of an op without the field).
//   tf32  float32 tensors, the products' inputs rounded to TF32 with float32 accumulation (PyTorch's
//         allow_tf32; cuBLASLt CUBLAS_COMPUTE_32F_FAST_TF32). The CPU has no TF32 unit: it computes fp32.
//   bf16  the products' inputs in bfloat16 with float32 accumulation: on CUDA the layers pass bf16
//         activations and weight copies (the op's X<bf16> instantiation, schema.h Acc; cuBLASLt
//         CUDA_R_16BF operands), and a call over float32 tensors rounds them (cuBLASLt
//         CUBLAS_COMPUTE_32F_FAST_16BF). Not implemented on the CPU yet (issue 25): the CPU kernels
//         reject it (cpu_precision_check).
// Statistics (LayerNorm, softmax, losses), the optimizer and the attention core (QKᵀ, softmax, PV)
// stay fp32 whatever the precision.
#pragma once
#include <string>

#include "../core/status.h"
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

// What the CPU kernels run first: fp32 and tf32 compute fp32; bf16 is not implemented yet (issue 25).
inline Status cpu_precision_check(const char* op, Precision p) {
  NF_CHECK(p != Precision::bf16, op,
           "precision 'bf16' is not implemented on the CPU yet: use 'fp32' or 'tf32' on the CPU, or run on 'cuda'");
  return Status::Ok();
}

}  // namespace nf::ops
