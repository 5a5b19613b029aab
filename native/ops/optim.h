// Optimizer steps on flat buffers of n elements (torch.optim.AdamW and torch.optim.SGD, one
// parameter tensor's worth per call) and the reductions gradient clipping is built from
// (torch.nn.utils.clip_grad_norm_).
//   AdamW, in torch's order of operations: param *= 1 − lr·wd; exp_avg = lerp(exp_avg, grad, 1 − β1);
//     exp_avg_sq = β2 exp_avg_sq + (1 − β2) grad²; param −= lr / (1 − β1^t) · exp_avg /
//     (sqrt(exp_avg_sq) / sqrt(1 − β2^t) + eps). The moment buffers start at zero before step 1.
//   SGD: d = grad + wd·param; with momentum, buf = d (step 1) or momentum·buf + (1 − dampening)·d,
//     and d = d + momentum·buf (nesterov) or buf; param −= lr·d.
#pragma once
#include <cmath>
#include <cstdint>
#include <vector>

#include "../core/status.h"
#include "schema.h"
#include "step_values.h"

namespace nf::ops {

// torch.optim.AdamW's hyperparameters (same defaults); step is the 1-based step number t.
struct AdamWParams {
  double lr = 1e-3;
  double beta1 = 0.9;
  double beta2 = 0.999;
  double eps = 1e-8;
  double weight_decay = 1e-2;
  int64_t step = 1;
  int64_t step_at = -1, lr_at = -1;  // step and lr from values.table instead (step_values.h)
  StepValues values{};
};

// h with step and lr taken from the step values (host memory: the CPU kernels).
inline AdamWParams with_step_values(AdamWParams h) {
  h.lr = step_value(h.values, h.lr_at, h.lr);
  h.step = static_cast<int64_t>(step_value(h.values, h.step_at, static_cast<double>(h.step)));
  h.step_at = h.lr_at = -1;
  return h;
}

inline Status adamw_check(const char* op, int64_t n, const AdamWParams& p) {
  NF_CHECK(n >= 0, op, "n must be non-negative");
  NF_CHECK(p.lr >= 0, op, "lr must be non-negative");
  NF_CHECK(p.beta1 >= 0 && p.beta1 < 1 && p.beta2 >= 0 && p.beta2 < 1, op, "betas must lie in [0, 1)");
  NF_CHECK(p.eps >= 0, op, "eps must be non-negative");
  NF_CHECK(p.weight_decay >= 0, op, "weight_decay must be non-negative");
  NF_CHECK(p.step >= 1, op, "step must be at least 1 (it is 1-based)");
  return Status::Ok();
}

// The largest double below 1: a beta's upper bound.
inline const double kBelowOne = std::nextafter(1.0, 0.0);

// AdamW's hyperparameter fields and step values (after the op's dims, before its arrays).
template <class R>
void adamw_fields(R& r, AdamWParams& h) {
  r.dim(h.step, "step", 1);
  r.number(h.lr, "lr", h.lr, 0.0);
  r.number(h.beta1, "beta1", h.beta1, 0.0, kBelowOne);
  r.number(h.beta2, "beta2", h.beta2, 0.0, kBelowOne);
  r.number(h.eps, "eps", h.eps, 0.0);
  r.number(h.weight_decay, "weightDecay", h.weight_decay, 0.0);
  step_value_at(r, h.values, h.step_at, "stepAt");
  step_value_at(r, h.values, h.lr_at, "lrAt");
  step_values_table(r, h.values);
}

template <class T>
struct AdamWStep {
  static constexpr const char* name = "adamwStep";
  static constexpr const char* summary =
      "One torch.optim.AdamW step in place on param, expAvg and expAvgSq (zeros before step 1), in torch's order "
      "of operations. `step` is the 1-based step number t. Defaults as torch: lr 1e-3, beta1 0.9, beta2 0.999, "
      "eps 1e-8, weightDecay 1e-2.";
  int64_t n = 0;
  AdamWParams h;
  T* param = nullptr;
  T* exp_avg = nullptr;
  T* exp_avg_sq = nullptr;
  const T* grad = nullptr;

  template <class R>
  static void fields(R& r, AdamWStep& p) {
    r.dim(p.n, "n", 0);
    adamw_fields(r, p.h);
    r.inout(p.param, "param", NF_SHAPE(p.n));
    r.in(p.grad, "grad", NF_SHAPE(p.n));
    r.inout(p.exp_avg, "expAvg", NF_SHAPE(p.n));
    r.inout(p.exp_avg_sq, "expAvgSq", NF_SHAPE(p.n));
  }
};

// AdamW over a list of tensors (torch's _foreach / fused AdamW over a param group): adamwStep on each
// entry with one step and one set of hyperparameters, and optionally the new parameter's copy in the
// call's activation type T (bf16 for precision 'bf16': the weight copy its products read, written in
// the same pass instead of a cast afterwards; an exact copy for float and double). Parameters,
// gradients and moments are Acc<T> (fp32 masters). The CUDA kernel covers the list in a few
// launches, not one per tensor (native/cuda/optim.cu).
template <class T>
struct AdamWMultiStep {
  static constexpr const char* name = "adamwMultiStep";
  static constexpr const char* summary =
      "adamwStep on every tensor of a list in one call (a parameter group; on CUDA a few launches for the whole "
      "list): entry i of param, grad, expAvg and expAvgSq holds sizes[i] values, every entry takes the same step and "
      "hyperparameters. `copy` (optional, entries may be null): copy[i] = the new param[i] in the call's activation "
      "type, rounded to nearest even for bfloat16 (precision 'bf16': the weight copy its products read).";
  std::vector<int64_t> sizes;
  AdamWParams h;
  std::vector<Acc<T>*> param, exp_avg, exp_avg_sq;
  std::vector<const Acc<T>*> grad;
  std::vector<T*> copy;

  template <class R>
  static void fields(R& r, AdamWMultiStep& p) {
    r.sizes(p.sizes, "sizes");
    adamw_fields(r, p.h);
    r.inout_list(p.param, "param", p.sizes);
    r.in_list(p.grad, "grad", p.sizes);
    r.inout_list(p.exp_avg, "expAvg", p.sizes);
    r.inout_list(p.exp_avg_sq, "expAvgSq", p.sizes);
    r.out_list(p.copy, "copy", p.sizes, optional, doc("per entry: the parameter's copy in the activation type, or null"));
  }
};

// torch.optim.SGD's hyperparameters; step is the 1-based step number (step 1 initialises the
// momentum buffer to the gradient, as torch does when the buffer does not exist yet).
struct SgdParams {
  double lr = 1e-3;
  double momentum = 0.0;
  double dampening = 0.0;
  double weight_decay = 0.0;
  bool nesterov = false;
  int64_t step = 1;
};

inline Status sgd_check(const char* op, int64_t n, const SgdParams& p, const void* momentum_buf) {
  NF_CHECK(n >= 0, op, "n must be non-negative");
  NF_CHECK(p.lr >= 0, op, "lr must be non-negative");
  NF_CHECK(p.momentum >= 0, op, "momentum must be non-negative");
  NF_CHECK(p.weight_decay >= 0, op, "weight_decay must be non-negative");
  NF_CHECK(!p.nesterov || (p.momentum > 0 && p.dampening == 0), op,
           "nesterov momentum requires a momentum and zero dampening");
  NF_CHECK(p.momentum == 0 || momentum_buf, op, "momentum needs a momentum_buf");
  NF_CHECK(p.step >= 1, op, "step must be at least 1 (it is 1-based)");
  return Status::Ok();
}

template <class T>
struct SgdStep {
  static constexpr const char* name = "sgdStep";
  static constexpr const char* summary =
      "One torch.optim.SGD step in place: d = grad + weightDecay·param; with momentum, momentumBuf = d at step 1, "
      "else momentum·momentumBuf + (1 − dampening)·d; d = d + momentum·momentumBuf (nesterov) or momentumBuf; "
      "param −= lr·d. `momentumBuf` is required when momentum ≠ 0. Defaults: lr 1e-3, momentum 0, dampening 0, "
      "weightDecay 0, nesterov false.";
  int64_t n = 0;
  SgdParams h;
  T* param = nullptr;
  T* momentum_buf = nullptr;
  const T* grad = nullptr;

  template <class R>
  static void fields(R& r, SgdStep& p) {
    SgdParams& h = p.h;
    r.dim(p.n, "n", 0);
    r.dim(h.step, "step", 1);
    r.number(h.lr, "lr", h.lr, 0.0);
    r.number(h.momentum, "momentum", h.momentum, 0.0);
    r.number(h.dampening, "dampening", h.dampening);
    r.number(h.weight_decay, "weightDecay", h.weight_decay, 0.0);
    r.flag(h.nesterov, "nesterov", h.nesterov);
    if (h.nesterov && (h.momentum == 0 || h.dampening != 0)) r.fail("nesterov requires a momentum > 0 and a dampening of 0");
    r.inout(p.param, "param", NF_SHAPE(p.n));
    r.in(p.grad, "grad", NF_SHAPE(p.n));
    r.inout(p.momentum_buf, "momentumBuf", NF_SHAPE(p.n), required_if(h.momentum != 0, "momentum ≠ 0"));
  }
};

template <class T>
struct SumSquares {
  static constexpr const char* name = "sumSquares";
  static constexpr const char* summary = "out[0] = Σ x² (accumulated in double); out has length 1.";
  int64_t n = 0;
  T* out = nullptr;
  const T* x = nullptr;

  template <class R>
  static void fields(R& r, SumSquares& p) {
    r.dim(p.n, "n", 0);
    r.out(p.out, "out", Shape("[1]", 1));
    r.in(p.x, "x", NF_SHAPE(p.n));
  }
};

template <class T>
struct Scale {
  static constexpr const char* name = "scale";
  static constexpr const char* summary = "x *= s in place.";
  int64_t n = 0;
  double s = 1.0;
  T* x = nullptr;

  template <class R>
  static void fields(R& r, Scale& p) {
    r.dim(p.n, "n", 0);
    r.required_number(p.s, "s");
    r.inout(p.x, "x", NF_SHAPE(p.n));
  }
};

template <class T>
struct ClipGradNorm {
  static constexpr const char* name = "clipGradNorm";
  static constexpr const char* summary =
      "torch.nn.utils.clip_grad_norm_ on one buffer: total = sqrt(Σ grad²); coef = maxNorm / (total + 1e-6); grad "
      "*= coef when coef < 1 (or NaN); totalNorm[0] = total.";
  int64_t n = 0;
  double max_norm = 0.0;
  T* total_norm = nullptr;
  T* grad = nullptr;

  template <class R>
  static void fields(R& r, ClipGradNorm& p) {
    r.dim(p.n, "n", 0);
    r.required_number(p.max_norm, "maxNorm", 0.0);
    r.out(p.total_norm, "totalNorm", Shape("[1]", 1));
    r.inout(p.grad, "grad", NF_SHAPE(p.n));
  }
};

// torch.nn.utils.clip_grad_norm_'s coefficient from the total norm, for every backend's clip ops
// (the gradients are scaled by it unless it is ≥ 1; a NaN norm gives NaN, which scales, as torch).
NF_HOST_DEVICE inline double clip_coefficient(double max_norm, double total) { return max_norm / (total + 1e-6); }

// clip_grad_norm_ over many gradient tensors without a trip to the host (a CUDA graph's step):
// clipCoefficient turns the tensors' sums of squares into the coefficient, clipScale applies it.
template <class T>
struct ClipCoefficient {
  static constexpr const char* name = "clipCoefficient";
  static constexpr const char* summary =
      "torch.nn.utils.clip_grad_norm_'s coefficient over n gradient tensors from their sums of squares (sums[i] "
      "= Σ g² of tensor i, e.g. by sumSquares): total = sqrt(Σ sums, added in order in double); coef[0] = "
      "maxNorm / (total + 1e-6); totalNorm[0] = total. clipScale then scales each gradient by it.";
  int64_t n = 0;
  double max_norm = 0.0;
  T* total_norm = nullptr;
  double* coef = nullptr;
  const T* sums = nullptr;

  template <class R>
  static void fields(R& r, ClipCoefficient& p) {
    r.dim(p.n, "n", 0);
    r.required_number(p.max_norm, "maxNorm", 0.0);
    r.out(p.total_norm, "totalNorm", Shape("[1]", 1));
    r.out(p.coef, "coef", Shape("[1]", 1));
    r.in(p.sums, "sums", NF_SHAPE(p.n));
  }
};

template <class T>
struct ClipScale {
  static constexpr const char* name = "clipScale";
  static constexpr const char* summary =
      "x *= coef[0] (as float) unless coef[0] ≥ 1 (a NaN coefficient scales by NaN, as torch): "
      "clip_grad_norm_'s scaling with clipCoefficient's coefficient, read where it lives.";
  int64_t n = 0;
  T* x = nullptr;
  const double* coef = nullptr;

  template <class R>
  static void fields(R& r, ClipScale& p) {
    r.dim(p.n, "n", 0);
    r.inout(p.x, "x", NF_SHAPE(p.n));
    r.in(p.coef, "coef", Shape("[1]", 1));
  }
};

}  // namespace nf::ops
