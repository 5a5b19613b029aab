// The feed-forward network (the Transformer MLP, reference/torch_reference.py FeedForward):
//   y = fc2(dropout(act(fc1(x)))) = dropout(act(x W1ᵀ + b1)) W2ᵀ + b2 (+ r, an optional residual input:
//   a pre-LN block's x + mlp(norm(x)), its add riding on fc2's product; backward unchanged, dr = dy).
//   Backward: da = dy W2, dW2 += dyᵀ a, db2 += Σ dy; dh = da ∘ mask/(1−p) ∘ act'(h);
//   dx = dh W1 (overwritten), dW1 += dhᵀ x, db1 += Σ dh. The mask is regenerated from (seed, offset).
// Layout: x, y, r, dy, dx [rows, D]; h, a [rows, F]; W1 [F, D], b1 [F], W2 [D, F], b2 [D], row-major.
// Dimension key: rows = B*T (every row transformed independently), D = model width, F = hidden width.
#pragma once
#include <cstdint>

#include "../core/status.h"
#include "activation.h"
#include "packed.h"
#include "precision.h"
#include "schema.h"
#include "step_values.h"

namespace nf::ops {

struct FeedForwardDims {
  int64_t rows = 0;
  int64_t D = 0;
  int64_t F = 0;
  Act activation = Act::gelu;
  float dropout = 0.0f;           // probability of zeroing a hidden value, in [0, 1]
  uint64_t seed = 0, offset = 0;  // the Philox stream of the dropout mask (element index row*F + f)
  int64_t seed_at = -1;           // the seed from values.table[seed_at] instead (step_values.h)
  StepValues values{};
};

// A plausibility bound on the widths D and F (rejected naming the dim); the array lengths go
// through the reader's count, which rules out overflow whatever the dims.
constexpr int64_t kMaxWidth = int64_t(1) << 20;

// d with its seed taken from the step values (host memory: the CPU kernels).
inline FeedForwardDims with_step_values(FeedForwardDims d) {
  d.seed = static_cast<uint64_t>(step_value(d.values, d.seed_at, static_cast<double>(d.seed)));
  d.seed_at = -1;
  return d;
}

inline Status feedforward_check(const char* op, const FeedForwardDims& d) {
  NF_CHECK(d.rows >= 0, op, "rows must be non-negative");
  NF_CHECK(d.D >= 1 && d.F >= 1, op, "D and F must be at least 1");
  NF_CHECK(d.activation != Act::none, op, "the activation must not be 'none'");
  NF_CHECK(d.dropout >= 0.0f && d.dropout <= 1.0f, op, "dropout must lie in [0, 1]");
  return Status::Ok();
}

// The dims, activation and dropout both ops read.
template <class R>
void feedforward_dims(R& r, FeedForwardDims& d) {
  r.dim(d.rows, "rows", 0);
  r.dim(d.D, "D", 1, kMaxWidth);
  r.dim(d.F, "F", 1, kMaxWidth);
  r.choice(d.activation, "activation", kFeedForwardActivations, Act::gelu);
  r.number(d.dropout, "dropout", 0.0, 0.0, 1.0);
  r.integer(d.seed, "seed", 0, 0, kMaxSafeInteger);
  r.integer(d.offset, "offset", 0, 0, kMaxSafeInteger);
  step_value_at(r, d.values, d.seed_at, "seedAt");
  step_values_table(r, d.values);
}

template <class T>
struct FeedForwardForward {
  static constexpr const char* name = "feedforwardForward";
  static constexpr const char* summary =
      "y [rows, D] = dropout(act(x W1ᵀ + b1)) W2ᵀ + b2, with x [rows, D], W1 [F, D], b1 [F], W2 [D, F], b2 [D]. "
      "Saves h [rows, F] = x W1ᵀ + b1 (optional: omit when no backward follows) and a [rows, F] = "
      "dropout(act(h)), the fc2 input. Dropout (probability `dropout`, default 0) on the hidden activation keeps "
      "element row*F + f by the Philox stream (seed, offset), scaling kept values by 1/(1 − dropout); backward "
      "must get the same values. W1Packed, W2Packed (optional): the weights prepacked by packWeights, read by "
      "the CPU kernels instead of packing W1, W2 (same result, bit for bit). residual (optional): y = fc2(...) + "
      "b2 + residual, a pre-LN block's residual add (in fc2's epilogue on the GPU).";
  FeedForwardDims d;
  Precision precision = Precision::fp32;
  T* y = nullptr;
  T* h = nullptr;
  T* a = nullptr;
  const T* x = nullptr;
  const T* W1 = nullptr;
  const Acc<T>* b1 = nullptr;
  const T* W2 = nullptr;
  const Acc<T>* b2 = nullptr;
  const Acc<T>* W1_packed = nullptr;  // (float words whatever the activations)
  const Acc<T>* W2_packed = nullptr;
  const T* b1_rounded = nullptr;
  const T* b2_rounded = nullptr;
  const T* residual = nullptr;

  template <class R>
  static void fields(R& r, FeedForwardForward& p) {
    feedforward_dims(r, p.d);
    precision_field(r, p.precision);
    const FeedForwardDims& d = p.d;
    r.out(p.y, "y", NF_SHAPE(d.rows, d.D));
    r.saved(p.h, "h", NF_SHAPE(d.rows, d.F), optional, doc("the pre-activation x W1ᵀ + b1"));
    r.saved(p.a, "a", NF_SHAPE(d.rows, d.F), doc("dropout(act(h)), the fc2 input"));
    r.in(p.x, "x", NF_SHAPE(d.rows, d.D));
    r.in(p.W1, "W1", NF_SHAPE(d.F, d.D));
    r.in(p.b1, "b1", NF_SHAPE(d.F));
    r.in(p.W2, "W2", NF_SHAPE(d.D, d.F));
    r.in(p.b2, "b2", NF_SHAPE(d.D));
    r.in(p.W1_packed, "W1Packed", NF_PACKED_SHAPE(p.precision, d.F, d.D, "F", "D"), optional, doc("W1 prepacked by packWeights (N = F, K = D)"));
    r.in(p.W2_packed, "W2Packed", NF_PACKED_SHAPE(p.precision, d.D, d.F, "D", "F"), optional, doc("W2 prepacked by packWeights (N = D, K = F)"));
    r.in(p.b1_rounded, "b1Rounded", NF_SHAPE(d.F), optional, doc(kRoundedBiasDoc));
    r.in(p.b2_rounded, "b2Rounded", NF_SHAPE(d.D), optional, doc(kRoundedBiasDoc));
    r.in(p.residual, "residual", NF_SHAPE(d.rows, d.D), optional, doc("added to y (a residual stream; not y itself)"));
  }
};

// The forward's checks every backend runs: the dims, and a residual input that is not y itself (y is
// written before the residual is read).
template <class T>
Status feedforward_forward_check(const char* op, const FeedForwardForward<T>& p) {
  NF_TRY(feedforward_check(op, p.d));
  NF_CHECK(!p.residual || p.residual != p.y, op, "residual must not be y itself");
  return Status::Ok();
}

template <class T>
struct FeedForwardBackward {
  static constexpr const char* name = "feedforwardBackward";
  static constexpr const char* summary =
      "dx [rows, D] = dh W1 (overwritten) with dh = (dy W2 ∘ dropout mask) ∘ act'(h); dW1 += dhᵀ x; db1 += Σ dh; "
      "dW2 += dyᵀ a; db2 += Σ dy. Same dims, activation, dropout, seed and offset as the forward.";
  FeedForwardDims d;
  Precision precision = Precision::fp32;
  T* dx = nullptr;
  Acc<T>* dW1 = nullptr;
  Acc<T>* db1 = nullptr;
  Acc<T>* dW2 = nullptr;
  Acc<T>* db2 = nullptr;
  const T* dy = nullptr;
  const T* x = nullptr;
  const T* h = nullptr;
  const T* a = nullptr;
  const T* W1 = nullptr;
  const T* W2 = nullptr;

  template <class R>
  static void fields(R& r, FeedForwardBackward& p) {
    feedforward_dims(r, p.d);
    precision_field(r, p.precision);
    const FeedForwardDims& d = p.d;
    r.out(p.dx, "dx", NF_SHAPE(d.rows, d.D), grad_of("x"));
    r.inout(p.dW1, "dW1", NF_SHAPE(d.F, d.D), grad_of("W1"));
    r.inout(p.db1, "db1", NF_SHAPE(d.F), grad_of("b1"));
    r.inout(p.dW2, "dW2", NF_SHAPE(d.D, d.F), grad_of("W2"));
    r.inout(p.db2, "db2", NF_SHAPE(d.D), grad_of("b2"));
    r.in(p.dy, "dy", NF_SHAPE(d.rows, d.D), grad_of("y"));
    r.in(p.x, "x", NF_SHAPE(d.rows, d.D));
    r.saved(p.h, "h", NF_SHAPE(d.rows, d.F));
    r.saved(p.a, "a", NF_SHAPE(d.rows, d.F));
    r.in(p.W1, "W1", NF_SHAPE(d.F, d.D));
    r.in(p.W2, "W2", NF_SHAPE(d.D, d.F));
  }
};

}  // namespace nf::ops
