// Softmax, log-softmax, argmax and top-k along the last axis of [rows, cols] logits.
// Math (row x of n = cols values): m = max x, S = Σ_c e^(x_c − m);
//   softmax_c = e^(x_c − m) / S;  log_softmax_c = (x_c − m) − log S.
//   Working relative to m keeps logits of ±1e4 finite; a NaN anywhere makes S, and so the row, NaN.
//   argmax / topk: the first value(s) in ops::logit_before's order (larger first, NaN first of all,
//   ties by lower index).
// Layout: x, out [rows, cols] row-major; argmax out [rows]; topk values, indices [rows, k].
// Dimension key: rows = B (or B·beams) sequences, cols = V, the vocabulary; k <= cols.
// Softmax reads each row twice: the max, then e^(x − m) written to out while S is summed (float lanes,
// flushed to double every kBlock values); a third pass scales (softmax) or shifts (log-softmax) out.
// Top-k sorts the row's indices partially (std::partial_sort, O(cols log k)). Rows are split between
// threads; each row is computed the same way whatever the split.
#include "logits.h"

#include <algorithm>
#include <limits>
#include <numeric>
#include <vector>

#include "../core/threadpool.h"
#include "isa.h"

namespace nf::cpu::NF_ISA_NS {
#include "simd.h"

namespace {
constexpr int64_t kBlock = 1024;  // float vector sums are flushed into a double every kBlock values
}  // namespace

float row_max(const float* x, int64_t n) {
  vf vmx = vset1(-std::numeric_limits<float>::infinity());
  int64_t i = 0;
  for (; i + W <= n; i += W) vmx = vmax(vmx, vload(x + i));
  float m = vhmax(vmx);
  for (; i < n; ++i) m = std::max(m, x[i]);
  return m;
}

void softmax_row(float* out, const float* x, int64_t n, bool log) {
  const float m = row_max(x, n);
  const vf vm = vset1(m);
  int64_t i;
  double S = 0;
  for (int64_t b = 0; b < n; b += kBlock) {
    const int64_t end = std::min(n, b + kBlock);
    vf s = vzero();
    for (i = b; i + W <= end; i += W) {
      const vf e = vexp(vsub(vload(x + i), vm));
      s = vadd(s, e);
      vstore(out + i, e);
    }
    float fs = vsum(s);
    for (; i < end; ++i) fs += (out[i] = std::exp(x[i] - m));
    S += fs;
  }
  if (log) {
    const float shift = static_cast<float>(double(m) + std::log(S));
    const vf vs = vset1(shift);
    for (i = 0; i + W <= n; i += W) vstore(out + i, vsub(vload(x + i), vs));
    for (; i < n; ++i) out[i] = x[i] - shift;
  } else {
    const vf inv = vset1(static_cast<float>(1.0 / S));
    for (i = 0; i + W <= n; i += W) vstore(out + i, vmul(vload(out + i), inv));
    for (; i < n; ++i) out[i] *= static_cast<float>(1.0 / S);
  }
}

}  // namespace nf::cpu::NF_ISA_NS

#ifdef NF_ISA_PRIMARY
namespace nf::cpu {

namespace {

// Runs row(r) for every row, threaded (at least ~8K values per chunk).
template <class F>
void each_row(int64_t rows, int64_t cols, F&& row) {
  parallel_for(rows, std::max<int64_t>(1, 8192 / cols), [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r) row(r);
  });
}

Status softmax_rows(const char* op, float* out, const float* x, int64_t rows, int64_t cols, bool log) {
  NF_CHECK(rows >= 0 && cols >= 1, op, "rows must be non-negative and cols positive");
  each_row(rows, cols, [&](int64_t r) { NF_DISPATCH(softmax_row, out + r * cols, x + r * cols, cols, log); });
  return Status::Ok();
}

bool before(const float* x, int32_t i, int32_t j) { return ops::logit_before(x[i], i, x[j], j); }

}  // namespace

Status run(const ops::Softmax<float>& p) { return softmax_rows("softmax", p.out, p.x, p.rows, p.cols, false); }

Status run(const ops::LogSoftmax<float>& p) { return softmax_rows("log_softmax", p.out, p.x, p.rows, p.cols, true); }

Status run(const ops::Argmax<float>& p) {
  NF_CHECK(p.rows >= 0 && p.cols >= 1, "argmax", "rows must be non-negative and cols positive");
  each_row(p.rows, p.cols, [&](int64_t r) {
    const float* x = p.x + r * p.cols;
    int32_t best = 0;
    for (int32_t c = 1; c < int32_t(p.cols); ++c)
      if (before(x, c, best)) best = c;
    p.out[r] = best;
  });
  return Status::Ok();
}

Status run(const ops::Topk<float>& p) {
  NF_CHECK(p.rows >= 0 && p.k >= 1 && p.k <= p.cols, "topk", "k must lie in [1, cols]");
  parallel_for(p.rows, std::max<int64_t>(1, 8192 / p.cols), [&](int64_t r0, int64_t r1) {
    std::vector<int32_t> order(static_cast<size_t>(p.cols));
    for (int64_t r = r0; r < r1; ++r) {
      const float* x = p.x + r * p.cols;
      std::iota(order.begin(), order.end(), 0);
      std::partial_sort(order.begin(), order.begin() + p.k, order.end(),
                        [x](int32_t i, int32_t j) { return before(x, i, j); });
      for (int64_t i = 0; i < p.k; ++i) {
        p.indices[r * p.k + i] = order[size_t(i)];
        p.values[r * p.k + i] = x[order[size_t(i)]];
      }
    }
  });
  return Status::Ok();
}

}  // namespace nf::cpu
#endif
#include "isa_end.h"
