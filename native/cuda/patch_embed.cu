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
// im2col and col2im are gathers, a block per written row (a patch row of X, an image row of dimages;
// grid-stride over rows), its threads over the row, no barriers.
#include "patch_embed.h"

#include "bf16.cuh"
#include "common.cuh"
#include "linear.h"

namespace nf::cuda {

namespace {

constexpr int kThreads = 256;
constexpr int64_t kMaxBlocks = 4096;

// X[r, k] for every r < B·N, k < K: a block per patch row r (grid-stride over the rows), its threads over
// k, so that the 64-bit division locating r's image and patch happens once a row, not per element.
template <class S>
__global__ void __launch_bounds__(kThreads)
    im2col_kernel(S* X, const float* images, int64_t rows, int C, int H, int W, int P) {
  const int Gw = W / P, N = (H / P) * Gw, K = C * P * P;
  for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    const int64_t b = r / N;
    const int n = int(r - b * N);
    const float* patch = images + b * C * int64_t(H) * W + int64_t(n / Gw) * P * W + (n % Gw) * P;  // (c, py, px) = 0
    for (int k = int(threadIdx.x); k < K; k += blockDim.x) {
      const int q = k / P, px = k - q * P, c = q / P, py = q - c * P;  // k = (c P + py) P + px
      store(X + r * K + k, patch[(int64_t(c) * H + py) * W + px]);
    }
  }
}

// dimages[b, c, y, x] = dX[b·N + n, k] for every image element: a block per image row (b, c, y), its
// threads over x (the row's coordinates once a row, as im2col_kernel).
template <class S>
__global__ void __launch_bounds__(kThreads)
    col2im_kernel(float* dimages, const S* dX, int64_t image_rows, int C, int H, int W, int P) {
  const int Gw = W / P, N = (H / P) * Gw, K = C * P * P;
  for (int64_t t = blockIdx.x; t < image_rows; t += gridDim.x) {  // t = (b·C + c)·H + y
    const int64_t bc = t / H, b = bc / C;
    const int y = int(t - bc * H), c = int(bc - b * C);
    const S* src = dX + (b * N + int64_t(y / P) * Gw) * K + (c * P + y % P) * P;  // + (x / P)·K + x % P
    float* dst = dimages + t * W;
    for (int x = int(threadIdx.x); x < W; x += blockDim.x) dst[x] = load(src + int64_t(x / P) * K + x % P);
  }
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
  NF_CUDA_TRY(op, launch(im2col_kernel<S>, capped_grid(rows, kMaxBlocks), dim3(kThreads), 0, s, *X, images, rows,
                         int(d.C), int(d.H), int(d.W), int(d.P)));
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
                        Act::none, compute_of(p.precision), p.bias_rounded);
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
  const int64_t image_rows = d.B * d.C * d.H;
  NF_CUDA_TRY(op, launch(col2im_kernel<S>, capped_grid(image_rows, kMaxBlocks), dim3(kThreads), 0, s, p.dimages,
                         static_cast<const S*>(dX), image_rows, int(d.C), int(d.H), int(d.W), int(d.P)));
  return Status::Ok();
}

}  // namespace

Status run(const ops::PatchEmbedForward<float>& p) { return forward(p); }
Status run(const ops::PatchEmbedForward<bf16>& p) { return forward(p); }
Status run(const ops::PatchEmbedBackward<float>& p) { return backward(p); }
Status run(const ops::PatchEmbedBackward<bf16>& p) { return backward(p); }

}  // namespace nf::cuda
