// Bias + activation on the GPU, forward and backward; the activation ops are the same without a bias.
// Math: h = x + b (per column); y = act(h). Backward: dh = dy act'(h); db += Σ_rows dh.
//   act ∈ {none, relu, gelu (erf), gelu_tanh, silu, tanh}; formulas in activation.cuh. After a product of
//   bf16 inputs (BiasActDims::reduced) GELU's Φ is normcdf_reduced's, as the CPU's bf16 products' GELU.
// Layout: x, y, preact, dy, dx are [rows, n] row-major; b, db [n].
// Dimension key: rows = B*T, n = features.
// Storage: x, y, preact, dy, dx are S (float, or bf16 under precision 'bf16'; bf16.cuh), b and db
// float, math float.
// Elementwise kernels over a grid-stride loop (memory-bound: one read, one or two writes per
// element), 16-byte vectors where aligned (4 floats, 8 bf16); the bias gradient reuses linear.cu's
// deterministic column sums over dx.
#include "activation.h"

#include "activation.cuh"
#include "bf16.cuh"
#include "common.cuh"
#include "linear.h"

namespace nf::cuda {

namespace {

constexpr int kThreads = 256;
constexpr int64_t kMaxBlocks = 4096;

// Runs f(act), inlined twice: with the constant Act::gelu (the erf GELU, the transformer's feed-forward
// activation: that copy of the loop has its switch folded away, none per element) and with the
// runtime value for the rest. (A copy per activation made ptxas spill the float forward kernel on
// sm_80: silu's division calls a subroutine.)
template <class F>
__device__ __forceinline__ void with_act(Act act, F f) {
  if (act == Act::gelu) f(Act::gelu);
  else f(act);
}
// with_act for the forward, f(act, reduced): a third copy for the GELU of normcdf_reduced's Φ.
template <class F>
__device__ __forceinline__ void with_act(Act act, bool reduced, F f) {
  if (act == Act::gelu && reduced) f(Act::gelu, true);
  else with_act(act, [&](Act a) { f(a, false); });
}

// 16-byte vectors (bf16.cuh Pack) when the arrays are aligned and a row is a whole number of vectors
// (a vector then never straddles two rows and takes bias[c .. c + V), as vectors too: load_floats);
// element by element otherwise.
// A thread's column c advances by its stride modulo n (one compare, no 64-bit division per vector).
template <class S>
__global__ void __launch_bounds__(kThreads)
    bias_act_forward_kernel(S* y, S* preact, const S* x, const float* bias, int64_t total, int n, Act act_of_call,
                            bool reduced_of_call) {
  constexpr int V = kPack<S>;
  const int64_t step = int64_t(gridDim.x) * blockDim.x, first = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  with_act(act_of_call, reduced_of_call, [&](Act act, bool reduced) {
    if (n % V == 0 && aligned16(y, preact, x, bias)) {
      const int advance = int(step * V % n);
      int c = int(first * V % n);
      for (int64_t i = first * V; i < total; i += step * V) {
        float h[V];
        load_pack(x, i, h);
        if (bias) {
          float bv[V];
          load_floats<V>(bias, c, bv);
#pragma unroll
          for (int j = 0; j < V; ++j) h[j] += bv[j];
        }
        if (preact) {  // preact holds h as stored, and y = act of that value: backward's act'(preact) is then
                       // the derivative at the point the forward used
#pragma unroll
          for (int j = 0; j < V; ++j) h[j] = as_stored<S>(h[j]);
          store_pack(preact, i, h);
        }
#pragma unroll
        for (int j = 0; j < V; ++j) h[j] = act_forward(h[j], act, reduced);
        store_pack(y, i, h);
        c += advance;
        if (c >= n) c -= n;
      }
      return;
    }
    for (int64_t i = first; i < total; i += step) {
      float h = bias ? load(x + i) + bias[i % n] : load(x + i);
      if (preact) {
        h = as_stored<S>(h);
        store(preact + i, h);
      }
      store(y + i, act_forward(h, act, reduced));
    }
  });
}

template <class S>
__global__ void __launch_bounds__(kThreads)
    bias_act_backward_kernel(S* dx, const S* dy, const S* preact, int64_t total, Act act_of_call) {
  constexpr int V = kPack<S>;
  const int64_t step = int64_t(gridDim.x) * blockDim.x, first = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  const int64_t bulk = aligned16(dx, dy, preact) ? total / V * V : 0;
  with_act(act_of_call, [&](Act act) {
    for (int64_t i = first * V; i < bulk; i += step * V) {
      float g[V], h[V];
      load_pack(dy, i, g);
      load_pack(preact, i, h);
#pragma unroll
      for (int j = 0; j < V; ++j) g[j] *= act_derivative(h[j], act);
      store_pack(dx, i, g);
    }
    for (int64_t i = bulk + first; i < total; i += step) store(dx + i, load(dy + i) * act_derivative(load(preact + i), act));
  });
}

Status check(const char* op, const BiasActDims& d) {
  NF_CHECK(d.rows >= 0, op, "rows must be non-negative");
  NF_CHECK(d.n >= 1 && d.n < (int64_t(1) << 31), op, "n must be in [1, 2^31)");
  NF_CHECK(int(d.act) >= 0 && int(d.act) < ops::kActCount, op, "unknown activation");
  return Status::Ok();
}

dim3 blocks_for(int64_t total) { return capped_grid(ceil_div(total, kThreads), kMaxBlocks); }

template <class S>
Status forward(S* y, S* preact, const S* x, const float* bias, BiasActDims d) {
  NF_TRY(check("bias_act_forward", d));
  const int64_t total = d.rows * d.n;
  if (total == 0) return Status::Ok();
  cudaStream_t s;
  NF_TRY(backend_stream(&s));
  NF_CUDA_TRY("bias_act_forward", launch(bias_act_forward_kernel<S>, blocks_for(ceil_div(total, kPack<S>)),
                                         dim3(kThreads), 0, s, y,
                                         preact, x, bias, total, int(d.n), d.act, d.reduced));
  return Status::Ok();
}

template <class S>
Status backward(S* dx, float* dbias, const S* dy, const S* preact, BiasActDims d) {
  NF_TRY(check("bias_act_backward", d));
  const int64_t total = d.rows * d.n;
  if (total == 0) return Status::Ok();
  cudaStream_t s;
  NF_TRY(backend_stream(&s));
  NF_CUDA_TRY("bias_act_backward", launch(bias_act_backward_kernel<S>, blocks_for(ceil_div(total, kPack<S>)),
                                          dim3(kThreads), 0, s, dx,
                                          dy, preact, total, d.act));
  if (dbias) NF_TRY(bias_grad(dbias, dx, d.rows, d.n, nullptr));
  return Status::Ok();
}

}  // namespace

Status bias_act_forward(float* y, float* preact, const float* x, const float* bias, BiasActDims d) {
  return forward(y, preact, x, bias, d);
}
Status bias_act_forward(bf16* y, bf16* preact, const bf16* x, const float* bias, BiasActDims d) {
  return forward(y, preact, x, bias, d);
}
Status bias_act_backward(float* dx, float* dbias, const float* dy, const float* preact, BiasActDims d) {
  return backward(dx, dbias, dy, preact, d);
}
Status bias_act_backward(bf16* dx, float* dbias, const bf16* dy, const bf16* preact, BiasActDims d) {
  return backward(dx, dbias, dy, preact, d);
}

// The activation ops: the same kernels over [n, 1] with no bias.
Status run(const ops::ActivationForward<float>& p) {
  return bias_act_forward(p.y, nullptr, p.x, nullptr, {p.n, 1, p.act});
}
Status run(const ops::ActivationForward<bf16>& p) {
  return bias_act_forward(p.y, nullptr, p.x, nullptr, {p.n, 1, p.act});
}

Status run(const ops::ActivationBackward<float>& p) {
  return bias_act_backward(p.dx, nullptr, p.dy, p.x, {p.n, 1, p.act});
}
Status run(const ops::ActivationBackward<bf16>& p) {
  return bias_act_backward(p.dx, nullptr, p.dy, p.x, {p.n, 1, p.act});
}

}  // namespace nf::cuda
