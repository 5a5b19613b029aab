// AdamW on the GPU over a list of parameter tensors (a param group) in a few launches: PyTorch's
// multi_tensor_apply / apex's fused Adam. Each launch carries a table of up to kListTensors tensors
// (param, grad, exp_avg, exp_avg_sq, optional weight copy, n) and of up to kListBlocks blocks, block b
// updating chunk chunk[b] (kAdamWChunk elements) of tensor tensor[b]; a list longer than one table takes
// more launches (the host walks it, carrying a tensor cut by a full table into the next one). The
// table is a kernel argument (under 4 KB), so a CUDA graph captures it by value.
// Math (torch.optim.AdamW, step t): p ← p (1 − lr·wd); m ← m + (1 − β1)(g − m);
//   v ← β2 v + (1 − β2) g²; p ← p − (lr / (1 − β1^t)) · m / (sqrt(v) / sqrt(1 − β2^t) + eps).
//   The step-dependent factors are computed in double at the top of the kernel, from t and lr given
//   as arguments or read from the step values (native/ops/step_values.h; a CUDA graph's replays).
//   With a copy (precision 'bf16': the weight's bf16 copy the products read), copy ← the new p in the
//   copy's type (bf16: rounded to nearest even, as convert), in the same pass.
// Layout: each tensor's param, exp_avg, exp_avg_sq, grad (and copy) are flat [n] arrays; a chunk moves
//   16-byte vectors when all its arrays are 16-byte aligned (the copy 8 for bf16), a scalar tail.
// Dimension key: n = elements of one parameter tensor.
// Memory-bound: 16 bytes read and 12 written per element (+ 2 or 4 for the copy).
#include "optim.h"

#include <climits>
#include <cmath>
#include <cstring>
#include <vector>

#include "bf16.cuh"
#include "common.cuh"

namespace nf::cuda {

namespace {

constexpr int kThreads = 256;
constexpr int kListTensors = 36, kListBlocks = 320;  // one launch's table (a kernel argument, < 4 KB)

// The step-dependent factors, from step t and lr (the arguments, or the step values the kernel reads
// when a pointer is given: what a CUDA graph replays with each step's), in double as the CPU does.
struct AdamWFactors {
  double lr, step, beta1, beta2, eps, weight_decay;
  const double *lr_from, *step_from;
};

// One launch's tensors and blocks. C: the copy's element type (float or bf16).
template <class C>
struct TensorTable {
  float* param[kListTensors];
  float* exp_avg[kListTensors];
  float* exp_avg_sq[kListTensors];
  const float* grad[kListTensors];
  C* copy[kListTensors];  // null: none
  int64_t n[kListTensors];
  int64_t chunk_elems;  // elements per block (a multiple of 4)
  int32_t chunk[kListBlocks];
  uint8_t tensor[kListBlocks];
};

// The float factors of one step.
struct StepFactors {
  float decay, beta1, beta2, step_size, inv_sqrt_bc2, eps;
};

__device__ __forceinline__ StepFactors step_factors(const AdamWFactors& f) {
  const double lr = f.lr_from ? *f.lr_from : f.lr, t = f.step_from ? *f.step_from : f.step;
  const double bc1 = 1 - pow(f.beta1, t), bc2 = 1 - pow(f.beta2, t);
  return {float(1 - lr * f.weight_decay), float(f.beta1), float(f.beta2), float(lr / bc1), float(1 / sqrt(bc2)),
          float(f.eps)};
}

// One element's update (the same expression for the vector and scalar paths: results bit for bit alike).
__device__ __forceinline__ void adamw_update(float& param, float& exp_avg, float& exp_avg_sq, float g,
                                             const StepFactors& s) {
  const float m = fmaf(1.0f - s.beta1, g - exp_avg, exp_avg);
  const float v = fmaf(s.beta2, exp_avg_sq, (1.0f - s.beta2) * g * g);
  exp_avg = m;
  exp_avg_sq = v;
  param = param * s.decay - s.step_size * m / (sqrtf(v) * s.inv_sqrt_bc2 + s.eps);
}

// Four copy elements c[i .. i + 4) from floats (c + i aligned: 16 bytes for float, 8 for bf16).
__device__ __forceinline__ void store4(float* c, int64_t i, const float (&v)[4]) { store_pack(c, i, v); }
__device__ __forceinline__ void store4(bf16* c, int64_t i, const float (&v)[4]) {
#if defined(__CUDA_ARCH__)
  *reinterpret_cast<uint2*>(c + i) = make_uint2(pack_bf16x2(v[0], v[1]), pack_bf16x2(v[2], v[3]));
#else
  uint16_t bits[4];
  for (int j = 0; j < 4; ++j) bits[j] = to_bf16(v[j]).bits;
  std::memcpy(c + i, bits, sizeof bits);
#endif
}

template <class C>
__global__ void __launch_bounds__(kThreads) adamw_multi_kernel(TensorTable<C> t, AdamWFactors f) {
  const StepFactors s = step_factors(f);
  const int k = t.tensor[blockIdx.x];
  const int64_t start = int64_t(t.chunk[blockIdx.x]) * t.chunk_elems;
  const int64_t len = t.n[k] - start < t.chunk_elems ? t.n[k] - start : t.chunk_elems;
  float *param = t.param[k] + start, *exp_avg = t.exp_avg[k] + start, *exp_avg_sq = t.exp_avg_sq[k] + start;
  const float* grad = t.grad[k] + start;
  C* copy = t.copy[k] ? t.copy[k] + start : nullptr;
  int64_t tail = 0;  // where the scalar loop starts
  if (aligned16(param, exp_avg, exp_avg_sq, grad) && reinterpret_cast<uintptr_t>(copy) % (4 * sizeof(C)) == 0) {
    tail = len / 4 * 4;
    for (int64_t i = int64_t(threadIdx.x) * 4; i < tail; i += int64_t(blockDim.x) * 4) {
      float p[4], m[4], v[4], g[4];
      load_pack(param, i, p);
      load_pack(exp_avg, i, m);
      load_pack(exp_avg_sq, i, v);
      load_pack(grad, i, g);
      for (int j = 0; j < 4; ++j) adamw_update(p[j], m[j], v[j], g[j], s);
      store_pack(exp_avg, i, m);
      store_pack(exp_avg_sq, i, v);
      store_pack(param, i, p);
      if (copy) store4(copy, i, p);
    }
  }
  for (int64_t i = tail + threadIdx.x; i < len; i += blockDim.x) {
    float p = param[i], m = exp_avg[i], v = exp_avg_sq[i];
    adamw_update(p, m, v, grad[i], s);
    exp_avg[i] = m;
    exp_avg_sq[i] = v;
    param[i] = p;
    if (copy) store(copy + i, p);
  }
}

// Fills tables from the list and launches each (the blocks of a full table, carrying the tensor it
// cut into the next).
template <class C>
Status adamw_multi(const char* op, const std::vector<float*>& param, const std::vector<float*>& exp_avg,
                   const std::vector<float*>& exp_avg_sq, const std::vector<const float*>& grad,
                   const std::vector<C*>& copy, const std::vector<int64_t>& sizes, const AdamWParams& p,
                   int64_t chunk) {
  NF_CHECK(chunk > 0 && chunk % 4 == 0, op, "the chunk must be a positive multiple of 4 elements");
  for (int64_t n : sizes) {
    NF_TRY(ops::adamw_check(op, n, p));
    NF_CHECK(ceil_div(n, chunk) <= INT32_MAX, op, "a tensor of more than 2^31 chunks");
  }
  const AdamWFactors f{p.lr, double(p.step), p.beta1, p.beta2, p.eps, p.weight_decay,
                       p.lr_at >= 0 ? p.values.table + p.lr_at : nullptr,
                       p.step_at >= 0 ? p.values.table + p.step_at : nullptr};
  cudaStream_t stream = nullptr;
  TensorTable<C> t;
  std::memset(&t, 0, sizeof t);
  t.chunk_elems = chunk;
  int tensors = 0, blocks = 0;
  auto flush = [&]() -> Status {
    if (blocks > 0) {
      if (!stream) NF_TRY(backend_stream(&stream));
      NF_CUDA_TRY(op, launch(adamw_multi_kernel<C>, dim3(unsigned(blocks)), dim3(kThreads), 0, stream, t, f));
    }
    blocks = 0;
    return Status::Ok();
  };
  auto set = [&](int slot, size_t i) {
    t.param[slot] = param[i];
    t.exp_avg[slot] = exp_avg[i];
    t.exp_avg_sq[slot] = exp_avg_sq[i];
    t.grad[slot] = grad[i];
    t.copy[slot] = copy[i];
    t.n[slot] = sizes[i];
  };
  for (size_t i = 0; i < sizes.size(); ++i) {
    if (sizes[i] == 0) continue;
    if (tensors == kListTensors) {
      NF_TRY(flush());
      tensors = 0;
    }
    set(tensors, i);
    const int64_t chunks = ceil_div(sizes[i], chunk);
    for (int64_t c = 0; c < chunks; ++c) {
      if (blocks == kListBlocks) {  // the table is full: launch it, tensor i goes on as slot 0
        NF_TRY(flush());
        set(0, i);
        tensors = 0;
      }
      t.tensor[blocks] = uint8_t(tensors);
      t.chunk[blocks] = int32_t(c);
      ++blocks;
    }
    ++tensors;
  }
  return flush();
}

}  // namespace

Status adamw_step(float* param, float* exp_avg, float* exp_avg_sq, const float* grad, int64_t n,
                  const AdamWParams& p) {
  return adamw_multi<float>("adamw_step", {param}, {exp_avg}, {exp_avg_sq}, {grad}, {nullptr}, {n}, p, kAdamWChunk);
}

Status adamw_multi_step(const ops::AdamWMultiStep<float>& p, int64_t chunk) {
  return adamw_multi("adamw_multi_step", p.param, p.exp_avg, p.exp_avg_sq, p.grad, p.copy, p.sizes, p.h, chunk);
}

Status adamw_multi_step(const ops::AdamWMultiStep<ops::bf16>& p, int64_t chunk) {
  return adamw_multi("adamw_multi_step", p.param, p.exp_avg, p.exp_avg_sq, p.grad, p.copy, p.sizes, p.h, chunk);
}

Status run(const ops::AdamWStep<float>& p) { return adamw_step(p.param, p.exp_avg, p.exp_avg_sq, p.grad, p.n, p.h); }

Status run(const ops::AdamWMultiStep<float>& p) { return adamw_multi_step(p); }
Status run(const ops::AdamWMultiStep<ops::bf16>& p) { return adamw_multi_step(p); }

}  // namespace nf::cuda
