// Bias + activation on the GPU, forward and backward: the elementwise half of a Linear layer whose
// product ran without its epilogue (e.g. a split-K or tensor-core GEMM), and of the feed-forward
// network's hidden layer, and the activation ops. Device pointers, queued on the backend's stream.
#pragma once
#include <cstdint>

#include "gemm.h"

namespace nf::cuda {

struct BiasActDims {
  int64_t rows = 0;  // B*T
  int64_t n = 0;     // features (bias length)
  Act act = Act::gelu;
  bool reduced = false;  // GELU's Φ from normcdf_reduced (activation.cuh): after a product of bf16 inputs
};

// One overload per storage of the activations, float or bf16 (bias and its gradient float):
// y[rows,n] = act(x + bias[n]) (bias optional); preact (optional) receives x + bias. y may be x.
Status bias_act_forward(float* y, float* preact, const float* x, const float* bias, BiasActDims d);
Status bias_act_forward(bf16* y, bf16* preact, const bf16* x, const float* bias, BiasActDims d);

// dx = dy ∘ act'(preact) (overwritten; dx may be dy); dbias += Σ_rows dx (when dbias).
Status bias_act_backward(float* dx, float* dbias, const float* dy, const float* preact, BiasActDims d);
Status bias_act_backward(bf16* dx, float* dbias, const bf16* dy, const bf16* preact, BiasActDims d);

// The ops (native/ops/activation.h): y = act(x), dx = dy ∘ act'(x), on the two above.
Status run(const ops::ActivationForward<float>& p);
Status run(const ops::ActivationForward<ops::bf16>& p);
Status run(const ops::ActivationBackward<float>& p);
Status run(const ops::ActivationBackward<ops::bf16>& p);

}  // namespace nf::cuda
