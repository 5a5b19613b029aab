// The CUDA addon's ops beyond bind_ops.cpp's layer ops, with the CPU addon's names and option fields
// (native/napi/bind_attention.cpp, bind_optim.cpp, bind_loss.cpp) and device buffers in place of
// typed arrays: attentionDecode (generation with a key/value cache), sgdStep, sumSquares and scale
// (SGD and gradient clipping), mse (the masked autoencoder's loss). Kept apart from bind_ops.cpp so
// they can be folded into the op schema (native/ops) with the others.
#include <cmath>
#include <string>

#include "../attention_decode.h"
#include "../grad_norm.h"
#include "../mse.h"
#include "../sgd.h"
#include "../../napi/registry.h"
#include "device_args.h"

namespace nf::napi {
namespace {

Job attention_decode(DeviceArgs& a) {
  cuda::AttentionDecodeDims d;
  d.B = a.dim("B"), d.D = a.dim("D"), d.H = a.dim("H");
  if (d.D % d.H != 0) a.fail("D (" + std::to_string(d.D) + ") must be divisible by H (" + std::to_string(d.H) + ")");
  const bool self = a.buf_length<float>("cache") >= 0;
  if (self == (a.buf_length<float>("kv") >= 0))
    a.fail("expected exactly one of cache (self-attention) and kv (cross-attention)");
  float* cache = nullptr;
  const float* kv = nullptr;
  const uint8_t* key_padding = nullptr;
  if (self) {
    d.max_t = a.dim("maxT"), d.t = a.dim("t", 0, d.max_t - 1);
    cache = a.buf<float>("cache", a.count({d.B, d.max_t, 2, d.D}));
  } else {
    d.Tk = a.dim("Tk");
    kv = a.buf<float>("kv", a.count({d.B, d.Tk, 2, d.D}));
    key_padding = a.buf_opt<uint8_t>("keyPaddingMask", a.count({d.B, d.Tk}));
  }
  float* out = a.buf<float>("out", a.count({d.B, d.D}));
  const float* x = a.buf<float>("x", a.count({d.B, d.D}));
  const float* Wqkv = a.buf<float>("qkvWeight", a.count({3, d.D, d.D}));
  const float* bqkv = a.buf_opt<float>("qkvBias", a.count({3, d.D}));
  const float* Wproj = a.buf<float>("projWeight", a.count({d.D, d.D}));
  const float* bproj = a.buf_opt<float>("projBias", d.D);
  return [=] { return cuda::attention_decode(out, cache, kv, x, key_padding, Wqkv, bqkv, Wproj, bproj, d); };
}

Job sgd_step(DeviceArgs& a) {
  const int64_t n = a.dim("n", 0);
  cuda::SgdParams p;
  p.step = a.dim("step", 1);
  p.lr = a.number("lr", p.lr, 0.0);
  p.momentum = a.number("momentum", p.momentum, 0.0);
  p.dampening = a.number("dampening", p.dampening);
  p.weight_decay = a.number("weightDecay", p.weight_decay, 0.0);
  p.nesterov = a.flag("nesterov", p.nesterov);
  if (p.nesterov && (p.momentum == 0 || p.dampening != 0)) a.fail("nesterov requires a momentum > 0 and a dampening of 0");
  float* param = a.buf<float>("param", n);
  const float* grad = a.buf<float>("grad", n);
  float* buf = p.momentum != 0 ? a.buf<float>("momentumBuf", n) : a.buf_opt<float>("momentumBuf", n);
  return [=] { return cuda::sgd_step(param, buf, grad, n, p); };
}

Job sum_squares(DeviceArgs& a) {
  const int64_t n = a.dim("n", 0);
  float* out = a.buf<float>("out", 1);
  const float* x = a.buf<float>("x", n);
  return [=] { return cuda::sum_squares(out, x, n); };
}

Job scale(DeviceArgs& a) {
  const int64_t n = a.dim("n", 0);
  const double s = a.number("s", std::nan(""));
  if (std::isnan(s)) a.fail("expected a number for s but received nothing");
  float* x = a.buf<float>("x", n);
  return [=] { return cuda::scale(x, n, float(s)); };
}

Job mse(DeviceArgs& a) {
  cuda::MseDims d;
  d.rows = a.dim("rows", 0);
  d.cols = a.dim("cols");
  d.grad_scale = a.number("gradScale", 1.0);
  const int64_t n = a.count({d.rows, d.cols});
  float* loss = a.buf<float>("loss", 1);
  float* dpred = a.buf_opt<float>("dpred", n);
  const float* pred = a.buf<float>("pred", n);
  const float* target = a.buf<float>("target", n);
  const uint8_t* mask = a.buf_opt<uint8_t>("mask", d.rows);
  return [=] { return cuda::mse(loss, dpred, pred, target, mask, d); };
}

}  // namespace

NF_REGISTER_OPS(cuda_extra_ops) {
  const std::pair<const char*, DeviceParser> ops[] = {
      {"attentionDecode", attention_decode}, {"sgdStep", sgd_step}, {"sumSquares", sum_squares},
      {"scale", scale},                      {"mse", mse},
  };
  for (const auto& [name, parse] : ops) register_device_op(env, exports, name, parse);
}

}  // namespace nf::napi
