// Binding for the losses: crossEntropy / mse. Float32Array arguments run the ISA-dispatched
// kernels; Float64Array arguments run the float64 reference twin.
#include <type_traits>

#include "../cpu/loss.h"
#include "../cpu/ref/loss.h"
#include "args.h"
#include "registry.h"

namespace nf::napi {
namespace {

template <class T>
Job cross_entropy(Args& a) {
  cpu::CrossEntropyDims d;
  d.N = a.dim("N", 0);
  d.V = a.dim("V", 1, INT32_MAX);
  d.label_smoothing = a.number("labelSmoothing", 0.0, 0.0, 1.0);
  d.ignore_index = static_cast<int32_t>(a.integer("ignoreIndex", -100, INT32_MIN, INT32_MAX));
  d.grad_scale = a.number("gradScale", 1.0);
  const int64_t n = a.count({d.N, d.V});
  T* loss = a.floats<T>("loss", 1);
  T* dlogits = a.floats_opt<T>("dlogits", n);
  const T* logits = a.floats<T>("logits", n);
  const int32_t* targets = a.ints("targets", d.N);
  // Checked here, before any work, so a bad target is an invalid argument naming its row.
  const Status valid = cpu::cross_entropy_check_targets(targets, d);
  if (!valid.ok()) a.fail(valid.message);
  return [=]() -> Status {
    if constexpr (std::is_same_v<T, double>) {
      ref::cross_entropy(loss, dlogits, logits, targets, d.N, d.V, d.label_smoothing, d.ignore_index, d.grad_scale);
      return Status::Ok();
    } else {
      return cpu::cross_entropy(loss, dlogits, logits, targets, d);
    }
  };
}

template <class T>
Job mse(Args& a) {
  cpu::MseDims d;
  d.rows = a.dim("rows", 0);
  d.cols = a.dim("cols");
  d.grad_scale = a.number("gradScale", 1.0);
  const int64_t n = a.count({d.rows, d.cols});
  T* loss = a.floats<T>("loss", 1);
  T* dpred = a.floats_opt<T>("dpred", n);
  const T* pred = a.floats<T>("pred", n);
  const T* target = a.floats<T>("target", n);
  const uint8_t* mask = a.bools_opt("mask", d.rows);
  return [=]() -> Status {
    if constexpr (std::is_same_v<T, double>) {
      ref::mse(loss, dpred, pred, target, mask, d.rows, d.cols, d.grad_scale);
      return Status::Ok();
    } else {
      return cpu::mse(loss, dpred, pred, target, mask, d);
    }
  };
}

Job parse_cross_entropy(Args& a) { return a.is_f64("logits") ? cross_entropy<double>(a) : cross_entropy<float>(a); }
Job parse_mse(Args& a) { return a.is_f64("pred") ? mse<double>(a) : mse<float>(a); }

}  // namespace

NF_REGISTER_OPS(loss) {
  register_op(env, exports, "crossEntropy", parse_cross_entropy);
  register_op(env, exports, "mse", parse_mse);
}

}  // namespace nf::napi
