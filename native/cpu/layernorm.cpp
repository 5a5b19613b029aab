// LayerNorm, forward and backward.
// Math (per row of D values): mean = Σx/D, var = Σ(x-mean)²/D, rstd = 1/sqrt(var + eps),
//   xhat = (x - mean) rstd, out = xhat γ + β.
//   Backward: g = dout γ; dx = rstd (g - mean(g) - xhat mean(g xhat)); dγ += Σ dout xhat; dβ += Σ dout.
// Layout: x, out, dout, dx are [rows, D] row-major; γ, β [D]; mean, rstd [rows].
// Dimension key: rows = B*T, D = model width.
// Threads split rows; dγ/dβ are summed per chunk into the caller's scratch, then reduced.
#include "layernorm.h"

#include <algorithm>
#include <cstring>

#include "../core/allocator.h"
#include "../core/threadpool.h"
#include "isa.h"

namespace nf::cpu::NF_ISA_NS {
#include "simd.h"

namespace {

// Two-pass mean and variance of one row (numerically safer than Σx² - mean²).
void row_moments(const float* x, int64_t D, float* mean_out, float* rstd_out, float eps) {
  vf s = vzero();
  int64_t i = 0;
  for (; i + W <= D; i += W) s = vadd(s, vload(x + i));
  float sum = vsum(s);
  for (; i < D; ++i) sum += x[i];
  float mean = sum / static_cast<float>(D);
  vf vm = vset1(mean), q = vzero();
  i = 0;
  for (; i + W <= D; i += W) {
    vf c = vsub(vload(x + i), vm);
    q = vfma(c, c, q);
  }
  float sq = vsum(q);
  for (; i < D; ++i) sq += (x[i] - mean) * (x[i] - mean);
  *mean_out = mean;
  *rstd_out = 1.0f / std::sqrt(sq / static_cast<float>(D) + eps);
}

}  // namespace

void layernorm_forward(const ops::LayerNormForward<float>& p) {
  float *out = p.out, *sum = p.sum, *mean = p.mean, *rstd = p.rstd;
  const float *x = p.x, *residual = p.residual, *gamma = p.gamma, *beta = p.beta;
  const int64_t D = p.D;
  const float eps = static_cast<float>(p.eps);
  parallel_for(p.rows, 16, [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r) {
      const float* xr = x + r * D;
      if (residual) {
        float* sr = sum + r * D;
        const float* rr = residual + r * D;
        int64_t i = 0;
        for (; i + W <= D; i += W) vstore(sr + i, vadd(vload(xr + i), vload(rr + i)));
        for (; i < D; ++i) sr[i] = xr[i] + rr[i];
        xr = sr;
      }
      float m, rs;
      row_moments(xr, D, &m, &rs, eps);
      mean[r] = m;
      rstd[r] = rs;
      float* o = out + r * D;
      vf vm = vset1(m), vr = vset1(rs);
      int64_t i = 0;
      for (; i + W <= D; i += W) {
        vf xh = vmul(vsub(vload(xr + i), vm), vr);
        vstore(o + i, vfma(xh, vload(gamma + i), vload(beta + i)));
      }
      for (; i < D; ++i) o[i] = (xr[i] - m) * rs * gamma[i] + beta[i];
    }
  });
}

void layernorm_backward(const ops::LayerNormBackward<float>& p) {
  float *dx = p.dx, *dgamma = p.dgamma, *dbeta = p.dbeta;
  const float *dout = p.dout, *dadd = p.dadd, *x = p.x, *mean = p.mean, *rstd = p.rstd, *gamma = p.gamma;
  const int64_t D = p.D, rows = p.rows;
  const int64_t chunk = 32;
  const int64_t nchunks = (rows + chunk - 1) / chunk;
  // Per-chunk partial dγ, dβ: [nchunks, 2, D] in the calling thread's scratch.
  float* partial = static_cast<float*>(thread_scratch(ScratchSlot::partials, sizeof(float) * nchunks * 2 * D));
  parallel_for(nchunks, [&](int64_t c0, int64_t c1) {
    for (int64_t c = c0; c < c1; ++c) {
      float* pg = partial + c * 2 * D;
      float* pb = pg + D;
      std::memset(pg, 0, sizeof(float) * 2 * D);
      for (int64_t r = c * chunk; r < std::min(rows, (c + 1) * chunk); ++r) {
        const float* xr = x + r * D;
        const float* g = dout + r * D;
        const float m = mean[r], rs = rstd[r];
        vf vm = vset1(m), vr = vset1(rs);
        // Pass 1: mean(dout γ) and mean(dout γ xhat); accumulate dγ, dβ partials.
        vf s1 = vzero(), s2 = vzero();
        int64_t i = 0;
        for (; i + W <= D; i += W) {
          vf xh = vmul(vsub(vload(xr + i), vm), vr);
          vf go = vload(g + i);
          vf gg = vmul(go, vload(gamma + i));
          s1 = vadd(s1, gg);
          s2 = vfma(gg, xh, s2);
          vstore(pg + i, vfma(go, xh, vload(pg + i)));
          vstore(pb + i, vadd(go, vload(pb + i)));
        }
        float a1 = vsum(s1), a2 = vsum(s2);
        for (; i < D; ++i) {
          float xh = (xr[i] - m) * rs, gg = g[i] * gamma[i];
          a1 += gg;
          a2 += gg * xh;
          pg[i] += g[i] * xh;
          pb[i] += g[i];
        }
        a1 /= static_cast<float>(D);
        a2 /= static_cast<float>(D);
        // Pass 2: dx.
        float* o = dx + r * D;
        const float* ad = dadd ? dadd + r * D : nullptr;
        vf va1 = vset1(a1), va2 = vset1(a2);
        i = 0;
        for (; i + W <= D; i += W) {
          vf xh = vmul(vsub(vload(xr + i), vm), vr);
          vf gg = vmul(vload(g + i), vload(gamma + i));
          vf v = vmul(vr, vfnma(xh, va2, vsub(gg, va1)));
          if (ad) v = vadd(v, vload(ad + i));
          vstore(o + i, v);
        }
        for (; i < D; ++i) {
          float xh = (xr[i] - m) * rs;
          float v = rs * (g[i] * gamma[i] - a1 - xh * a2);
          o[i] = ad ? v + ad[i] : v;
        }
      }
    }
  });
  parallel_for(D, 64, [&](int64_t i0, int64_t i1) {
    for (int64_t i = i0; i < i1; ++i) {
      float sg = 0.0f, sb = 0.0f;
      for (int64_t c = 0; c < nchunks; ++c) {
        sg += partial[c * 2 * D + i];
        sb += partial[c * 2 * D + D + i];
      }
      dgamma[i] += sg;
      dbeta[i] += sb;
    }
  });
}

}  // namespace nf::cpu::NF_ISA_NS

#ifdef NF_ISA_PRIMARY
namespace nf::cpu {

Status run(const ops::LayerNormForward<float>& p) {
  NF_TRY(ops::layernorm_check("layernorm_forward", p));
  NF_CHECK(!p.residual || p.sum, "layernorm_forward", "the residual variant needs a `sum` output");
  NF_DISPATCH(layernorm_forward, p);
  return Status::Ok();
}

Status run(const ops::LayerNormBackward<float>& p) {
  NF_TRY(ops::layernorm_check("layernorm_backward", p));
  if (p.rows == 0) return Status::Ok();
  NF_CHECK(thread_scratch(ScratchSlot::partials, sizeof(float) * 2 * p.D * ((p.rows + 31) / 32)), "layernorm_backward",
           "out of memory for the gradient partial sums");
  NF_DISPATCH(layernorm_backward, p);
  return Status::Ok();
}

}  // namespace nf::cpu
#endif
#include "isa_end.h"
