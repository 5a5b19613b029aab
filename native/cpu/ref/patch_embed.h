// Reference patch embedding: the P x P, stride-P convolution written out directly (no patch
// matrix), double accumulators, templated on the storage type. The ops and their math:
// native/ops/patch_embed.h and reference/torch_reference.py's PatchEmbedding.
#pragma once
#include <cstdint>

#include "../../ops/patch_embed.h"

namespace nf::ref {

// out[b, gy*Gw + gx, o] = bias[o] + Σ_{c,py,px} weight[o, c, py, px] img[b, c, gy*P + py, gx*P + px]
template <class T>
void run(const ops::PatchEmbedForward<T>& p) {
  T* out = p.out;
  const T *images = p.images, *weight = p.weight, *bias = p.bias;
  const int64_t B = p.d.B, C = p.d.C, H = p.d.H, W = p.d.W, P = p.d.P, D = p.d.D;
  const int64_t Gh = H / P, Gw = W / P;
  for (int64_t b = 0; b < B; ++b)
    for (int64_t gy = 0; gy < Gh; ++gy)
      for (int64_t gx = 0; gx < Gw; ++gx)
        for (int64_t o = 0; o < D; ++o) {
          double s = bias[o];
          for (int64_t c = 0; c < C; ++c)
            for (int64_t py = 0; py < P; ++py)
              for (int64_t px = 0; px < P; ++px)
                s += double(weight[((o * C + c) * P + py) * P + px]) *
                     double(images[((b * C + c) * H + gy * P + py) * W + gx * P + px]);
          out[((b * Gh + gy) * Gw + gx) * D + o] = static_cast<T>(s);
        }
}

// dweight += Σ_{b,n} dout[b,n,o] img(patch n); dbias += Σ dout; dimages (optional) = Σ_o dout[b,n,o] weight[o].
template <class T>
void run(const ops::PatchEmbedBackward<T>& p) {
  T *dimages = p.dimages, *dweight = p.dweight, *dbias = p.dbias;
  const T *dout = p.dout, *images = p.images, *weight = p.weight;
  const int64_t B = p.d.B, C = p.d.C, H = p.d.H, W = p.d.W, P = p.d.P, D = p.d.D;
  const int64_t Gh = H / P, Gw = W / P, N = Gh * Gw;
  for (int64_t o = 0; o < D; ++o) {
    double sb = 0;
    for (int64_t r = 0; r < B * N; ++r) sb += dout[r * D + o];
    dbias[o] += static_cast<T>(sb);
    for (int64_t c = 0; c < C; ++c)
      for (int64_t py = 0; py < P; ++py)
        for (int64_t px = 0; px < P; ++px) {
          double s = 0;
          for (int64_t b = 0; b < B; ++b)
            for (int64_t gy = 0; gy < Gh; ++gy)
              for (int64_t gx = 0; gx < Gw; ++gx)
                s += double(dout[((b * Gh + gy) * Gw + gx) * D + o]) *
                     double(images[((b * C + c) * H + gy * P + py) * W + gx * P + px]);
          dweight[((o * C + c) * P + py) * P + px] += static_cast<T>(s);
        }
  }
  if (!dimages) return;
  for (int64_t b = 0; b < B; ++b)
    for (int64_t c = 0; c < C; ++c)
      for (int64_t y = 0; y < H; ++y)
        for (int64_t x = 0; x < W; ++x) {
          const int64_t n = (y / P) * Gw + x / P, k = (c * P + y % P) * P + x % P;
          double s = 0;
          for (int64_t o = 0; o < D; ++o) s += double(dout[(b * N + n) * D + o]) * double(weight[o * C * P * P + k]);
          dimages[((b * C + c) * H + y) * W + x] = static_cast<T>(s);
        }
}

}  // namespace nf::ref
