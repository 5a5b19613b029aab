// LayerNorm over the last dimension (torch's nn.LayerNorm), with the fused residual add of a post-LN
// block. Dimension key: rows = B*T (every row normalised independently), D = normalised width.
//   forward:  out = (x − mean) · rstd · γ + β, mean and rstd [rows] saved; with `residual`, first
//             sum = x + residual (written to `sum`, which backward then takes as x).
//   backward: g = dout γ; dx = rstd (g − mean(g) − x̂ mean(g x̂)) (+ dadd); dγ += Σ dout x̂; dβ += Σ dout.
#pragma once
#include <cstdint>

#include "../core/status.h"
#include "schema.h"

namespace nf::ops {

// The checks every backend runs before its kernel (the bindings have validated the fields already;
// these guard direct callers).
template <class P>
Status layernorm_check(const char* op, const P& p) {
  NF_CHECK(p.rows >= 0, op, "rows must be non-negative");
  NF_CHECK(p.D >= 1, op, "D must be at least 1");
  NF_CHECK(p.eps > 0.0, op, "eps must be positive");
  return Status::Ok();
}

template <class T>
struct LayerNormForward {
  static constexpr const char* name = "layernormForward";
  static constexpr const char* summary =
      "out = LN(x) (or LN(x + residual), writing that sum to `sum`); saves mean and rstd [rows].";
  int64_t rows = 0, D = 0;
  double eps = 1e-5;
  T* out = nullptr;
  T* sum = nullptr;   // [rows, D] x + residual; needed exactly when residual is given
  Acc<T>* mean = nullptr;  // [rows] saved
  Acc<T>* rstd = nullptr;  // [rows] saved: 1 / sqrt(var + eps)
  const T* x = nullptr;
  const T* residual = nullptr;
  const Acc<T>* gamma = nullptr;
  const Acc<T>* beta = nullptr;

  template <class R>
  static void fields(R& r, LayerNormForward& p) {
    r.dim(p.rows, "rows", 0);
    r.dim(p.D, "D");
    r.number(p.eps, "eps", 1e-5, 1e-30, 1.0);
    r.out(p.out, "out", NF_SHAPE(p.rows, p.D));
    r.saved(p.mean, "mean", NF_SHAPE(p.rows));
    r.saved(p.rstd, "rstd", NF_SHAPE(p.rows));
    r.in(p.x, "x", NF_SHAPE(p.rows, p.D));
    r.in(p.residual, "residual", NF_SHAPE(p.rows, p.D), optional, doc("added to x before the normalisation"));
    r.saved(p.sum, "sum", NF_SHAPE(p.rows, p.D), when(r.given("residual"), "residual is given"),
            doc("x + residual, what backward takes as x"));
    r.in(p.gamma, "gamma", NF_SHAPE(p.D));
    r.in(p.beta, "beta", NF_SHAPE(p.D));
  }
};

template <class T>
struct LayerNormBackward {
  static constexpr const char* name = "layernormBackward";
  static constexpr const char* summary = "dx = LN'ᵀ dout (+ dadd); dgamma += Σ dout·x̂; dbeta += Σ dout. dx may be dadd.";
  int64_t rows = 0, D = 0;
  double eps = 1e-5;  // unused: rstd carries it (kept so the checks match the forward's)
  T* dx = nullptr;
  Acc<T>* dgamma = nullptr;
  Acc<T>* dbeta = nullptr;
  const T* dout = nullptr;
  const T* dadd = nullptr;  // a gradient reaching x along another path (the residual stream), added in
  const T* x = nullptr;
  const Acc<T>* mean = nullptr;
  const Acc<T>* rstd = nullptr;
  const Acc<T>* gamma = nullptr;

  template <class R>
  static void fields(R& r, LayerNormBackward& p) {
    r.dim(p.rows, "rows", 0);
    r.dim(p.D, "D");
    r.out(p.dx, "dx", NF_SHAPE(p.rows, p.D), grad_of("x"));
    r.inout(p.dgamma, "dgamma", NF_SHAPE(p.D), grad_of("gamma"));
    r.inout(p.dbeta, "dbeta", NF_SHAPE(p.D), grad_of("beta"));
    r.in(p.dout, "dout", NF_SHAPE(p.rows, p.D), grad_of("out"));
    r.in(p.dadd, "dadd", NF_SHAPE(p.rows, p.D), optional, doc("a gradient of x from another path, added to dx"));
    r.in(p.x, "x", NF_SHAPE(p.rows, p.D), doc("the forward's x (its `sum` with a residual)"));
    r.saved(p.mean, "mean", NF_SHAPE(p.rows));
    r.saved(p.rstd, "rstd", NF_SHAPE(p.rows));
    r.in(p.gamma, "gamma", NF_SHAPE(p.D));
  }
};

}  // namespace nf::ops
