// The precision of an op's matrix products: the `precision` module property (DESIGN.md: precision is
// a module property, the same meaning on every device) as the ops that run GEMMs see it. One choice
// field, declared here once (precision_field) and read by every such op:
//   fp32  float32 multiply-add (the default: exactly the numbers of an op without the field).
//   tf32  float32 tensors, the products' inputs rounded to TF32 with float32 accumulation (PyTorch's
//         allow_tf32; cuBLASLt CUBLAS_COMPUTE_32F_FAST_TF32). The CPU has no TF32 unit: it computes fp32.
//   bf16  the products' inputs in bfloat16 with float32 accumulation: on CUDA the layers pass bf16
//         activations and weight copies (the op's X<bf16> instantiation, schema.h Acc; cuBLASLt
//         CUDA_R_16BF operands), and a call over float32 tensors rounds them (cuBLASLt
//         CUBLAS_COMPUTE_32F_FAST_16BF). On the CPU (float32 tensors): vdpbf16ps in the avx512bf16
//         variant, round-to-nearest-even then fp32 FMA in the others (native/cpu/gemm.cpp), the
//         backward's products (dX = dY W, dW = dYᵀ X) too.
//   int8  CPU inference only: dynamic quantization (onnxruntime's and PyTorch's quantize_dynamic) of
//         the Linear-style products (Linear, the feed-forward network, the attention projections, the
//         patch embedding): int8 weights per output channel, u8 activations per row, int32 sums
//         (native/cpu/gemm_int8.cpp). Ops that compute gradients, the general gemm op and the CUDA
//         kernels reject it (int8_inference_check).
// Statistics (LayerNorm, softmax, losses) and the optimizer stay fp32 whatever the precision. The
// attention core's products (QKᵀ, PV and the backward's) follow it on CUDA (tensor cores) and on the
// CPU at 'bf16' (bf16-rounded inputs, fp32 accumulation; native/cpu/attention.cpp, attentionDecode's
// one-row core too); on CUDA attentionDecode's one-row core stays fp32. At 'int8' the CPU core takes
// bf16 inputs as at 'bf16' where the CPU multiplies bf16 pairs (the avx512bf16 variant on AMX-BF16
// tiles, 22% off ViT-B/16's attention op at batch 1 on an Intel Xeon, or by vdpbf16ps where it beats
// the FMA, 15% off seed-stl10's on Zen 4) and stays fp32 elsewhere, where rounding would only cost
// (3-10% of the op on avx2) (attention_core_bf16); onnxruntime's quantize_dynamic runs those products
// in int8.
#pragma once
#include <string>

#include "../core/status.h"
#include "schema.h"

namespace nf::ops {

enum class Precision : int { fp32 = 0, tf32 = 1, bf16 = 2, int8 = 3 };

inline constexpr Choice<Precision> kPrecisionList[] = {
    {"fp32", Precision::fp32}, {"tf32", Precision::tf32}, {"bf16", Precision::bf16}, {"int8", Precision::int8}};
inline constexpr Choices<Precision> kPrecisions{"Precision", kPrecisionList};

// The doc of the `<bias>Rounded` inputs of the ops whose products add a bias in their epilogue: the
// float32 bias rounded to the activations' type, beside it. Under precision 'bf16' the layers pass the
// bias's bf16 copy (Parameter.storageFor, which AdamW keeps current), and the CUDA products' epilogue
// reads it instead of rounding the bias again on every call (one conversion launch a product: 50 in a
// ViT-B/16 forward). Optional: without it the products round the bias themselves, to the same values;
// the CPU kernels read the float32 bias.
inline constexpr const char* kRoundedBiasDoc =
    "the bias rounded to the activations' type (under precision 'bf16' its bf16 copy), which the CUDA products' "
    "epilogue reads instead of rounding it on every call (the same values; the CPU reads the float32 bias)";

// The `precision` field of an op that runs GEMMs (read after its dims).
template <class R>
void precision_field(R& r, Precision& v) {
  r.choice(v, "precision", kPrecisions, Precision::fp32);
}

// Whether the attention core's products take bf16 inputs (with fp32 accumulation) at precision p, on a
// CPU variant that multiplies bf16 pairs natively (bf16_dot) or not.
inline bool attention_core_bf16(Precision p, bool bf16_dot) {
  return p == Precision::bf16 || (p == Precision::int8 && bf16_dot);
}

// 'int8' is dynamic quantization for inference: what an op that computes gradients (or the general
// gemm op, or a device without int8 kernels) runs first; `what` says what the op is.
inline Status int8_inference_check(const char* op, Precision p, const char* what) {
  if (p != Precision::int8) return Status::Ok();
  return Status::InvalidArg(op, std::string("precision 'int8' is CPU inference only (the forward of Linear-style products), not ") +
                                    what + ": use 'fp32' (or 'bf16') for training");
}

// bfloat16 activations (an op's T = bf16) are precision 'bf16''s storage: what the CPU kernels of such
// a call check first (bf16 says whether the call's activations are bf16).
inline Status bf16_storage_check(const char* op, Precision p, bool bf16) {
  if (!bf16 || p == Precision::bf16) return Status::Ok();
  return Status::InvalidArg(op, "bfloat16 activations (Uint16Array) run at precision 'bf16' only: pass precision 'bf16', "
                                "or float32 activations");
}

}  // namespace nf::ops
