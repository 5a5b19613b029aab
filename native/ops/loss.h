// Training losses with their gradients fused in: softmax cross-entropy over logits (PyTorch's
// F.cross_entropy with label smoothing and ignore_index, mean reduction) and mean squared error
// over (optionally masked) rows.
//   cross-entropy: loss = mean over non-ignored rows i of (1−ε)(−log p_i[t_i]) + ε·mean_c(−log p_i[c]),
//     p_i = softmax(logits[i]); NaN when every row is ignored (as PyTorch); dlogits = grad_scale ·
//     d loss / d logits, zero on ignored rows.
//   mse: loss = Σ_selected (pred − target)² / (selected rows · cols), a row selected when mask is
//     absent or mask[row] != 0; NaN when none is; dpred = grad_scale · 2 (pred − target) /
//     (selected · cols) on selected rows, 0 elsewhere.
#pragma once
#include <climits>
#include <cmath>
#include <cstdint>
#include <string>

#include "../core/status.h"
#include "schema.h"

namespace nf::ops {

struct CrossEntropyDims {
  int64_t N = 0;                 // rows (B*T flattened), one target each
  int64_t V = 0;                 // classes (vocabulary size)
  double label_smoothing = 0.0;  // ε in [0, 1]
  int32_t ignore_index = -100;   // rows whose target equals this are left out of the mean
  double grad_scale = 1.0;       // dlogits is multiplied by this (loss scaling, accumulation)
};

inline Status cross_entropy_check(const char* op, const CrossEntropyDims& d) {
  NF_CHECK(d.N >= 0, op, "N must be non-negative");
  NF_CHECK(d.V >= 1, op, "V must be at least 1");
  NF_CHECK(d.label_smoothing >= 0.0 && d.label_smoothing <= 1.0, op, "label_smoothing must lie in [0, 1]");
  NF_CHECK(std::isfinite(d.grad_scale), op, "grad_scale must be finite");
  return Status::Ok();
}

// Ok when every target is ignore_index or lies in [0, V); otherwise an error naming the first bad
// row. Host memory only (the CUDA kernel checks on the device).
inline Status cross_entropy_check_targets(const int32_t* targets, const CrossEntropyDims& d) {
  for (int64_t r = 0; r < d.N; ++r) {
    const int32_t t = targets[r];
    NF_CHECK(t == d.ignore_index || (t >= 0 && t < d.V), "cross_entropy",
             "target " + std::to_string(t) + " at row " + std::to_string(r) + " is outside [0, " +
                 std::to_string(d.V) + ") and is not ignore_index (" + std::to_string(d.ignore_index) + ")");
  }
  return Status::Ok();
}

template <class T>
struct CrossEntropy {
  static constexpr const char* name = "crossEntropy";
  static constexpr const char* summary =
      "Softmax cross-entropy with PyTorch's F.cross_entropy semantics (mean reduction): loss[0] = mean over rows "
      "whose target is not `ignoreIndex` (default −100) of (1−ε)(−log p[target]) + ε·mean_c(−log p[c]), p = "
      "softmax(logits row), ε = `labelSmoothing` (default 0); NaN when every row is ignored, as PyTorch. "
      "`dlogits` (optional, overwritten) = `gradScale` (default 1) · d loss / d logits, zero on ignored rows. "
      "logits/dlogits [N, V], targets [N], loss [1]. A target outside [0, V) that is not ignoreIndex throws, "
      "naming the row.";
  CrossEntropyDims d;
  Acc<T>* loss = nullptr;
  T* dlogits = nullptr;
  const T* logits = nullptr;
  const int32_t* targets = nullptr;

  template <class R>
  static void fields(R& r, CrossEntropy& p) {
    CrossEntropyDims& d = p.d;
    r.dim(d.N, "N", 0);
    r.dim(d.V, "V", 1, INT32_MAX);
    r.number(d.label_smoothing, "labelSmoothing", 0.0, 0.0, 1.0);
    r.integer(d.ignore_index, "ignoreIndex", -100, INT32_MIN, INT32_MAX);
    r.number(d.grad_scale, "gradScale", 1.0);
    r.out(p.loss, "loss", Shape("[1]", 1));
    r.out(p.dlogits, "dlogits", NF_SHAPE(d.N, d.V), optional, grad_of("logits"));
    r.in(p.logits, "logits", NF_SHAPE(d.N, d.V));
    r.in(p.targets, "targets", NF_SHAPE(d.N));
    // Checked before any work, so a bad target is an invalid argument naming its row.
    r.check_values([&] { return cross_entropy_check_targets(p.targets, d); });
  }
};

struct MseDims {
  int64_t rows = 0;
  int64_t cols = 0;
  double grad_scale = 1.0;
};

inline Status mse_check(const char* op, const MseDims& d) {
  NF_CHECK(d.rows >= 0, op, "rows must be non-negative");
  NF_CHECK(d.cols >= 1, op, "cols must be at least 1");
  NF_CHECK(std::isfinite(d.grad_scale), op, "grad_scale must be finite");
  return Status::Ok();
}

template <class T>
struct Mse {
  static constexpr const char* name = "mse";
  static constexpr const char* summary =
      "Mean squared error over the rows selected by `mask` (Uint8Array [rows], nonzero = the row counts; every row "
      "when absent): loss[0] = Σ (pred − target)² / (selected rows · cols), NaN when no row is selected. `dpred` "
      "(optional, overwritten) = gradScale · 2 (pred − target) / (selected rows · cols) on selected rows, 0 "
      "elsewhere. pred/target/dpred [rows, cols], loss [1].";
  MseDims d;
  T* loss = nullptr;
  T* dpred = nullptr;
  const T* pred = nullptr;
  const T* target = nullptr;
  const uint8_t* mask = nullptr;

  template <class R>
  static void fields(R& r, Mse& p) {
    MseDims& d = p.d;
    r.dim(d.rows, "rows", 0);
    r.dim(d.cols, "cols");
    r.number(d.grad_scale, "gradScale", 1.0);
    r.out(p.loss, "loss", Shape("[1]", 1));
    r.out(p.dpred, "dpred", NF_SHAPE(d.rows, d.cols), optional, grad_of("pred"));
    r.in(p.pred, "pred", NF_SHAPE(d.rows, d.cols));
    r.in(p.target, "target", NF_SHAPE(d.rows, d.cols));
    r.in(p.mask, "mask", NF_SHAPE(d.rows), optional);
  }
};

}  // namespace nf::ops
