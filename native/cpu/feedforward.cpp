// Feed-forward network, forward and backward, as one layer-level op on top of the Linear layer.
// Math: h = x W1ᵀ + b1; a = dropout(act(h)); y = a W2ᵀ + b2. Dropout keeps element i = row*F + f
//   when nf::dropout_keep(seed, offset, i, p), scaling it by 1/(1-p) (torch's nn.Dropout).
//   Backward: da = dy W2; dW2 += dyᵀ a; db2 += Σ dy; dh = (da ∘ mask/(1-p)) ∘ act'(h);
//   dx = dh W1; dW1 += dhᵀ x; db1 += Σ dh. The mask is regenerated from (seed, offset).
// Layout: x, y, dy, dx [rows, D]; h, a [rows, F]; W1 [F, D], b1 [F], W2 [D, F], b2 [D], row-major.
// fc1's bias and activation run in the GEMM epilogue, which also writes h. Backward keeps da/dh
// [rows, F] in the calling thread's scratch slot 2.
// Dimension key: rows = B*T, D = model width, F = hidden width.
#include "feedforward.h"

#include "../core/allocator.h"
#include "../core/philox.h"
#include "../core/threadpool.h"
#include "linear.h"
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

void feedforward_forward(float* y, float* h, float* a, const float* x, const float* W1, const float* b1,
                         const float* W2, const float* b2, const FeedForwardDims& d) {
  const int64_t F = d.F;
  NF_ISA_NS::linear_forward(a, h, x, W1, b1, {d.rows, d.D, F}, d.activation);
  if (d.dropout > 0.0f)
    parallel_for(d.rows, 4, [&](int64_t r0, int64_t r1) { apply_dropout(a, r0 * F, r1 * F, d); });
  NF_ISA_NS::linear_forward(y, nullptr, a, W2, b2, {d.rows, F, d.D}, Act::none);
}

void feedforward_backward(float* dx, float* dW1, float* db1, float* dW2, float* db2, const float* dy,
                          const float* x, const float* h, const float* a, const float* W1, const float* W2,
                          const FeedForwardDims& d) {
  const int64_t F = d.F;
  float* dh = static_cast<float*>(thread_scratch(2, sizeof(float) * d.rows * F));
  NF_ISA_NS::linear_backward(dh, dW2, db2, dy, a, W2, {d.rows, F, d.D});  // dh holds da = dy W2
  parallel_for(d.rows, 4, [&](int64_t r0, int64_t r1) {
    if (d.dropout > 0.0f) apply_dropout(dh, r0 * F, r1 * F, d);
    act_backward_n(dh + r0 * F, dh + r0 * F, h + r0 * F, (r1 - r0) * F, d.activation);
  });
  NF_ISA_NS::linear_backward(dx, dW1, db1, dh, x, W1, {d.rows, d.D, F});
}

}  // namespace nf::cpu::NF_ISA_NS

#ifdef NF_ISA_PRIMARY
namespace nf::cpu {

static Status feedforward_check(const char* op, const FeedForwardDims& d) {
  NF_CHECK(d.rows >= 0, op, "rows must be non-negative");
  NF_CHECK(d.D >= 1 && d.F >= 1, op, "D and F must be at least 1");
  NF_CHECK(d.activation == Act::relu || d.activation == Act::gelu || d.activation == Act::gelu_tanh, op,
           "activation must be relu, gelu or gelu_tanh");
  NF_CHECK(d.dropout >= 0.0f && d.dropout <= 1.0f, op, "dropout must lie in [0, 1]");
  return Status::Ok();
}

Status feedforward_forward(float* y, float* h, float* a, const float* x, const float* W1, const float* b1,
                           const float* W2, const float* b2, FeedForwardDims d) {
  NF_TRY(feedforward_check("feedforward_forward", d));
  if (d.rows == 0) return Status::Ok();
  NF_DISPATCH(feedforward_forward, y, h, a, x, W1, b1, W2, b2, d);
  return Status::Ok();
}

Status feedforward_backward(float* dx, float* dW1, float* db1, float* dW2, float* db2, const float* dy,
                            const float* x, const float* h, const float* a, const float* W1, const float* W2,
                            FeedForwardDims d) {
  NF_TRY(feedforward_check("feedforward_backward", d));
  NF_CHECK(h && a, "feedforward_backward", "needs the pre-activation h and activation a saved by forward");
  if (d.rows == 0) return Status::Ok();
  NF_CHECK(thread_scratch(2, sizeof(float) * d.rows * d.F), "feedforward_backward",
           "out of memory for the hidden-layer gradient");
  NF_DISPATCH(feedforward_backward, dx, dW1, db1, dW2, db2, dy, x, h, a, W1, W2, d);
  return Status::Ok();
}

}  // namespace nf::cpu
#endif
