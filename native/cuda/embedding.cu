// Embeddings on the GPU: token gather and its scatter-add backward, the sinusoidal position table,
// the ViT token starts (CLS + patches + positions; mask token + positions).
// Math: out[r] = table[ids[r]]·scale + pos[r mod T]; dtable[ids[r]] += scale·dout[r];
//   dpos[t] += Σ_b dout[b, t]. Sinusoidal: PE[p, j] = sin(p / 10000^(2⌊j/2⌋/D)) for even j, cos for
//   odd j, in double (as the CPU kernel and torch_reference.py), rounded to float once.
//   ViTClassifier: out[b, 0] = cls + pos[0], out[b, 1+n] = patches[b, n] + pos[1+n];
//   dcls += Σ_b dout[b, 0], dpatches[b, n] = dout[b, 1+n], dpos[t] += Σ_b dout[b, t].
//   ViTDecoder: out[b, n] = token + pos[n]; S[n] = Σ_b dout[b, n]; dpos[n] += S[n]; dtoken += Σ_n S[n].
// Storage: the ViTClassifier token start also runs over bf16 activations (patches, out, dout,
//   dpatches; precision 'bf16', bf16.cuh) with float cls, pos and their gradients.
// Layout: ids [B, T] int32; table, dtable [V, D]; pos, dpos [T, D] (or [N+1, D], [N, D]); out, dout
//   rows of D; PE [len, D]; token, dtoken [D].
// Dimension key: B batch, T tokens, V vocabulary, D width, N patches, len positions, r = b·T + t.
// The ids are checked first by one block (first bad position, block min-reduction) and the result
// read back, so no kernel ever indexes the table out of range. The scatter-add is deterministic
// without atomics: one thread per column walks the rows in order (D-way parallel; duplicate ids only
// ever meet in the same thread). Position and CLS gradients: one thread per (t, i) sums over b. The
// mask token's gradient adds the position sums S (scratch slot 0) over n with linear.cu's
// deterministic column sums, the order of the CPU kernel (batch sums first, then over positions).
#include "embedding.h"

#include <string>

#include "bf16.cuh"
#include "common.cuh"
#include "linear.h"

namespace nf::cuda {

namespace {

constexpr int kThreads = 256;
constexpr int kCheckThreads = 1024;
constexpr int64_t kMaxBlocks = 4096;

// bad[0] = the first r with ids[r] outside [0, V), or n when there is none.
__global__ void __launch_bounds__(kCheckThreads) check_ids_kernel(int* bad, const int32_t* ids, int n, int V) {
  NF_SHARED(int[kWarp], scratch);
  int first = n;
  for (int r = int(threadIdx.x); r < n; r += int(blockDim.x))
    if ((ids[r] < 0 || ids[r] >= V) && r < first) first = r;
  first = block_reduce(first, MinOp{}, n, scratch);
  if (threadIdx.x == 0) bad[0] = first;
}

__global__ void __launch_bounds__(kThreads)
    embedding_forward_kernel(float* out, const int32_t* ids, const float* table, const float* pos, int64_t total,
                             int64_t T, int D, float scale) {
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < total; i += int64_t(gridDim.x) * blockDim.x) {
    const int64_t r = i / D;
    const int c = int(i % D);
    const float v = table[int64_t(ids[r]) * D + c] * scale;
    out[i] = pos ? v + pos[(r % T) * D + c] : v;
  }
}

__global__ void __launch_bounds__(kThreads)
    embedding_scatter_kernel(float* dtable, const float* dout, const int32_t* ids, int64_t rows, int D, float scale) {
  const int c = int(blockIdx.x * blockDim.x + threadIdx.x);
  if (c >= D) return;
  for (int64_t r = 0; r < rows; ++r) dtable[int64_t(ids[r]) * D + c] += scale * dout[r * D + c];
}

// S[t, c] = Σ_b dout[(b·T + t)·D + c] for t < T (T·D threads, grid-stride): dpos[t, c] += S (when
// dpos is given), sums[t, c] = S (when sums is given).
__global__ void __launch_bounds__(kThreads)
    position_grad_kernel(float* dpos, float* sums, const float* dout, int64_t B, int64_t T, int D) {
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < T * D; i += int64_t(gridDim.x) * blockDim.x) {
    float s = 0.0f;
    for (int64_t b = 0; b < B; ++b) s += dout[b * T * D + i];
    if (dpos) dpos[i] += s;
    if (sums) sums[i] = s;
  }
}

// out[p, j] for p < len (total = len·D elements, grid-stride), in double as the CPU kernel. The angle
// a goes to sinpi/cospi as a/π: their range reduction is exact and needs no local memory (sin and
// cos of a double keep a stack frame for Payne-Hanek reduction of huge arguments); the extra
// rounding moves the angle by at most a·2^-52, far below float32's resolution of the result.
__global__ void __launch_bounds__(kThreads) sinusoidal_kernel(float* out, int64_t total, int D) {
  constexpr double kPi = 3.141592653589793238;
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < total; i += int64_t(gridDim.x) * blockDim.x) {
    const int64_t p = i / D;
    const int j = int(i % D);
    const double a = double(p) / pow(10000.0, double(j - j % 2) / double(D));
    out[i] = float(j % 2 ? cospi(a / kPi) : sinpi(a / kPi));
  }
}

__global__ void __launch_bounds__(kThreads)
    token_pos_forward_kernel(float* out, const float* token, const float* pos, int64_t total, int64_t N, int D) {
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < total; i += int64_t(gridDim.x) * blockDim.x) {
    const int64_t n = (i / D) % N;
    const int c = int(i % D);
    out[i] = token[c] + pos[n * D + c];
  }
}

// A block per output row (b, t) (grid-stride over the B (N + 1) rows), its threads over the D columns:
// the row's coordinates once a row, not three 64-bit divisions an element.
template <class S>
__global__ void __launch_bounds__(kThreads)
    cls_pos_forward_kernel(S* out, const float* cls, const S* patches, const float* pos, int64_t rows, int64_t N,
                           int D) {
  for (int64_t row = blockIdx.x; row < rows; row += gridDim.x) {
    const int64_t b = row / (N + 1), t = row - b * (N + 1);
    const S* patch = t > 0 ? patches + (b * N + t - 1) * D : nullptr;
    const float* p = pos + t * D;
    S* o = out + row * D;
    for (int c = int(threadIdx.x); c < D; c += blockDim.x) store(o + c, (t == 0 ? cls[c] : load(patch + c)) + p[c]);
  }
}

// One thread per (t, c) of [N+1, D]: the sum over b goes to dpos (and dcls for t = 0); rows t > 0
// are copied to dpatches.
template <class S>
__global__ void __launch_bounds__(kThreads)
    cls_pos_backward_kernel(float* dcls, S* dpatches, float* dpos, const S* dout, int64_t B, int64_t N, int D) {
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < (N + 1) * D;
       i += int64_t(gridDim.x) * blockDim.x) {
    const int64_t t = i / D;
    const int c = int(i % D);
    float s = 0.0f;
    for (int64_t b = 0; b < B; ++b) {
      const float g = load(dout + b * (N + 1) * D + i);
      s += g;
      if (t > 0) store(dpatches + (b * N + t - 1) * D + c, g);
    }
    dpos[i] += s;
    if (t == 0) dcls[c] += s;
  }
}

dim3 blocks_for(int64_t total) { return capped_grid(ceil_div(total, kThreads), kMaxBlocks); }

Status check_dims(const char* op, const EmbeddingDims& d) {
  NF_CHECK(d.B >= 0 && d.T >= 0 && d.B * d.T < (int64_t(1) << 31), op, "B and T must be non-negative, B*T < 2^31");
  NF_CHECK(d.V >= 1 && d.V <= INT32_MAX, op, "V must be in [1, 2^31)");
  NF_CHECK(d.D >= 1 && d.D < (int64_t(1) << 31), op, "D must be in [1, 2^31)");
  return Status::Ok();
}

// Fails naming the first position whose id is outside [0, V) (waits for the stream).
Status check_ids(const char* op, const int32_t* ids, const EmbeddingDims& d, cudaStream_t s) {
  const int n = int(d.B * d.T);
  void* p = nullptr;
  NF_TRY(workspace(0, sizeof(int), &p));
  int* bad = static_cast<int*>(p);
  NF_CUDA_TRY(op, launch(check_ids_kernel, dim3(1), dim3(kCheckThreads), 0, s, bad, ids, n, int(d.V)));
  int first = n;
  NF_CUDA_TRY(op, cudaMemcpyAsync(&first, bad, sizeof first, cudaMemcpyDeviceToHost, s));
  NF_CUDA_TRY(op, cudaStreamSynchronize(s));
  NF_CHECK(first == n, op,
           "id out of range at position " + std::to_string(first) + " (expected [0, " + std::to_string(d.V) + "))");
  return Status::Ok();
}

Status check_tokens(const char* op, int64_t B, int64_t N, int64_t D) {
  NF_CHECK(B >= 0 && N >= 0, op, "B and N must be non-negative");
  NF_CHECK(D >= 1 && D < (int64_t(1) << 31), op, "D must be in [1, 2^31)");
  return Status::Ok();
}

}  // namespace

Status run(const ops::EmbeddingForward<float>& p) {
  const char* op = "embedding_forward";
  const EmbeddingDims& d = p.d;
  float* out = p.out;
  const int32_t* ids = p.ids;
  const float *table = p.table, *pos = p.pos;
  NF_TRY(check_dims(op, d));
  if (d.B * d.T == 0) return Status::Ok();
  cudaStream_t s;
  NF_TRY(backend_stream(&s));
  NF_TRY(check_ids(op, ids, d, s));
  const int64_t total = d.B * d.T * d.D;
  NF_CUDA_TRY(op, launch(embedding_forward_kernel, blocks_for(total), dim3(kThreads), 0, s, out, ids, table, pos,
                         total, d.T, int(d.D), float(d.scale)));
  return Status::Ok();
}

Status run(const ops::EmbeddingBackward<float>& p) {
  const char* op = "embedding_backward";
  const EmbeddingDims& d = p.d;
  float *dtable = p.dtable, *dpos = p.dpos;
  const float* dout = p.dout;
  const int32_t* ids = p.ids;
  NF_TRY(check_dims(op, d));
  if (d.B * d.T == 0) return Status::Ok();
  cudaStream_t s;
  NF_TRY(backend_stream(&s));
  NF_TRY(check_ids(op, ids, d, s));
  NF_CUDA_TRY(op, launch(embedding_scatter_kernel, dim3(unsigned(ceil_div(d.D, kThreads))), dim3(kThreads), 0, s,
                         dtable, dout, ids, d.B * d.T, int(d.D), float(d.scale)));
  if (dpos)
    NF_CUDA_TRY(op, launch(position_grad_kernel, blocks_for(d.T * d.D), dim3(kThreads), 0, s, dpos,
                           static_cast<float*>(nullptr), dout, d.B, d.T, int(d.D)));
  return Status::Ok();
}

template <class S>
Status cls_pos_forward(const ops::ClsPosForward<S>& p) {
  const char* op = "cls_pos_forward";
  const int64_t B = p.d.B, N = p.d.N, D = p.d.D;
  NF_TRY(check_tokens(op, B, N, D));
  if (B == 0) return Status::Ok();
  cudaStream_t s;
  NF_TRY(backend_stream(&s));
  const int64_t rows = B * (N + 1);
  NF_CUDA_TRY(op, launch(cls_pos_forward_kernel<S>, capped_grid(rows, kMaxBlocks), dim3(kThreads), 0, s, p.out, p.cls,
                         p.patches, p.pos, rows, N, int(D)));  // (a block a row)
  return Status::Ok();
}

template <class S>
Status cls_pos_backward(const ops::ClsPosBackward<S>& p) {
  const char* op = "cls_pos_backward";
  const int64_t B = p.d.B, N = p.d.N, D = p.d.D;
  NF_TRY(check_tokens(op, B, N, D));
  if (B == 0) return Status::Ok();
  cudaStream_t s;
  NF_TRY(backend_stream(&s));
  NF_CUDA_TRY(op, launch(cls_pos_backward_kernel<S>, blocks_for((N + 1) * D), dim3(kThreads), 0, s, p.dcls, p.dpatches,
                         p.dpos, p.dout, B, N, int(D)));
  return Status::Ok();
}

Status run(const ops::ClsPosForward<float>& p) { return cls_pos_forward(p); }
Status run(const ops::ClsPosForward<bf16>& p) { return cls_pos_forward(p); }
Status run(const ops::ClsPosBackward<float>& p) { return cls_pos_backward(p); }
Status run(const ops::ClsPosBackward<bf16>& p) { return cls_pos_backward(p); }

Status run(const ops::SinusoidalEncoding<float>& p) {
  const char* op = "sinusoidal_encoding";
  NF_CHECK(p.len >= 0, op, "len must be non-negative");
  NF_CHECK(p.D >= 1 && p.D < (int64_t(1) << 31), op, "D must be in [1, 2^31)");
  if (p.len == 0) return Status::Ok();
  cudaStream_t s;
  NF_TRY(backend_stream(&s));
  const int64_t total = p.len * p.D;
  NF_CUDA_TRY(op, launch(sinusoidal_kernel, blocks_for(total), dim3(kThreads), 0, s, p.out, total, int(p.D)));
  return Status::Ok();
}

Status run(const ops::TokenPosForward<float>& p) {
  const char* op = "token_pos_forward";
  const int64_t B = p.d.B, N = p.d.N, D = p.d.D;
  NF_TRY(check_tokens(op, B, N, D));
  if (B * N == 0) return Status::Ok();
  cudaStream_t s;
  NF_TRY(backend_stream(&s));
  const int64_t total = B * N * D;
  NF_CUDA_TRY(op, launch(token_pos_forward_kernel, blocks_for(total), dim3(kThreads), 0, s, p.out, p.token, p.pos,
                         total, N, int(D)));
  return Status::Ok();
}

Status run(const ops::TokenPosBackward<float>& p) {
  const char* op = "token_pos_backward";
  const int64_t B = p.d.B, N = p.d.N, D = p.d.D;
  NF_TRY(check_tokens(op, B, N, D));
  if (B * N == 0) return Status::Ok();  // nothing to add
  cudaStream_t s;
  NF_TRY(backend_stream(&s));
  float* sums = nullptr;  // S [N, D]
  NF_TRY(workspace_array(0, N * D, &sums));
  NF_CUDA_TRY(op, launch(position_grad_kernel, blocks_for(N * D), dim3(kThreads), 0, s, p.dpos, sums, p.dout, B, N,
                         int(D)));
  return bias_grad(p.dtoken, static_cast<const float*>(sums), N, D, nullptr);
}

}  // namespace nf::cuda
