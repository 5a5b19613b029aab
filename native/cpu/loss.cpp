// Losses with fused gradients: softmax cross-entropy and (masked) mean squared error.
// Cross-entropy, per row x = logits[i] of V values with target t (PyTorch's F.cross_entropy):
//   m = max x, S = Σ_c e^(x_c − m), lse = m + log S, −log p_c = lse − x_c;
//   loss_i = (1−ε)(lse − x_t) + ε (lse − mean_c x_c);  loss = Σ_i loss_i / (non-ignored rows);
//   dlogits_i = k (p − ε/V − (1−ε) onehot(t)), k = grad_scale / (non-ignored rows); 0 on ignored rows.
//   Each row is read three times while it is in cache: max; e^(x − m) (kept in dlogits), S and
//   Σ(x − m); then p and the gradient. Working relative to m keeps logits of ±1e4 finite.
// MSE over selected rows (mask null or mask[r] != 0), n = selected rows · cols:
//   loss = Σ (pred − target)² / n;  dpred = grad_scale · 2 (pred − target) / n, 0 on other rows.
// Layout: logits, dlogits [N, V]; targets [N]; pred, target, dpred [rows, cols]; mask [rows].
// Dimension key: N = rows = B*T (or batch), V = classes, cols = values per row.
// Threads split rows in fixed chunks; each chunk's loss sum is kept (double) in scratch slot `layer` and
// the chunks are added in order, so the result does not depend on the thread count.
#include "loss.h"
#include "logits.h"

#include <algorithm>
#include <cstring>
#include <limits>
#include <string>

#include "../core/allocator.h"
#include "../core/threadpool.h"
#include "isa.h"

namespace nf::cpu::NF_ISA_NS {
#include "simd.h"

namespace {

constexpr int64_t kBlock = 1024;  // float vector sums are flushed into doubles every kBlock elements

// Rows per chunk: about 8K values, so narrow rows are batched. Depends only on the width.
int64_t rows_per_chunk(int64_t width) { return std::max<int64_t>(1, 8192 / width); }
int64_t chunk_count(int64_t rows, int64_t width) {
  return (rows + rows_per_chunk(width) - 1) / rows_per_chunk(width);
}

// Runs row(r) for every row, threaded, and returns Σ_r row(r) summed per chunk in double, in order.
template <class F>
double sum_rows(int64_t rows, int64_t width, F&& row) {
  const int64_t rpc = rows_per_chunk(width), nchunks = chunk_count(rows, width);
  double* partial = static_cast<double*>(thread_scratch(ScratchSlot::layer, sizeof(double) * nchunks));
  parallel_for(nchunks, [&](int64_t c0, int64_t c1) {
    for (int64_t c = c0; c < c1; ++c) {
      double s = 0;
      for (int64_t r = c * rpc; r < std::min(rows, (c + 1) * rpc); ++r) s += row(r);
      partial[c] = s;
    }
  });
  double total = 0;
  for (int64_t c = 0; c < nchunks; ++c) total += partial[c];
  return total;
}

// One row of cross-entropy: returns loss_i; writes k · (its gradient) to drow when drow is given.
double cross_entropy_row(float* drow, const float* x, int64_t V, int32_t t, double eps, double k) {
  // Pass 1: the row maximum.
  const float m = NF_ISA_NS::row_max(x, V);
  int64_t i;
  // Pass 2: S = Σ e^(x − m) and D = Σ (x − m), e^(x − m) kept in drow.
  const vf vm = vset1(m);
  double S = 0, D = 0;
  for (int64_t b = 0; b < V; b += kBlock) {
    const int64_t end = std::min(V, b + kBlock);
    vf s = vzero(), dsum = vzero();
    for (i = b; i + W <= end; i += W) {
      vf d = vsub(vload(x + i), vm), e = vexp(d);
      s = vadd(s, e);
      dsum = vadd(dsum, d);
      if (drow) vstore(drow + i, e);
    }
    float fs = vsum(s), fd = vsum(dsum);
    for (; i < end; ++i) {
      float d = x[i] - m, e = std::exp(d);
      fs += e;
      fd += d;
      if (drow) drow[i] = e;
    }
    S += fs;
    D += fd;
  }
  const double lse = std::log(S);  // log-sum-exp minus m
  // ε multiplies a NaN when the row holds one, even for ε = 0, so a NaN logit is never hidden.
  const double loss = (1 - eps) * (lse - (double(x[t]) - m)) + eps * (lse - D / double(V));
  if (drow) {
    // Pass 3: dlogits = k (e/S − ε/V), then the target's own term in double.
    const double et = drow[t];
    const float a = static_cast<float>(k / S), c = static_cast<float>(-k * eps / double(V));
    const vf va = vset1(a), vc = vset1(c);
    for (i = 0; i + W <= V; i += W) vstore(drow + i, vfma(vload(drow + i), va, vc));
    for (; i < V; ++i) drow[i] = std::fma(drow[i], a, c);
    drow[t] = static_cast<float>(k * (et / S - eps / double(V) - (1 - eps)));
  }
  return loss;
}

// One row of squared error: returns Σ (p − t)²; writes g2 (p − t) to drow when drow is given.
double mse_row(float* drow, const float* p, const float* t, int64_t cols, float g2) {
  const vf vg = vset1(g2);
  double sum = 0;
  for (int64_t b = 0; b < cols; b += kBlock) {
    const int64_t end = std::min(cols, b + kBlock);
    vf s = vzero();
    int64_t i = b;
    for (; i + W <= end; i += W) {
      vf d = vsub(vload(p + i), vload(t + i));
      s = vfma(d, d, s);
      if (drow) vstore(drow + i, vmul(d, vg));
    }
    float fs = vsum(s);
    for (; i < end; ++i) {
      float d = p[i] - t[i];
      fs += d * d;
      if (drow) drow[i] = d * g2;
    }
    sum += fs;
  }
  return sum;
}

}  // namespace

void cross_entropy(float* loss, float* dlogits, const float* logits, const int32_t* targets,
                   const CrossEntropyDims& d) {
  const int64_t V = d.V;
  int64_t count = 0;
  for (int64_t r = 0; r < d.N; ++r) count += targets[r] != d.ignore_index;
  const double k = count ? d.grad_scale / double(count) : 0.0;
  const double total = sum_rows(d.N, V, [&](int64_t r) {
    float* drow = dlogits ? dlogits + r * V : nullptr;
    if (targets[r] == d.ignore_index) {
      if (drow) std::memset(drow, 0, sizeof(float) * V);
      return 0.0;
    }
    return cross_entropy_row(drow, logits + r * V, V, targets[r], d.label_smoothing, k);
  });
  *loss = count ? static_cast<float>(total / double(count)) : std::numeric_limits<float>::quiet_NaN();
}

void mse(float* loss, float* dpred, const float* pred, const float* target, const uint8_t* mask,
         const MseDims& d) {
  const int64_t cols = d.cols;
  int64_t selected = d.rows;
  if (mask) selected = std::count_if(mask, mask + d.rows, [](uint8_t m) { return m != 0; });
  const double n = double(selected) * double(cols);
  const float g2 = selected ? static_cast<float>(2.0 * d.grad_scale / n) : 0.0f;
  const double total = sum_rows(d.rows, cols, [&](int64_t r) {
    float* drow = dpred ? dpred + r * cols : nullptr;
    if (mask && !mask[r]) {
      if (drow) std::memset(drow, 0, sizeof(float) * cols);
      return 0.0;
    }
    return mse_row(drow, pred + r * cols, target + r * cols, cols, g2);
  });
  *loss = selected ? static_cast<float>(total / n) : std::numeric_limits<float>::quiet_NaN();
}

}  // namespace nf::cpu::NF_ISA_NS

#ifdef NF_ISA_PRIMARY
namespace nf::cpu {

// The scratch sum_rows uses for its per-chunk sums, allocated here so a failure is a Status (at
// least one double: thread_scratch returns null for 0 bytes on a slot never used before).
static bool scratch_for_chunks(int64_t rows, int64_t width) {
  return thread_scratch(ScratchSlot::layer, sizeof(double) * std::max<int64_t>(1, NF_ISA_NS::chunk_count(rows, width))) != nullptr;
}

Status run(const ops::CrossEntropy<float>& p) {
  const char* op = "cross_entropy";
  const CrossEntropyDims& d = p.d;
  NF_TRY(ops::cross_entropy_check(op, d));
  NF_TRY(cross_entropy_check_targets(p.targets, d));
  NF_CHECK(scratch_for_chunks(d.N, d.V), op, "out of memory for the per-chunk loss sums");
  NF_DISPATCH(cross_entropy, p.loss, p.dlogits, p.logits, p.targets, d);
  return Status::Ok();
}

Status run(const ops::Mse<float>& p) {
  const char* op = "mse";
  NF_TRY(ops::mse_check(op, p.d));
  NF_CHECK(scratch_for_chunks(p.d.rows, p.d.cols), op, "out of memory for the per-chunk loss sums");
  NF_DISPATCH(mse, p.loss, p.dpred, p.pred, p.target, p.mask, p.d);
  return Status::Ok();
}

}  // namespace nf::cpu
#endif
#include "isa_end.h"
