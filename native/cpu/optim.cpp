// Optimizer steps and gradient-norm reductions on flat float buffers.
// AdamW (torch.optim.AdamW, decoupled weight decay), element by element in torch's order, with
// the scalars formed in double and rounded to float once, as torch does:
//   p *= 1 − lr·wd
//   m = lerp(m, g, w), w = 1 − β1: fma(w, g − m, m) for w < 0.5, else fma(w − 1, g − m, g)
//   v = v·β2;  v = v + ((1 − β2)·g)·g
//   denom = sqrt(v) / sqrt(1 − β2^t) + eps;  p = p + (−lr / (1 − β1^t))·m / denom
//   over a list of tensors in one parallel_for (adamw_multi_step; adamwStep is a list of one), and
//   under precision 'bf16' the new p rounded to bf16 into the weight's copy in the same pass.
// SGD (torch.optim.SGD): d = fma(p, wd, g); buf = d at step 1, else buf = fma(d, 1 − dampening,
//   buf·momentum); d = fma(buf, momentum, d) (nesterov) or buf; p = fma(d, −lr, p).
// sum_squares: Σ x², float vector sums flushed into double every 1024 elements, fixed chunks of
//   16K elements summed in order (independent of the thread count). clip_grad_norm composes it
//   with scale, like torch.nn.utils.clip_grad_norm_.
// Layout: every buffer is n contiguous floats. Dimension key: n = elements of one parameter tensor.
#include "optim.h"

#include <algorithm>
#include <vector>

#include "../core/allocator.h"
#include "../core/threadpool.h"
#include "isa.h"

namespace nf::cpu::NF_ISA_NS {
#include "simd.h"

namespace {

constexpr int64_t kGrain = 1 << 14;  // elements: the smallest piece of an elementwise loop worth a thread
constexpr int64_t kChunk = 1 << 14;  // elements per partial sum of sum_squares
constexpr int64_t kBlock = 1024;     // float vector sums are flushed into a double every kBlock elements

// Calls body(i, len) on the blocks [i, i + len) of W elements covering [0, n) (the last may be
// shorter), threaded.
template <class F>
void for_blocks(int64_t n, F&& body) {
  parallel_for((n + W - 1) / W, kGrain / W, [&](int64_t b0, int64_t b1) {
    for (int64_t b = b0; b < b1; ++b) body(b * W, static_cast<int>(std::min<int64_t>(W, n - b * W)));
  });
}

int64_t chunk_count(int64_t n) { return (n + kChunk - 1) / kChunk; }

double sum_squares_serial(const float* x, int64_t n) {
  double total = 0;
  for (int64_t b = 0; b < n; b += kBlock) {
    vf s = vzero();
    for (int64_t i = b; i < std::min(n, b + kBlock); i += W) {
      vf v = vload_w(x + i, static_cast<int>(std::min<int64_t>(W, n - i)));
      s = vfma(v, v, s);
    }
    total += vsum(s);
  }
  return total;
}

}  // namespace

void adamw_multi_step(const AdamWList& list, const AdamWParams& p) {
  const double t = static_cast<double>(p.step);
  const double bc1 = 1 - std::pow(p.beta1, t), bc2 = 1 - std::pow(p.beta2, t);
  const float w = static_cast<float>(1 - p.beta1);
  const bool small = w < 0.5f;  // torch's lerp picks its formula by the weight
  const vf coeff = vset1(small ? w : w - 1.0f);
  const vf decay = vset1(static_cast<float>(1 - p.lr * p.weight_decay));
  const vf b2 = vset1(static_cast<float>(p.beta2)), a2 = vset1(static_cast<float>(1 - p.beta2));
  const vf bc2_sqrt = vset1(static_cast<float>(std::sqrt(bc2))), eps = vset1(static_cast<float>(p.eps));
  const vf neg_step = vset1(static_cast<float>(-(p.lr / bc1)));
  // Entry e's blocks of W elements are [first[e], first[e + 1]) of one range that a single parallel_for
  // covers (a list of many small tensors then wakes the pool once, not once per tensor).
  std::vector<int64_t> first(list.count + 1, 0);
  for (int64_t e = 0; e < list.count; ++e) first[e + 1] = first[e] + (list.sizes[e] + W - 1) / W;
  parallel_for(first[list.count], kGrain / W, [&](int64_t b0, int64_t b1) {
    int64_t e = std::upper_bound(first.begin(), first.end(), b0) - first.begin() - 1;
    for (int64_t b = b0; b < b1; ++b) {
      while (b >= first[e + 1]) ++e;  // (skips empty entries)
      const int64_t i = (b - first[e]) * W;
      const int len = static_cast<int>(std::min<int64_t>(W, list.sizes[e] - i));
      float *param = list.param[e] + i, *exp_avg = list.exp_avg[e] + i, *exp_avg_sq = list.exp_avg_sq[e] + i;
      const vf g = vload_w(list.grad[e] + i, len);
      vf x = vmul(vload_w(param, len), decay);
      vf m = vload_w(exp_avg, len);
      m = vfma(coeff, vsub(g, m), small ? m : g);
      vf v = vmul(vload_w(exp_avg_sq, len), b2);
      v = vadd(v, vmul(vmul(a2, g), g));
      const vf denom = vadd(vdiv(vsqrt(v), bc2_sqrt), eps);
      x = vadd(x, vdiv(vmul(neg_step, m), denom));
      vstore_w(param, x, len);
      vstore_w(exp_avg, m, len);
      vstore_w(exp_avg_sq, v, len);
      if (list.copy && list.copy[e]) vstore_bf16_w(list.copy[e] + i, x, len);
    }
  });
}

void sgd_step(float* param, float* momentum_buf, const float* grad, int64_t n, const SgdParams& p) {
  const bool first = p.step == 1, has_momentum = p.momentum != 0;
  const vf wd = vset1(static_cast<float>(p.weight_decay)), mom = vset1(static_cast<float>(p.momentum));
  const vf damp = vset1(static_cast<float>(1 - p.dampening)), neg_lr = vset1(static_cast<float>(-p.lr));
  for_blocks(n, [&](int64_t i, int len) {
    vf x = vload_w(param + i, len);
    vf d = vload_w(grad + i, len);
    if (p.weight_decay != 0) d = vfma(x, wd, d);
    if (has_momentum) {
      vf buf = first ? d : vfma(d, damp, vmul(vload_w(momentum_buf + i, len), mom));
      vstore_w(momentum_buf + i, buf, len);
      d = p.nesterov ? vfma(buf, mom, d) : buf;
    }
    vstore_w(param + i, vfma(d, neg_lr, x), len);
  });
}

void sum_squares(double* out, const float* x, int64_t n) {
  const int64_t nchunks = chunk_count(n);
  double* partial = static_cast<double*>(thread_scratch(ScratchSlot::layer, sizeof(double) * nchunks));
  parallel_for(nchunks, [&](int64_t c0, int64_t c1) {
    for (int64_t c = c0; c < c1; ++c) partial[c] = sum_squares_serial(x + c * kChunk, std::min(kChunk, n - c * kChunk));
  });
  double total = 0;
  for (int64_t c = 0; c < nchunks; ++c) total += partial[c];
  *out = total;
}

void scale(float* x, int64_t n, float s) {
  const vf vs = vset1(s);
  for_blocks(n, [&](int64_t i, int len) { vstore_w(x + i, vmul(vload_w(x + i, len), vs), len); });
}

}  // namespace nf::cpu::NF_ISA_NS

#ifdef NF_ISA_PRIMARY
namespace nf::cpu {

Status run(const ops::AdamWStep<float>& p) {
  const AdamWParams h = ops::with_step_values(p.h);
  NF_TRY(ops::adamw_check("adamw_step", p.n, h));
  float* param = p.param;
  float* exp_avg = p.exp_avg;
  float* exp_avg_sq = p.exp_avg_sq;
  const float* grad = p.grad;
  NF_DISPATCH(adamw_multi_step, AdamWList{1, &p.n, &param, &exp_avg, &exp_avg_sq, &grad, nullptr}, h);
  return Status::Ok();
}

namespace {

// adamw_multi_step over an op's lists, with the copies `copy` (bf16 bits) where given.
template <class T>
Status adamw_multi(const ops::AdamWMultiStep<T>& p, uint16_t* const* copy) {
  const AdamWParams h = ops::with_step_values(p.h);
  for (size_t i = 0; i < p.sizes.size(); ++i) NF_TRY(ops::adamw_check("adamw_step", p.sizes[i], h));
  NF_DISPATCH(adamw_multi_step, AdamWList{static_cast<int64_t>(p.sizes.size()), p.sizes.data(), p.param.data(),
                                          p.exp_avg.data(), p.exp_avg_sq.data(), p.grad.data(), copy}, h);
  return Status::Ok();
}

}  // namespace

Status run(const ops::AdamWMultiStep<float>& p) {
  NF_TRY(adamw_multi(p, nullptr));
  for (size_t i = 0; i < p.sizes.size(); ++i)
    if (p.copy[i]) std::copy(p.param[i], p.param[i] + p.sizes[i], p.copy[i]);
  return Status::Ok();
}

Status run(const ops::AdamWMultiStep<ops::bf16>& p) {
  std::vector<uint16_t*> copy(p.copy.size());
  for (size_t i = 0; i < copy.size(); ++i) copy[i] = reinterpret_cast<uint16_t*>(p.copy[i]);
  return adamw_multi(p, copy.data());
}

Status run(const ops::SgdStep<float>& p) {
  NF_TRY(ops::sgd_check("sgd_step", p.n, p.h, p.momentum_buf));
  NF_DISPATCH(sgd_step, p.param, p.momentum_buf, p.grad, p.n, p.h);
  return Status::Ok();
}

// Σ x² in double, through the active variant. Its scratch is allocated here so a failure is a
// Status (at least one double: thread_scratch returns null for 0 bytes on a slot never used before).
static Status dispatch_sum_squares(double* out, const float* x, int64_t n, const char* op) {
  NF_CHECK(n >= 0, op, "n must be non-negative");
  NF_CHECK(thread_scratch(ScratchSlot::layer, sizeof(double) * std::max<int64_t>(1, NF_ISA_NS::chunk_count(n))), op,
           "out of memory for the partial sums");
  NF_DISPATCH(sum_squares, out, x, n);
  return Status::Ok();
}

Status run(const ops::SumSquares<float>& p) {
  double s;
  NF_TRY(dispatch_sum_squares(&s, p.x, p.n, "sum_squares"));
  *p.out = static_cast<float>(s);
  return Status::Ok();
}

Status run(const ops::Scale<float>& p) {
  NF_CHECK(p.n >= 0, "scale", "n must be non-negative");
  NF_DISPATCH(scale, p.x, p.n, static_cast<float>(p.s));
  return Status::Ok();
}

Status run(const ops::ClipGradNorm<float>& p) {
  NF_CHECK(p.max_norm >= 0 && std::isfinite(p.max_norm), "clip_grad_norm", "max_norm must be finite and non-negative");
  double s;
  NF_TRY(dispatch_sum_squares(&s, p.grad, p.n, "clip_grad_norm"));
  const double total = std::sqrt(s), coef = ops::clip_coefficient(p.max_norm, total);
  if (!(coef >= 1)) NF_DISPATCH(scale, p.grad, p.n, static_cast<float>(coef));  // a NaN norm scales by NaN, as torch
  *p.total_norm = static_cast<float>(total);
  return Status::Ok();
}

Status run(const ops::ClipCoefficient<float>& p) {
  NF_CHECK(p.max_norm >= 0 && std::isfinite(p.max_norm), "clip_coefficient", "max_norm must be finite and non-negative");
  double s = 0.0;
  for (int64_t i = 0; i < p.n; ++i) s += static_cast<double>(p.sums[i]);
  const double total = std::sqrt(s);
  *p.coef = ops::clip_coefficient(p.max_norm, total);
  *p.total_norm = static_cast<float>(total);
  return Status::Ok();
}

Status run(const ops::ClipScale<float>& p) {
  NF_CHECK(p.n >= 0, "clip_scale", "n must be non-negative");
  if (!(*p.coef >= 1)) NF_DISPATCH(scale, p.x, p.n, static_cast<float>(*p.coef));  // a NaN norm scales by NaN, as torch
  return Status::Ok();
}

}  // namespace nf::cpu
#endif
#include "isa_end.h"
