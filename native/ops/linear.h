// GEMM and the Linear layer (PyTorch's nn.Linear: y = x Wᵀ + b, W stored [out, in]).
// GEMM: C = act(alpha · op(A) op(B) + beta · C + bias), row-major, strided-batched. Dimension key:
// op(A) is [M, K], op(B) is [K, N], C is [M, N]; transA/transB mean A is stored [K, M] / B is
// stored [N, K] (so a Linear layer y = x Wᵀ is gemm(transB)). lda/ldb/ldc are row strides in
// elements (0 = packed), bias is [N] (one per column), `preact` (optional) receives the value before
// the activation, batches step A, B, C (and preact) by strideA/strideB/strideC elements.
// GemmDims and LinearDims are also the kernels' own building blocks (attention, the feed-forward
// network and the patch embedding run their products through them), in every backend.
#pragma once
#include <algorithm>
#include <cstdint>
#include <string>

#include "../core/status.h"
#include "activation.h"
#include "packed.h"
#include "precision.h"
#include "schema.h"

namespace nf::ops {

struct GemmDims {
  int64_t M = 0, N = 0, K = 0;
  bool transA = false, transB = false;
  int64_t lda = 0, ldb = 0, ldc = 0;  // 0 = packed (K or M for A, N or K for B, N for C)
  int64_t batch = 1, strideA = 0, strideB = 0, strideC = 0;
  float alpha = 1.0f, beta = 0.0f;
  Act act = Act::none;
};

// Fills the lda/ldb/ldc defaults and checks sizes: what every backend runs first.
inline Status gemm_check(GemmDims* d) {
  NF_CHECK(d->M >= 0 && d->N >= 0 && d->K >= 0, "gemm", "M, N and K must be non-negative");
  NF_CHECK(d->batch >= 1, "gemm", "batch must be at least 1");
  if (d->lda == 0) d->lda = d->transA ? d->M : d->K;
  if (d->ldb == 0) d->ldb = d->transB ? d->K : d->N;
  if (d->ldc == 0) d->ldc = d->N;
  NF_CHECK(d->lda >= (d->transA ? d->M : d->K), "gemm", "lda is smaller than a row of A");
  NF_CHECK(d->ldb >= (d->transB ? d->K : d->N), "gemm", "ldb is smaller than a row of B");
  NF_CHECK(d->ldc >= d->N, "gemm", "ldc is smaller than a row of C");
  return Status::Ok();
}

// A Linear layer's product: rows = B*T (every leading dimension flattened), in and out features.
struct LinearDims {
  int64_t rows = 0;
  int64_t in_features = 0;
  int64_t out_features = 0;
};

inline Status linear_check(const char* op, const LinearDims& d) {
  NF_CHECK(d.rows >= 0, op, "rows must be non-negative");
  NF_CHECK(d.in_features >= 1 && d.out_features >= 1, op, "in and out features must be at least 1");
  return Status::Ok();
}

template <class T>
struct Gemm {
  static constexpr const char* name = "gemm";
  static constexpr const char* summary =
      "C = act(alpha · op(A) op(B) + beta · C + bias) for each of `batch` packed entries, where op(A) is [M, K] "
      "(A stored [K, M] when transA), op(B) is [K, N] (B stored [N, K] when transB), C and preact are "
      "[batch, M, N], A [batch, M, K], B [batch, K, N], bias [N] (shared by every entry). `preact`, when "
      "given, receives the value before the activation. Defaults: alpha 1, beta 0 (C is then not read), act "
      "'none', batch 1. Operands are packed unless lda/ldb/ldc (row strides, at least a stored row) or "
      "strideA/strideB/strideC (batch strides; 0 shares one entry) are given; each array then holds exactly "
      "the extent they span, e.g. A: (batch − 1)·strideA + (M − 1)·lda + K elements (preact is laid out like C).";
  GemmDims d;
  Precision precision = Precision::fp32;
  T* C = nullptr;
  T* preact = nullptr;
  const T* A = nullptr;
  const T* B = nullptr;
  const T* bias = nullptr;

  // The element bound of a strided operand's extent (beyond what a dim may be: strides multiply).
  static constexpr int64_t kMaxElements = int64_t(1) << 48;

  // One operand: `batch` entries of `rows` rows of `cols` values, rows `ld` apart, entries `stride`
  // apart (packed when the fields are absent); returns the extent its array holds.
  template <class R>
  static int64_t operand(R& r, const char* name, const char* ld_name, const char* stride_name, int64_t batch,
                         int64_t rows, int64_t cols, int64_t* ld, int64_t* stride) {
    const auto elements = [&](int64_t a, int64_t b) {
      if (b != 0 && a > kMaxElements / b) r.fail(std::string("the dims give too many elements for ") + name);
      return a * b;
    };
    r.integer(*ld, ld_name, cols, std::max<int64_t>(cols, 1), kMaxElements);
    r.integer(*stride, stride_name, elements(rows, *ld), 0, kMaxElements);
    if (rows == 0 || cols == 0) return 0;
    const int64_t extent = elements(batch - 1, *stride) + elements(rows - 1, *ld) + cols;
    if (extent > kMaxElements) r.fail(std::string("the dims give too many elements for ") + name);
    return extent;
  }

  template <class R>
  static void fields(R& r, Gemm& p) {
    GemmDims& d = p.d;
    r.dim(d.M, "M", 0);
    r.dim(d.N, "N", 0);
    r.dim(d.K, "K", 0);
    r.integer(d.batch, "batch", 1, 1, kMaxElements);
    r.flag(d.transA, "transA", false);
    r.flag(d.transB, "transB", false);
    r.number(d.alpha, "alpha", 1.0);
    r.number(d.beta, "beta", 0.0);
    r.choice(d.act, "act", kActivations, Act::none);
    precision_field(r, p.precision);
    const int64_t a = operand(r, "A", "lda", "strideA", d.batch, d.transA ? d.K : d.M, d.transA ? d.M : d.K,
                              &d.lda, &d.strideA);
    const int64_t b = operand(r, "B", "ldb", "strideB", d.batch, d.transB ? d.N : d.K, d.transB ? d.K : d.N,
                              &d.ldb, &d.strideB);
    const int64_t c = operand(r, "C", "ldc", "strideC", d.batch, d.M, d.N, &d.ldc, &d.strideC);
    if (d.batch > 1 && d.M > 0 && d.N > 0 && d.strideC < (d.M - 1) * d.ldc + d.N)
      r.fail("strideC is too small: the batch entries of C would overlap");
    r.in(p.A, "A", Shape::flat(a, "[batch, M, K] ([batch, K, M] when transA; strided by lda, strideA)"));
    r.in(p.B, "B", Shape::flat(b, "[batch, K, N] ([batch, N, K] when transB; strided by ldb, strideB)"));
    const char* c_text = "[batch, M, N] (strided by ldc, strideC)";
    r.inout(p.C, "C", Shape::flat(c, c_text), doc("read only when beta ≠ 0"));
    r.out(p.preact, "preact", Shape::flat(c, c_text), optional, doc("the value before the activation"));
    r.in(p.bias, "bias", NF_SHAPE(d.N), optional);
  }
};

template <class T>
struct LinearForward {
  static constexpr const char* name = "linearForward";
  static constexpr const char* summary =
      "y = act(x Wᵀ + b), PyTorch's nn.Linear: x [rows, inFeatures], W [outFeatures, inFeatures], b "
      "[outFeatures], y and preact (the value before act, optional) [rows, outFeatures]. WPacked (optional): W "
      "prepacked by packWeights, which the CPU kernels read instead of packing W (same result, bit for bit).";
  LinearDims d;
  Act act = Act::none;
  Precision precision = Precision::fp32;
  T* y = nullptr;
  T* preact = nullptr;
  const T* x = nullptr;
  const T* W = nullptr;
  const Acc<T>* b = nullptr;
  const Acc<T>* W_packed = nullptr;  // (float words whatever the activations)
  const T* b_rounded = nullptr;

  template <class R>
  static void fields(R& r, LinearForward& p) {
    r.dim(p.d.rows, "rows", 0);
    r.dim(p.d.in_features, "inFeatures");
    r.dim(p.d.out_features, "outFeatures");
    r.choice(p.act, "act", kActivations, Act::none);
    precision_field(r, p.precision);
    r.out(p.y, "y", Shape("[rows, outFeatures]", p.d.rows, p.d.out_features));
    r.out(p.preact, "preact", Shape("[rows, outFeatures]", p.d.rows, p.d.out_features), optional);
    r.in(p.x, "x", Shape("[rows, inFeatures]", p.d.rows, p.d.in_features));
    r.in(p.W, "W", Shape("[outFeatures, inFeatures]", p.d.out_features, p.d.in_features));
    r.in(p.b, "b", Shape("[outFeatures]", p.d.out_features), optional);
    r.in(p.W_packed, "WPacked", NF_PACKED_SHAPE(p.precision, p.d.out_features, p.d.in_features, "outFeatures", "inFeatures"), optional,
         doc("W prepacked by packWeights (N = outFeatures, K = inFeatures) for the active CPU kernels"));
    r.in(p.b_rounded, "bRounded", Shape("[outFeatures]", p.d.out_features), optional, doc(kRoundedBiasDoc));
  }
};

template <class T>
struct LinearBackward {
  static constexpr const char* name = "linearBackward";
  static constexpr const char* summary =
      "dx = dy W (overwritten; skipped when dx is null), dW += dyᵀ x, db += Σ_rows dy (when db is given). dy "
      "[rows, outFeatures], x and dx [rows, inFeatures], W and dW [outFeatures, inFeatures].";
  LinearDims d;
  Precision precision = Precision::fp32;
  T* dx = nullptr;
  Acc<T>* dW = nullptr;
  Acc<T>* db = nullptr;
  const T* dy = nullptr;
  const T* x = nullptr;
  const T* W = nullptr;

  template <class R>
  static void fields(R& r, LinearBackward& p) {
    r.dim(p.d.rows, "rows", 0);
    r.dim(p.d.in_features, "inFeatures");
    r.dim(p.d.out_features, "outFeatures");
    precision_field(r, p.precision);
    r.out(p.dx, "dx", Shape("[rows, inFeatures]", p.d.rows, p.d.in_features), optional, grad_of("x"));
    r.inout(p.dW, "dW", Shape("[outFeatures, inFeatures]", p.d.out_features, p.d.in_features), grad_of("W"));
    r.inout(p.db, "db", Shape("[outFeatures]", p.d.out_features), optional, grad_of("b"));
    r.in(p.dy, "dy", Shape("[rows, outFeatures]", p.d.rows, p.d.out_features), grad_of("y"));
    r.in(p.x, "x", Shape("[rows, inFeatures]", p.d.rows, p.d.in_features));
    r.in(p.W, "W", Shape("[outFeatures, inFeatures]", p.d.out_features, p.d.in_features));
  }
};

}  // namespace nf::ops
