// Reference LayerNorm: plain scalar loops, double accumulators, templated on the storage type so
// tests can run it in float64. The op and its math: native/ops/layernorm.h (and torch's nn.LayerNorm).
#pragma once
#include <cmath>
#include <cstdint>

#include "../../ops/layernorm.h"

namespace nf::ref {

template <class T>
void run(const ops::LayerNormForward<T>& p) {
  T *out = p.out, *sum = p.sum, *mean = p.mean, *rstd = p.rstd;
  const T *x = p.x, *residual = p.residual, *gamma = p.gamma, *beta = p.beta;
  const int64_t rows = p.rows, D = p.D;
  const double eps = p.eps;
  for (int64_t r = 0; r < rows; ++r) {
    const T* xr = x + r * D;
    if (residual) {
      for (int64_t i = 0; i < D; ++i) sum[r * D + i] = xr[i] + residual[r * D + i];
      xr = sum + r * D;
    }
    double m = 0, v = 0;
    for (int64_t i = 0; i < D; ++i) m += xr[i];
    m /= D;
    for (int64_t i = 0; i < D; ++i) v += (xr[i] - m) * (xr[i] - m);
    double rs = 1.0 / std::sqrt(v / D + eps);
    mean[r] = static_cast<T>(m);
    rstd[r] = static_cast<T>(rs);
    for (int64_t i = 0; i < D; ++i) out[r * D + i] = static_cast<T>((xr[i] - m) * rs * gamma[i] + beta[i]);
  }
}

template <class T>
void run(const ops::LayerNormBackward<T>& p) {
  T *dx = p.dx, *dgamma = p.dgamma, *dbeta = p.dbeta;
  const T *dout = p.dout, *dadd = p.dadd, *x = p.x, *mean = p.mean, *rstd = p.rstd, *gamma = p.gamma;
  const int64_t rows = p.rows, D = p.D;
  for (int64_t r = 0; r < rows; ++r) {
    const T* xr = x + r * D;
    const T* g = dout + r * D;
    double m = mean[r], rs = rstd[r], a1 = 0, a2 = 0;
    for (int64_t i = 0; i < D; ++i) {
      double xh = (xr[i] - m) * rs;
      a1 += double(g[i]) * gamma[i];
      a2 += double(g[i]) * gamma[i] * xh;
      dgamma[i] += static_cast<T>(double(g[i]) * xh);
      dbeta[i] += g[i];
    }
    a1 /= D;
    a2 /= D;
    for (int64_t i = 0; i < D; ++i) {
      double xh = (xr[i] - m) * rs;
      double v = rs * (double(g[i]) * gamma[i] - a1 - xh * a2);
      dx[r * D + i] = static_cast<T>(dadd ? v + dadd[r * D + i] : v);
    }
  }
}

}  // namespace nf::ref
