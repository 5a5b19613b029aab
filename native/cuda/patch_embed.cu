// Patch embedding on the GPU, forward and backward: im2col + the Linear layer's GEMMs + col2im.
// Math: the patch matrix X[b·N + n, k] = img[b, c, gy·P + py, gx·P + px] with n = gy·Gw + gx and
//   k = (c·P + py)·P + px (the flattening of weight [D, C, P, P]); out = X Wᵀ + bias.
//   Backward: dX = dout W, dW += doutᵀ X, dbias += Σ_rows dout; dimages = col2im(dX) (patches do not
//   overlap, so col2im is a permutation: no accumulation).
// Layout: images [B, C, H, W] (NCHW); X, dX [B·N, K] in scratch slots 2 and 3; out, dout [B, N, D].
// Dimension key: B batch, C channels, H, W image size, P patch, Gh = H/P, Gw = W/P, N = Gh·Gw,
//   K = C·P·P, D width.
// im2col and col2im are gathers, one thread per written element (grid-stride), no barriers.
#include "patch_embed.h"

#include "common.cuh"
#include "linear.h"

namespace nf::cuda {

namespace {

constexpr int kThreads = 256;
constexpr int64_t kMaxBlocks = 4096;

// X[r, k] for every r < B·N, k < K.
__global__ void __launch_bounds__(kThreads)
    im2col_kernel(float* X, const float* images, int64_t total, int C, int H, int W, int P) {
  const int Gw = W / P, N = (H / P) * Gw, K = C * P * P;
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < total; i += int64_t(gridDim.x) * blockDim.x) {
    const int64_t r = i / K, b = r / N;
    const int n = int(r % N), k = int(i % K);
    const int c = k / (P * P), py = (k / P) % P, px = k % P;
    X[i] = images[((b * C + c) * H + (n / Gw) * P + py) * int64_t(W) + (n % Gw) * P + px];
  }
}

// dimages[b, c, y, x] = dX[b·N + n, k] for every image element.
__global__ void __launch_bounds__(kThreads)
    col2im_kernel(float* dimages, const float* dX, int64_t total, int C, int H, int W, int P) {
  const int Gw = W / P, N = (H / P) * Gw, K = C * P * P;
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < total; i += int64_t(gridDim.x) * blockDim.x) {
    const int x = int(i % W), y = int((i / W) % H), c = int((i / (int64_t(W) * H)) % C);
    const int64_t b = i / (int64_t(W) * H * C);
    const int n = (y / P) * Gw + x / P, k = (c * P + y % P) * P + x % P;
    dimages[i] = dX[(b * N + n) * K + k];
  }
}

dim3 blocks_for(int64_t total) {
  const int64_t b = ceil_div(total, kThreads);
  return dim3(unsigned(b < kMaxBlocks ? b : kMaxBlocks));
}

Status check(const char* op, const PatchEmbedDims& d) {
  NF_TRY(ops::patch_embed_check(op, d));  // the checks every backend shares
  NF_CHECK(d.C * d.H * d.W < (int64_t(1) << 31), op, "an image must have fewer than 2^31 elements");
  return Status::Ok();
}

// The patch matrix of the images in scratch slot 2: X [B·N, K].
Status im2col(const char* op, float** X, const float* images, const PatchEmbedDims& d, cudaStream_t s) {
  const int64_t rows = d.B * (d.H / d.P) * (d.W / d.P), K = d.C * d.P * d.P;
  void* p = nullptr;
  NF_TRY(workspace(2, sizeof(float) * size_t(rows * K), &p));
  *X = static_cast<float*>(p);
  NF_CUDA_TRY(op, launch(im2col_kernel, blocks_for(rows * K), dim3(kThreads), 0, s, *X, images, rows * K, int(d.C),
                         int(d.H), int(d.W), int(d.P)));
  return Status::Ok();
}

}  // namespace

Status run(const ops::PatchEmbedForward<float>& p) {
  const char* op = "patch_embed_forward";
  const PatchEmbedDims& d = p.d;
  float* out = p.out;
  const float *images = p.images, *weight = p.weight, *bias = p.bias;
  NF_TRY(check(op, d));
  if (d.B == 0) return Status::Ok();
  cudaStream_t s;
  NF_TRY(backend_stream(&s));
  float* X = nullptr;
  NF_TRY(im2col(op, &X, images, d, s));
  return linear_forward(out, nullptr, X, weight, bias, {d.B * (d.H / d.P) * (d.W / d.P), d.C * d.P * d.P, d.D}, Act::none,
                       compute_of(p.precision));
}

Status run(const ops::PatchEmbedBackward<float>& p) {
  const char* op = "patch_embed_backward";
  const PatchEmbedDims& d = p.d;
  float *dimages = p.dimages, *dweight = p.dweight, *dbias = p.dbias;
  const float *dout = p.dout, *images = p.images, *weight = p.weight;
  NF_TRY(check(op, d));
  if (d.B == 0) return Status::Ok();
  cudaStream_t s;
  NF_TRY(backend_stream(&s));
  const LinearDims ld{d.B * (d.H / d.P) * (d.W / d.P), d.C * d.P * d.P, d.D};
  float* X = nullptr;
  NF_TRY(im2col(op, &X, images, d, s));
  void* dX = nullptr;
  if (dimages) NF_TRY(workspace(3, sizeof(float) * size_t(ld.rows * ld.in_features), &dX));
  NF_TRY(cuda::linear_backward(static_cast<float*>(dX), dweight, dbias, dout, X, weight, ld, compute_of(p.precision)));
  if (!dimages) return Status::Ok();
  const int64_t total = d.B * d.C * d.H * d.W;
  NF_CUDA_TRY(op, launch(col2im_kernel, blocks_for(total), dim3(kThreads), 0, s, dimages,
                         static_cast<const float*>(dX), total, int(d.C), int(d.H), int(d.W), int(d.P)));
  return Status::Ok();
}

}  // namespace nf::cuda
