// The CUDA addon's ops: every op of the op table (native/ops/ops.h) that has a CUDA kernel
// (native/cuda/ops.h: a `run(const ops::X<float>&)` overload), under the CPU addon's name and
// fields (the same schema, read by the same reader, native/napi/op_reader.h) with device buffers in
// place of typed arrays. float32 only (the float64 reference twins are the CPU addon's).
// Also exports opSchema(): the JSON of the ops registered here (what supports(op, 'cuda') reads).
#include <string>
#include <type_traits>
#include <utility>

#include "../attention.h"
#include "../elementwise.h"
#include "../embedding.h"
#include "../feedforward.h"
#include "../linear.h"
#include "../loss.h"
#include "../ops.h"
#include "../optim.h"
#include "../patch_embed.h"
#include "../../napi/op_reader.h"
#include "../../napi/registry.h"
#include "../../ops/ops.h"
#include "../../ops/recorder.h"
#include "device_args.h"

namespace nf::napi {
namespace {

// The CUDA addon's step from a name to a pointer: a device buffer of exactly `len` elements of E
// (at least, when at_least).
struct DeviceSource {
  static constexpr bool host_memory = false;  // the kernels check values (ids, targets) on the device
  DeviceArgs& a;
  template <class E>
  E* pointer(const char* name, int64_t len, bool optional, bool at_least) {
    using V = std::remove_const_t<E>;
    static_assert(sizeof(V) == 4 || sizeof(V) == 1, "device buffers hold float32, int32 or bool");
    if (at_least && a.buf_length<V>(name) > len) len = a.buf_length<V>(name);
    return optional ? a.buf_opt<V>(name, len) : a.buf<V>(name, len);
  }
  template <class E>
  int64_t array_length(const char* name) {
    return a.buf_length<E>(name);
  }
};

// Whether the CUDA backend has a kernel for params type P.
template <class P, class = void>
struct has_cuda : std::false_type {};
template <class P>
struct has_cuda<P, std::void_t<decltype(cuda::run(std::declval<const P&>()))>> : std::true_type {};

template <template <class> class Op>
Job parse_device(DeviceArgs& a) {
  Op<float> p;
  OpReader<float, DeviceSource> r(a, DeviceSource{a});
  Op<float>::fields(r, p);
  return [p] { return cuda::run(p); };
}

struct RegisterDevice {
  Napi::Env env;
  Napi::Object exports;
  std::string* schema;
  template <template <class> class Op>
  void operator()() {
    if constexpr (has_cuda<Op<float>>::value) {
      register_device_op(env, exports, Op<float>::name, parse_device<Op>);
      *schema += (schema->size() > 1 ? ", " : "") + ops::record_op<Op>();
    }
  }
};

}  // namespace

NF_REGISTER_OPS(cuda_schema_ops) {
  std::string schema = "[";
  ops::AllOps::each(RegisterDevice{env, exports, &schema});
  schema += "]";
  exports.Set("opSchema", Napi::Function::New(
                              env, [schema](const Napi::CallbackInfo& info) { return Napi::String::New(info.Env(), schema); },
                              "opSchema"));
}

// ---- Ops not yet in the op table -------------------------------------------------------------
namespace {

constexpr int64_t kMaxSafeInteger = (int64_t(1) << 53) - 1;


// ---- Elementwise -----------------------------------------------------------------------------
Job add(DeviceArgs& a) {
  const int64_t n = a.dim("n", 0);
  float* out = a.buf<float>("out", n);
  const float* x = a.buf<float>("a", n);
  const float* y = a.buf<float>("b", n);
  return [=] { return cuda::add(out, x, y, n); };
}

Job accumulate(DeviceArgs& a) {
  const int64_t n = a.dim("n", 0);
  float* y = a.buf<float>("y", n);
  const float* x = a.buf<float>("x", n);
  return [=] { return cuda::add(y, y, x, n); };
}

// dropoutForward {out, x} and dropoutBackward {dx, dout} apply the same map.
template <bool kForward>
Job dropout(DeviceArgs& a) {
  const int64_t n = a.dim("n", 0);
  const double p = a.number("p", 0.0, 0.0, 1.0);
  if (!(float(p) < 1.0f)) a.fail("expected a number in [0, 1) for p but received " + std::to_string(p));
  const uint64_t seed = uint64_t(a.dim("seed", 0, kMaxSafeInteger)), offset = uint64_t(a.dim("offset", 0, kMaxSafeInteger));
  float* out = a.buf<float>(kForward ? "out" : "dx", n);
  const float* x = a.buf<float>(kForward ? "x" : "dout", n);
  return [=] { return cuda::dropout(out, x, n, float(p), seed, offset); };
}

// copyRows: dst[dstOffset + r*dstStride + c] = src[srcOffset + r*srcStride + c], r < rows, c < cols.
Job copy_rows(DeviceArgs& a) {
  const int64_t rows = a.dim("rows", 0), cols = a.dim("cols", 0);
  const int64_t dst_stride = a.dim("dstStride", 0), src_stride = a.dim("srcStride", 0);
  const int64_t dst_offset = a.integer("dstOffset", 0, 0, int64_t(1) << 40);
  const int64_t src_offset = a.integer("srcOffset", 0, 0, int64_t(1) << 40);
  if (dst_stride < cols || src_stride < cols) a.fail("dstStride and srcStride must be at least cols");
  const int64_t dst_len = a.buf_length<float>("dst"), src_len = a.buf_length<float>("src");
  const auto extent = [&](int64_t offset, int64_t stride) { return rows == 0 ? 0 : offset + (rows - 1) * stride + cols; };
  if (dst_len < extent(dst_offset, dst_stride)) a.fail("dst is too small for rows, cols, dstStride and dstOffset");
  if (src_len < extent(src_offset, src_stride)) a.fail("src is too small for rows, cols, srcStride and srcOffset");
  float* dst = a.buf<float>("dst", dst_len) + dst_offset;
  const float* src = a.buf<float>("src", src_len) + src_offset;
  return [=] { return cuda::copy_rows(dst, dst_stride, src, src_stride, rows, cols); };
}

// ---- Loss and optimizer ----------------------------------------------------------------------
Job cross_entropy(DeviceArgs& a) {
  cuda::CrossEntropyDims d;
  d.N = a.dim("N", 0), d.V = a.dim("V", 1, INT32_MAX);
  d.label_smoothing = a.number("labelSmoothing", 0.0, 0.0, 1.0);
  d.ignore_index = int32_t(a.integer("ignoreIndex", -100, INT32_MIN, INT32_MAX));
  d.grad_scale = a.number("gradScale", 1.0);
  const int64_t n = a.count({d.N, d.V});
  float* loss = a.buf<float>("loss", 1);
  float* dlogits = a.buf_opt<float>("dlogits", n);
  const float* logits = a.buf<float>("logits", n);
  const int32_t* targets = a.buf<int32_t>("targets", d.N);
  return [=] { return cuda::cross_entropy(loss, dlogits, logits, targets, d); };
}

Job adamw_step(DeviceArgs& a) {
  const int64_t n = a.dim("n", 0);
  cuda::AdamWParams p;
  p.step = a.dim("step", 1);
  p.lr = a.number("lr", p.lr, 0.0);
  p.beta1 = a.number("beta1", p.beta1, 0.0, 0.999999999);
  p.beta2 = a.number("beta2", p.beta2, 0.0, 0.999999999);
  p.eps = a.number("eps", p.eps, 0.0);
  p.weight_decay = a.number("weightDecay", p.weight_decay, 0.0);
  float* param = a.buf<float>("param", n);
  const float* grad = a.buf<float>("grad", n);
  float* exp_avg = a.buf<float>("expAvg", n);
  float* exp_avg_sq = a.buf<float>("expAvgSq", n);
  return [=] { return cuda::adamw_step(param, exp_avg, exp_avg_sq, grad, n, p); };
}

}  // namespace

NF_REGISTER_OPS(cuda_ops) {
  const std::pair<const char*, DeviceParser> ops[] = {
      {"add", add},                           {"accumulate", accumulate},
      {"dropoutForward", dropout<true>},      {"dropoutBackward", dropout<false>},
      {"copyRows", copy_rows},                {"crossEntropy", cross_entropy},
      {"adamwStep", adamw_step},
  };
  for (const auto& [name, parse] : ops) register_device_op(env, exports, name, parse);
}

}  // namespace nf::napi
