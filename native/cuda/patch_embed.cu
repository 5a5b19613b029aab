// Patch embedding on the GPU, forward and backward: im2col + the Linear layer's GEMMs + col2im.
// Math: the patch matrix X[b·N + n, k] = img[b, c, gy·P + py, gx·P + px] with n = gy·Gw + gx and
//   k = (c·P + py)·P + px (the flattening of weight [D, C, P, P]); out = X Wᵀ + bias.
//   Backward: dX = dout W, dW += doutᵀ X, dbias += Σ_rows dout; dimages = col2im(dX) (patches do not
//   overlap, so col2im is a permutation: no accumulation).
// Layout: images [B, C, H, W] (NCHW); X, dX [B·N, K] in scratch slots 2 and 3; out, dout [B, N, D].
// Dimension key: B batch, C channels, H, W image size, P patch, Gh = H/P, Gw = W/P, N = Gh·Gw,
//   K = C·P·P, D width.
// Storage: images and dimages float (the caller's pixels); X, dX, out, dout and the weight S (float,
// or bf16 under precision 'bf16' with the weight the master's bf16 copy); bias and gradients float.
// im2col and col2im are gathers, one thread per written element (grid-stride), no barriers.
#include "patch_embed.h"

#include "bf16.cuh"
#include "common.cuh"
#include "linear.h"

namespace nf::cuda {

namespace {

constexpr int kThreads = 256;
constexpr int64_t kMaxBlocks = 4096;

// X[r, k] for every r < B·N, k < K.
template <class S>
__global__ void __launch_bounds__(kThreads)
    im2col_kernel(S* X, const float* images, int64_t total, int C, int H, int W, int P) {
  const int Gw = W / P, N = (H / P) * Gw, K = C * P * P;
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < total; i += int64_t(gridDim.x) * blockDim.x) {
    const int64_t r = i / K, b = r / N;
    const int n = int(r % N), k = int(i % K);
    const int c = k / (P * P), py = (k / P) % P, px = k % P;
    store(X + i, images[((b * C + c) * H + (n / Gw) * P + py) * int64_t(W) + (n % Gw) * P + px]);
  }
}

// dimages[b, c, y, x] = dX[b·N + n, k] for every image element.
template <class S>
__global__ void __launch_bounds__(kThreads)
    col2im_kernel(float* dimages, const S* dX, int64_t total, int C, int H, int W, int P) {
  const int Gw = W / P, N = (H / P) * Gw, K = C * P * P;
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < total; i += int64_t(gridDim.x) * blockDim.x) {
    const int x = int(i % W), y = int((i / W) % H), c = int((i / (int64_t(W) * H)) % C);
    const int64_t b = i / (int64_t(W) * H * C);
    const int n = (y / P) * Gw + x / P, k = (c * P + y % P) * P + x % P;
    dimages[i] = load(dX + (b * N + n) * K + k);
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
template <class S>
Status im2col(const char* op, S** X, const float* images, const PatchEmbedDims& d, cudaStream_t s) {
  const int64_t rows = d.B * (d.H / d.P) * (d.W / d.P), K = d.C * d.P * d.P;
  NF_TRY(workspace_array(2, rows * K, X));
  NF_CUDA_TRY(op, launch(im2col_kernel<S>, blocks_for(rows * K), dim3(kThreads), 0, s, *X, images, rows * K, int(d.C),
                         int(d.H), int(d.W), int(d.P)));
  return Status::Ok();
}

template <class S>
Status forward(const ops::PatchEmbedForward<S>& p) {
  const char* op = "patch_embed_forward";
  const PatchEmbedDims& d = p.d;
  NF_TRY(check(op, d));
  if (d.B == 0) return Status::Ok();
  cudaStream_t s;
  NF_TRY(backend_stream(&s));
  S* X = nullptr;
  NF_TRY(im2col(op, &X, p.images, d, s));
  return linear_forward(p.out, nullptr, X, p.weight, p.bias, {d.B * (d.H / d.P) * (d.W / d.P), d.C * d.P * d.P, d.D},
                        Act::none, compute_of(p.precision));
}

template <class S>
Status backward(const ops::PatchEmbedBackward<S>& p) {
  const char* op = "patch_embed_backward";
  const PatchEmbedDims& d = p.d;
  NF_TRY(check(op, d));
  if (d.B == 0) return Status::Ok();
  cudaStream_t s;
  NF_TRY(backend_stream(&s));
  const LinearDims ld{d.B * (d.H / d.P) * (d.W / d.P), d.C * d.P * d.P, d.D};
  S* X = nullptr;
  NF_TRY(im2col(op, &X, p.images, d, s));
  S* dX = nullptr;
  if (p.dimages) NF_TRY(workspace_array(3, ld.rows * ld.in_features, &dX));
  NF_TRY(cuda::linear_backward(dX, p.dweight, p.dbias, p.dout, X, p.weight, ld, compute_of(p.precision)));
  if (!p.dimages) return Status::Ok();
  const int64_t total = d.B * d.C * d.H * d.W;
  NF_CUDA_TRY(op, launch(col2im_kernel<S>, blocks_for(total), dim3(kThreads), 0, s, p.dimages, static_cast<const S*>(dX),
                         total, int(d.C), int(d.H), int(d.W), int(d.P)));
  return Status::Ok();
}

}  // namespace

Status run(const ops::PatchEmbedForward<float>& p) { return forward(p); }
Status run(const ops::PatchEmbedForward<bf16>& p) { return forward(p); }
Status run(const ops::PatchEmbedBackward<float>& p) { return backward(p); }
Status run(const ops::PatchEmbedBackward<bf16>& p) { return backward(p); }

}  // namespace nf::cuda
