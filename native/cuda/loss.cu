// Softmax cross-entropy with label smoothing and ignore_index, loss and gradient, on the GPU.
// Math (row i, target t, ε = label smoothing, n = rows whose target is not ignore_index):
//   lse = log Σ_c exp(x_c); loss_i = (1−ε)(lse − x_t) + ε (lse − Σ_c x_c / V); loss = Σ loss_i / n;
//   dlogits_ic = grad_scale / n · (softmax(x)_c − ε/V − [c = t](1−ε)); ignored rows: 0.
// Layout: logits, dlogits [N, V] row-major; targets [N] int32; loss [1].
// Dimension key: N rows (B*T), V classes.
// Three kernels, all deterministic: (1) one block counts the valid targets and finds the first bad
// one; (2) one block per row: max, then Σ exp and Σ x (block reductions), the row's loss into a
// scratch vector, and the row's gradient; (3) one block adds the rows' losses (in double) and divides
// (NaN when a target is out of range, which the host then reports; under CUDA graph capture, where
// the host cannot wait for the check, the NaN is what reports it).
#include "loss.h"

#include <cmath>

#include "common.cuh"
#include "device.h"

namespace nf::cuda {

namespace {

constexpr int kRowThreads = 256;
constexpr int kReduceThreads = 1024;

// info[0] = rows whose target is not ignore_index; info[1] = the first row whose target is neither
// ignore_index nor in [0, V), or N when there is none.
__global__ void __launch_bounds__(kReduceThreads)
    ce_targets_kernel(int* info, const int32_t* targets, int N, int V, int ignore_index) {
  NF_SHARED(int[kWarp], scratch);
  int count = 0, bad = N;
  for (int i = int(threadIdx.x); i < N; i += int(blockDim.x)) {
    const int t = targets[i];
    if (t == ignore_index) continue;
    ++count;
    if ((t < 0 || t >= V) && i < bad) bad = i;
  }
  count = block_reduce(count, SumOp{}, 0, scratch);
  bad = block_reduce(bad, MinOp{}, N, scratch);
  if (threadIdx.x == 0) {
    info[0] = count;
    info[1] = bad;
  }
}

__global__ void __launch_bounds__(kRowThreads)
    ce_row_kernel(float* row_loss, float* dlogits, const float* logits, const int32_t* targets, const int* info,
                  int V, float eps, int ignore_index, float grad_scale) {
  NF_SHARED(float[kWarp], scratch);
  const int64_t row = blockIdx.x;
  const float* x = logits + row * V;
  float* dx = dlogits ? dlogits + row * V : nullptr;
  const int t = targets[row];
  if (t == ignore_index || t < 0 || t >= V) {  // the whole block takes this branch
    if (threadIdx.x == 0) row_loss[row] = 0.0f;
    if (dx)
      for (int c = int(threadIdx.x); c < V; c += int(blockDim.x)) dx[c] = 0.0f;
    return;
  }
  float m = -INFINITY;
  for (int c = int(threadIdx.x); c < V; c += int(blockDim.x)) m = fmaxf(m, x[c]);
  m = block_reduce(m, MaxOp{}, -INFINITY, scratch);
  float se = 0.0f, sx = 0.0f;
  for (int c = int(threadIdx.x); c < V; c += int(blockDim.x)) {
    se += expf(x[c] - m);
    sx += x[c];
  }
  se = block_reduce(se, SumOp{}, 0.0f, scratch);
  sx = block_reduce(sx, SumOp{}, 0.0f, scratch);
  const float lse = m + logf(se);
  if (threadIdx.x == 0) row_loss[row] = (1.0f - eps) * (lse - x[t]) + eps * (lse - sx / float(V));
  if (!dx) return;
  const float scale = grad_scale / float(info[0]), smooth = eps / float(V);
  for (int c = int(threadIdx.x); c < V; c += int(blockDim.x))
    dx[c] = scale * (expf(x[c] - lse) - smooth - (c == t ? 1.0f - eps : 0.0f));
}

__global__ void __launch_bounds__(kReduceThreads) ce_mean_kernel(float* loss, const float* row_loss, const int* info, int N) {
  NF_SHARED(double[kWarp], scratch);
  double s = 0.0;
  for (int i = int(threadIdx.x); i < N; i += int(blockDim.x)) s += row_loss[i];
  s = block_reduce(s, SumOp{}, 0.0, scratch);
  if (threadIdx.x == 0) loss[0] = info[0] > 0 && info[1] == N ? float(s / info[0]) : NAN;
}

}  // namespace

Status cross_entropy(float* loss, float* dlogits, const float* logits, const int32_t* targets, CrossEntropyDims d) {
  const char* op = "cross_entropy";
  NF_CHECK(d.N >= 0 && d.N < (int64_t(1) << 31), op, "N must be in [0, 2^31)");
  NF_CHECK(d.V >= 1 && d.V < (int64_t(1) << 31) && d.N * d.V < (int64_t(1) << 62), op, "V must be in [1, 2^31)");
  NF_CHECK(d.label_smoothing >= 0.0 && d.label_smoothing <= 1.0, op, "label_smoothing must be in [0, 1]");
  cudaStream_t s;
  NF_TRY(backend_stream(&s));
  void* scratch = nullptr;
  NF_TRY(workspace(0, sizeof(int) * 2 + sizeof(float) * size_t(d.N), &scratch));
  int* info = static_cast<int*>(scratch);
  float* row_loss = reinterpret_cast<float*>(info + 2);
  const int N = int(d.N), V = int(d.V);
  NF_CUDA_TRY(op, launch(ce_targets_kernel, dim3(1), dim3(kReduceThreads), 0, s, info, targets, N, V, d.ignore_index));
  if (N > 0)
    NF_CUDA_TRY(op, launch(ce_row_kernel, dim3(unsigned(N)), dim3(kRowThreads), 0, s, row_loss, dlogits, logits,
                           targets, static_cast<const int*>(info), V, float(d.label_smoothing), d.ignore_index,
                           float(d.grad_scale)));
  NF_CUDA_TRY(op, launch(ce_mean_kernel, dim3(1), dim3(kReduceThreads), 0, s, loss,
                         static_cast<const float*>(row_loss), static_cast<const int*>(info), N));
  // A CUDA graph capture cannot wait for the check: there a bad target shows as a NaN loss, which the
  // graph's runner checks the targets for after the replay (lib/training/graph.ts).
  if (graph_capturing()) return Status::Ok();
  int host_info[2] = {0, 0};
  NF_CUDA_TRY(op, cudaMemcpyAsync(host_info, info, sizeof host_info, cudaMemcpyDeviceToHost, s));
  NF_CUDA_TRY(op, cudaStreamSynchronize(s));
  NF_CHECK(host_info[1] == N, op,
           "target out of range at row " + std::to_string(host_info[1]) + " (expected [0, " + std::to_string(V) +
               ") or ignore_index " + std::to_string(d.ignore_index) + ")");
  return Status::Ok();
}

Status run(const ops::CrossEntropy<float>& p) { return cross_entropy(p.loss, p.dlogits, p.logits, p.targets, p.d); }

}  // namespace nf::cuda
