// Feed-forward network, forward and backward, as one layer-level op on top of the Linear layer.
// Math: h = x W1ᵀ + b1; a = dropout(act(h)); y = a W2ᵀ + b2. Dropout keeps element i = row*F + f
//   when nf::dropout_keep(seed, offset, i, p), scaling it by 1/(1-p) (torch's nn.Dropout).
//   Backward: da = dy W2; dW2 += dyᵀ a; db2 += Σ dy; dh = (da ∘ mask/(1-p)) ∘ act'(h);
//   dx = dh W1; dW1 += dhᵀ x; db1 += Σ dh. The mask is regenerated from (seed, offset).
// Layout: x, y, dy, dx [rows, D]; h, a [rows, F]; W1 [F, D], b1 [F], W2 [D, F], b2 [D], row-major.
// fc1's bias and activation run in the GEMM epilogue, which also writes h; without dropout, act'(h)
// runs in the epilogue of da's GEMM (gemm's act_grad: dh without a pass over da). The forward reads
// prepacked weights (W1Packed, W2Packed from packWeights) instead of packing W1, W2 when given.
// Backward keeps da/dh [rows, F] in the calling thread's scratch slot `layer`.
// Dimension key: rows = B*T, D = model width, F = hidden width.
#include "feedforward.h"

#include <type_traits>

#include "../core/allocator.h"
#include "../core/philox.h"
#include "../core/threadpool.h"
#include "linear.h"
#include "packed.h"
#include "isa.h"

namespace nf::cpu::NF_ISA_NS {
#include "simd.h"
#include "activation_inl.h"

namespace {

// Applies the dropout mask to elements [i0, i1) of v (v[i] is stream element i): kept values are
// scaled by 1/(1-p), dropped ones zeroed.
void apply_dropout(float* v, int64_t i0, int64_t i1, const FeedForwardDims& d) {
  const float scale = d.dropout < 1.0f ? 1.0f / (1.0f - d.dropout) : 0.0f;
  for (int64_t i = i0; i < i1; ++i)
    v[i] = dropout_keep(d.seed, d.offset, static_cast<uint64_t>(i), d.dropout) ? v[i] * scale : 0.0f;
}

}  // namespace

void feedforward_forward(const ops::FeedForwardForward<float>& p, const PackedB& W1p, const PackedB& W2p) {
  const FeedForwardDims& d = p.d;
  const int64_t F = d.F;
  NF_ISA_NS::linear_forward(p.a, p.h, p.x, p.W1, p.b1, {d.rows, d.D, F}, d.activation, W1p, p.precision);
  if (d.dropout > 0.0f)
    parallel_for(d.rows, 4, [&](int64_t r0, int64_t r1) { apply_dropout(p.a, r0 * F, r1 * F, d); });
  NF_ISA_NS::linear_forward(p.y, nullptr, p.a, p.W2, p.b2, {d.rows, F, d.D}, Act::none, W2p, p.precision);
}

void feedforward_backward(const ops::FeedForwardBackward<float>& p) {
  const FeedForwardDims& d = p.d;
  const int64_t F = d.F;
  float* dh = static_cast<float*>(thread_scratch(ScratchSlot::layer, sizeof(float) * d.rows * F));
  // dh = (dy W2 (∘ the dropout mask)) ∘ act'(h): without dropout act' in the product's epilogue, with
  // it (the mask comes first) a pass after the product (dh then holds da = dy W2).
  const bool fused = d.dropout == 0.0f;
  NF_ISA_NS::linear_backward(dh, p.dW2, p.db2, p.dy, p.a, p.W2, {d.rows, F, d.D}, p.precision, fused ? p.h : nullptr,
                             d.activation);
  if (!fused)
    parallel_for(d.rows, 4, [&](int64_t r0, int64_t r1) {
      apply_dropout(dh, r0 * F, r1 * F, d);
      act_backward_n(dh + r0 * F, dh + r0 * F, p.h + r0 * F, (r1 - r0) * F, d.activation);
    });
  NF_ISA_NS::linear_backward(p.dx, p.dW1, p.db1, dh, p.x, p.W1, {d.rows, d.D, F}, p.precision);
}

}  // namespace nf::cpu::NF_ISA_NS

#ifdef NF_ISA_PRIMARY
namespace nf::cpu {

Status run(const ops::FeedForwardForward<float>& params) {
  const char* op = "feedforward_forward";
  ops::FeedForwardForward<float> p = params;
  p.d = ops::with_step_values(params.d);
  NF_TRY(ops::feedforward_check(op, p.d));
  const Isa isa = active_isa();
  PackedB W1p, W2p;
  NF_TRY(packed_weight(&W1p, p.W1_packed, p.d.F, p.d.D, isa, p.precision, op, "W1Packed"));
  NF_TRY(packed_weight(&W2p, p.W2_packed, p.d.D, p.d.F, isa, p.precision, op, "W2Packed"));
  if (p.d.rows == 0) return Status::Ok();
  NF_DISPATCH_TO(isa, feedforward_forward, p, W1p, W2p);
  return Status::Ok();
}

Status run(const ops::FeedForwardBackward<float>& params) {
  ops::FeedForwardBackward<float> p = params;
  p.d = ops::with_step_values(params.d);
  NF_TRY(ops::int8_inference_check("feedforward_backward", p.precision, "a backward"));
  NF_TRY(ops::feedforward_check("feedforward_backward", p.d));
  NF_CHECK(p.h && p.a, "feedforward_backward", "needs the pre-activation h and activation a saved by forward");
  if (p.d.rows == 0) return Status::Ok();
  NF_CHECK(thread_scratch(ScratchSlot::layer, sizeof(float) * p.d.rows * p.d.F), "feedforward_backward",
           "out of memory for the hidden-layer gradient");
  NF_DISPATCH(feedforward_backward, p);
  return Status::Ok();
}

}  // namespace nf::cpu
#endif
#include "isa_end.h"
