// Feed-forward network, forward and backward, as one layer-level op on top of the Linear layer.
// Math: h = x W1ᵀ + b1; a = dropout(act(h)); y = a W2ᵀ + b2 (+ residual). Dropout keeps element i = row*F + f
//   when nf::dropout_keep(seed, offset, i, p), scaling it by 1/(1-p) (torch's nn.Dropout).
//   Backward: da = dy W2; dW2 += dyᵀ a; db2 += Σ dy; dh = (da ∘ mask/(1-p)) ∘ act'(h);
//   dx = dh W1; dW1 += dhᵀ x; db1 += Σ dh. The mask is regenerated from (seed, offset).
// With a residual input (a pre-LN block's residual stream) y += residual after fc2, the accumulate op's add.
// Layout: x, y, residual, dy, dx [rows, D]; h, a [rows, F]; W1 [F, D], b1 [F], W2 [D, F], b2 [D], row-major.
// fc1's bias and activation run in the GEMM epilogue, which also writes h; without dropout, act'(h)
// runs in the epilogue of da's GEMM (gemm's act_grad: dh without a pass over da). The forward reads
// prepacked weights (W1Packed, W2Packed from packWeights) instead of packing W1, W2 when given.
// Backward keeps da/dh [rows, F] in the calling thread's scratch slot `layer`.
// bf16 activations (T = ops::bf16, precision 'bf16'): x, y, h, a, dy, dx, the weights' bf16 copies
// and the scratch dh are bf16 storage (gemm's GemmStorage: read widened, stored rounded to nearest
// even), the biases and gradients float; the products are those of float storage on the same values
// (they round their inputs to bf16 anyway), what changes is that h, a, y and dh are stored rounded:
// half the bytes of the layer's widest tensors. Dropout (and act' after it) runs on rows widened to
// floats and stored rounded again: a is rounded before the dropout's scaling as well as after it.
// Dimension key: rows = B*T, D = model width, F = hidden width.
#include "feedforward.h"

#include <type_traits>
#include <vector>

#include "../core/allocator.h"
#include "../core/philox.h"
#include "../core/threadpool.h"
#include "elementwise.h"
#include "linear.h"
#include "packed.h"
#include "isa.h"

namespace nf::cpu::NF_ISA_NS {
#include "simd.h"
#include "activation_inl.h"

namespace {

template <class T>
constexpr bool kBf16 = std::is_same_v<T, ops::bf16>;

// Applies the dropout mask to the n values at v, stream elements i0, i0 + 1, ...: kept values are
// scaled by 1/(1-p), dropped ones zeroed.
void apply_dropout(float* v, int64_t i0, int64_t n, const FeedForwardDims& d) {
  const float scale = d.dropout < 1.0f ? 1.0f / (1.0f - d.dropout) : 0.0f;
  for (int64_t j = 0; j < n; ++j)
    v[j] = dropout_keep(d.seed, d.offset, static_cast<uint64_t>(i0 + j), d.dropout) ? v[j] * scale : 0.0f;
}

// f(row values, row) on the rows [r0, r1) of bf16 v [rows, width], each widened to floats and rounded back.
template <class F>
void on_bf16_rows(ops::bf16* v, int64_t r0, int64_t r1, int64_t width, F&& f) {
  std::vector<float> row(static_cast<size_t>(width));
  uint16_t* bits = reinterpret_cast<uint16_t*>(v);
  for (int64_t r = r0; r < r1; ++r) {
    widen_bf16_n(row.data(), bits + r * width, width);
    f(row.data(), r);
    narrow_bf16_n(bits + r * width, row.data(), width);
  }
}

template <class T>
void forward(const ops::FeedForwardForward<T>& p, const PackedB& W1p, const PackedB& W2p) {
  const FeedForwardDims& d = p.d;
  const int64_t F = d.F;
  constexpr bool b16 = kBf16<T>;
  NF_ISA_NS::linear_forward(storage_ptr(p.a), storage_ptr(p.h), storage_ptr(p.x), storage_ptr(p.W1), p.b1,
                            {d.rows, d.D, F}, d.activation, W1p, p.precision, false, b16);
  if (d.dropout > 0.0f)
    parallel_for(d.rows, 4, [&](int64_t r0, int64_t r1) {
      if constexpr (b16) on_bf16_rows(p.a, r0, r1, F, [&](float* row, int64_t r) { apply_dropout(row, r * F, F, d); });
      else apply_dropout(p.a + r0 * F, r0 * F, (r1 - r0) * F, d);
    });
  NF_ISA_NS::linear_forward(storage_ptr(p.y), nullptr, storage_ptr(p.a), storage_ptr(p.W2), p.b2, {d.rows, F, d.D},
                            Act::none, W2p, p.precision, false, b16);
  if (!p.residual) return;  // y += residual: the accumulate op's add (bf16: on rows widened, stored rounded)
  if constexpr (b16) {
    parallel_for(d.rows, 4, [&](int64_t r0, int64_t r1) {
      std::vector<float> res(static_cast<size_t>(d.D));
      on_bf16_rows(p.y, r0, r1, d.D, [&](float* row, int64_t r) {
        widen_bf16_n(res.data(), reinterpret_cast<const uint16_t*>(p.residual) + r * d.D, d.D);
        for (int64_t c = 0; c < d.D; ++c) row[c] += res[static_cast<size_t>(c)];
      });
    });
  } else {
    NF_ISA_NS::add(p.y, p.y, p.residual, d.rows * d.D);
  }
}

template <class T>
void backward(const ops::FeedForwardBackward<T>& p) {
  const FeedForwardDims& d = p.d;
  const int64_t F = d.F;
  constexpr bool b16 = kBf16<T>;
  T* dh = static_cast<T*>(thread_scratch(ScratchSlot::layer, sizeof(T) * d.rows * F));
  // dh = (dy W2 (∘ the dropout mask)) ∘ act'(h): without dropout act' in the product's epilogue, with
  // it (the mask comes first) a pass after the product (dh then holds da = dy W2).
  const bool fused = d.dropout == 0.0f;
  NF_ISA_NS::linear_backward(storage_ptr(dh), p.dW2, p.db2, storage_ptr(p.dy), storage_ptr(p.a), storage_ptr(p.W2),
                             {d.rows, F, d.D}, p.precision, fused ? storage_ptr(p.h) : nullptr, d.activation, b16);
  if (!fused)
    parallel_for(d.rows, 4, [&](int64_t r0, int64_t r1) {
      if constexpr (b16) {
        std::vector<float> h(static_cast<size_t>(F));
        on_bf16_rows(dh, r0, r1, F, [&](float* row, int64_t r) {
          apply_dropout(row, r * F, F, d);
          widen_bf16_n(h.data(), reinterpret_cast<const uint16_t*>(p.h) + r * F, F);
          act_backward_n(row, row, h.data(), F, d.activation);
        });
      } else {
        apply_dropout(dh + r0 * F, r0 * F, (r1 - r0) * F, d);
        act_backward_n(dh + r0 * F, dh + r0 * F, p.h + r0 * F, (r1 - r0) * F, d.activation);
      }
    });
  NF_ISA_NS::linear_backward(storage_ptr(p.dx), p.dW1, p.db1, storage_ptr(dh), storage_ptr(p.x), storage_ptr(p.W1),
                             {d.rows, d.D, F}, p.precision, nullptr, Act::none, b16);
}

}  // namespace

void feedforward_forward(const ops::FeedForwardForward<float>& p, const PackedB& W1p, const PackedB& W2p) {
  forward(p, W1p, W2p);
}
void feedforward_forward_bf16(const ops::FeedForwardForward<ops::bf16>& p, const PackedB& W1p, const PackedB& W2p) {
  forward(p, W1p, W2p);
}
void feedforward_backward(const ops::FeedForwardBackward<float>& p) { backward(p); }
void feedforward_backward_bf16(const ops::FeedForwardBackward<ops::bf16>& p) { backward(p); }

}  // namespace nf::cpu::NF_ISA_NS

#ifdef NF_ISA_PRIMARY
namespace nf::cpu {
namespace {

template <class T>
Status run_forward(const ops::FeedForwardForward<T>& params) {
  const char* op = "feedforward_forward";
  ops::FeedForwardForward<T> p = params;
  p.d = ops::with_step_values(params.d);
  NF_TRY(ops::feedforward_forward_check(op, p));
  NF_TRY(ops::bf16_storage_check(op, p.precision, std::is_same_v<T, ops::bf16>));
  const Isa isa = active_isa();
  PackedB W1p, W2p;
  NF_TRY(packed_weight(&W1p, p.W1_packed, p.d.F, p.d.D, isa, p.precision, op, "W1Packed"));
  NF_TRY(packed_weight(&W2p, p.W2_packed, p.d.D, p.d.F, isa, p.precision, op, "W2Packed"));
  if (p.d.rows == 0) return Status::Ok();
  if constexpr (std::is_same_v<T, ops::bf16>) NF_DISPATCH_TO(isa, feedforward_forward_bf16, p, W1p, W2p);
  else NF_DISPATCH_TO(isa, feedforward_forward, p, W1p, W2p);
  return Status::Ok();
}

template <class T>
Status run_backward(const ops::FeedForwardBackward<T>& params) {
  const char* op = "feedforward_backward";
  ops::FeedForwardBackward<T> p = params;
  p.d = ops::with_step_values(params.d);
  NF_TRY(ops::int8_inference_check(op, p.precision, "a backward"));
  NF_TRY(ops::feedforward_check(op, p.d));
  NF_TRY(ops::bf16_storage_check(op, p.precision, std::is_same_v<T, ops::bf16>));
  NF_CHECK(p.h && p.a, op, "needs the pre-activation h and activation a saved by forward");
  if (p.d.rows == 0) return Status::Ok();
  NF_CHECK(thread_scratch(ScratchSlot::layer, sizeof(T) * p.d.rows * p.d.F), op,
           "out of memory for the hidden-layer gradient");
  if constexpr (std::is_same_v<T, ops::bf16>) NF_DISPATCH(feedforward_backward_bf16, p);
  else NF_DISPATCH(feedforward_backward, p);
  return Status::Ok();
}

}  // namespace

Status run(const ops::FeedForwardForward<float>& p) { return run_forward(p); }
Status run(const ops::FeedForwardForward<ops::bf16>& p) { return run_forward(p); }
Status run(const ops::FeedForwardBackward<float>& p) { return run_backward(p); }
Status run(const ops::FeedForwardBackward<ops::bf16>& p) { return run_backward(p); }

}  // namespace nf::cpu
#endif
#include "isa_end.h"
