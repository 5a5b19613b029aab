// Ops on logits along the last axis, for decoding and for users' own heads: softmax, log-softmax,
// argmax and top-k over each row of a [rows, cols] matrix (PyTorch's softmax(dim=-1),
// log_softmax(dim=-1), argmax(dim=-1), topk(k, dim=-1, sorted=True)). Forward only.
//   softmax: out[r, c] = e^(x[r,c] − m_r) / Σ_j e^(x[r,j] − m_r), m_r = max_j x[r, j];
//   logSoftmax: out[r, c] = x[r, c] − m_r − log Σ_j e^(x[r,j] − m_r);
//   argmax: the first index of the row's largest value;
//   topk: the k largest values of the row, in descending order, with their indices.
// The order of argmax and topk (logit_before) is total: larger values first, NaN above every number
// (as PyTorch), equal values (±0 included) by lower index first. A NaN in a row makes that row's
// softmax and logSoftmax NaN.
#pragma once
#include <climits>
#include <cstdint>

#include "schema.h"

namespace nf::ops {

// Whether value a at index i comes before value b at index j in the argmax / topk order (`a != a`:
// a is NaN).
template <class T>
NF_HOST_DEVICE constexpr bool logit_before(T a, int64_t i, T b, int64_t j) {
  const bool na = a != a, nb = b != b;
  if (na || nb) return na && nb ? i < j : na;
  return a > b || (a == b && i < j);
}

// The fields softmax and logSoftmax share: out = f(x) row by row, x/out [rows, cols].
template <class T>
struct RowMap {
  int64_t rows = 0, cols = 0;
  T* out = nullptr;
  const T* x = nullptr;

  template <class R>
  static void fields(R& r, RowMap& p) {
    r.dim(p.rows, "rows", 0);
    r.dim(p.cols, "cols", 1, INT32_MAX);
    r.out(p.out, "out", NF_SHAPE(p.rows, p.cols));
    r.in(p.x, "x", NF_SHAPE(p.rows, p.cols));
  }
};

template <class T>
struct Softmax : RowMap<T> {
  static constexpr const char* name = "softmax";
  static constexpr const char* summary =
      "out = softmax(x) along the last axis: out[r, c] = e^(x[r,c] − max_r) / Σ_j e^(x[r,j] − max_r). x/out "
      "[rows, cols]; a row holding a NaN gives NaN.";
};

template <class T>
struct LogSoftmax : RowMap<T> {
  static constexpr const char* name = "logSoftmax";
  static constexpr const char* summary =
      "out = log_softmax(x) along the last axis: out[r, c] = x[r,c] − max_r − log Σ_j e^(x[r,j] − max_r). x/out "
      "[rows, cols]; −inf logits give −inf, a row holding a NaN gives NaN.";
};

template <class T>
struct Argmax {
  static constexpr const char* name = "argmax";
  static constexpr const char* summary =
      "out[r] = the index of the largest x[r, c] (int32): the first one on ties, the first NaN when the row holds "
      "one (as PyTorch's argmax(dim=-1)). x [rows, cols], out [rows].";
  int64_t rows = 0, cols = 0;
  int32_t* out = nullptr;
  const T* x = nullptr;

  template <class R>
  static void fields(R& r, Argmax& p) {
    r.dim(p.rows, "rows", 0);
    r.dim(p.cols, "cols", 1, INT32_MAX);
    r.out(p.out, "out", NF_SHAPE(p.rows));
    r.in(p.x, "x", NF_SHAPE(p.rows, p.cols));
  }
};

template <class T>
struct Topk {
  static constexpr const char* name = "topk";
  static constexpr const char* summary =
      "The k largest values of each row in descending order (PyTorch's topk(k, dim=-1, sorted=True)): values[r, i] "
      "= x[r, indices[r, i]], indices int32; equal values by lower index first, NaN above every number. "
      "x [rows, cols], values/indices [rows, k], 1 <= k <= cols.";
  int64_t rows = 0, cols = 0, k = 0;
  T* values = nullptr;
  int32_t* indices = nullptr;
  const T* x = nullptr;

  template <class R>
  static void fields(R& r, Topk& p) {
    r.dim(p.rows, "rows", 0);
    r.dim(p.cols, "cols", 1, INT32_MAX);
    r.dim(p.k, "k", 1, p.cols);
    r.out(p.values, "values", NF_SHAPE(p.rows, p.k));
    r.out(p.indices, "indices", NF_SHAPE(p.rows, p.k));
    r.in(p.x, "x", NF_SHAPE(p.rows, p.cols));
  }
};

}  // namespace nf::ops
