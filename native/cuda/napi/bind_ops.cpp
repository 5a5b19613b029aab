// The CUDA addon's layer ops: the CPU addon's op names and option fields (native/napi/bind_*.cpp,
// lib/native/*.ts), with device buffers (device_args.h) in place of typed arrays, running the
// kernels of native/cuda on the backend's stream. float32 only (no float64 reference twins here).
#include <string>

#include "../attention.h"
#include "../elementwise.h"
#include "../embedding.h"
#include "../feedforward.h"
#include "../layernorm.h"
#include "../linear.h"
#include "../loss.h"
#include "../optim.h"
#include "../patch_embed.h"
#include "../../napi/registry.h"
#include "device_args.h"

namespace nf::napi {
namespace {

constexpr int64_t kMaxSafeInteger = (int64_t(1) << 53) - 1;

cuda::Act activation(DeviceArgs& a, const char* name, const char* def) {
  const std::string act = a.text(name, def);
  if (act == "none") return cuda::Act::none;
  if (act == "relu") return cuda::Act::relu;
  if (act == "gelu") return cuda::Act::gelu;
  if (act == "gelu_tanh") return cuda::Act::gelu_tanh;
  a.fail(std::string("expected 'none', 'relu', 'gelu' or 'gelu_tanh' for ") + name + " but received '" + act + "'");
}

uint64_t seed_arg(DeviceArgs& a, const char* name) {
  return static_cast<uint64_t>(a.integer(name, 0, 0, kMaxSafeInteger));
}

// ---- Linear ----------------------------------------------------------------------------------
Job linear_forward(DeviceArgs& a) {
  const cuda::LinearDims d{a.dim("rows", 0), a.dim("inFeatures"), a.dim("outFeatures")};
  const cuda::Act act = activation(a, "act", "none");
  float* y = a.buf<float>("y", a.count({d.rows, d.out}));
  float* preact = a.buf_opt<float>("preact", a.count({d.rows, d.out}));
  const float* x = a.buf<float>("x", a.count({d.rows, d.in}));
  const float* W = a.buf<float>("W", a.count({d.out, d.in}));
  const float* b = a.buf_opt<float>("b", d.out);
  return [=] { return cuda::linear_forward(y, preact, x, W, b, d, act); };
}

Job linear_backward(DeviceArgs& a) {
  const cuda::LinearDims d{a.dim("rows", 0), a.dim("inFeatures"), a.dim("outFeatures")};
  float* dx = a.buf_opt<float>("dx", a.count({d.rows, d.in}));
  float* dW = a.buf<float>("dW", a.count({d.out, d.in}));
  float* db = a.buf_opt<float>("db", d.out);
  const float* dy = a.buf<float>("dy", a.count({d.rows, d.out}));
  const float* x = a.buf<float>("x", a.count({d.rows, d.in}));
  const float* W = a.buf<float>("W", a.count({d.out, d.in}));
  return [=] { return cuda::linear_backward(dx, dW, db, dy, x, W, d); };
}

// ---- LayerNorm -------------------------------------------------------------------------------
Job layernorm_forward(DeviceArgs& a) {
  const cuda::LayerNormDims d{a.dim("rows", 0), a.dim("D"), float(a.number("eps", 1e-5, 1e-30, 1.0))};
  const int64_t n = a.count({d.rows, d.D});
  float* out = a.buf<float>("out", n);
  float* mean = a.buf<float>("mean", d.rows);
  float* rstd = a.buf<float>("rstd", d.rows);
  const float* x = a.buf<float>("x", n);
  const float* residual = a.buf_opt<float>("residual", n);
  float* sum = residual ? a.buf<float>("sum", n) : nullptr;
  const float* gamma = a.buf<float>("gamma", d.D);
  const float* beta = a.buf<float>("beta", d.D);
  return [=] { return cuda::layernorm_forward(out, sum, mean, rstd, x, residual, gamma, beta, d); };
}

Job layernorm_backward(DeviceArgs& a) {
  const cuda::LayerNormDims d{a.dim("rows", 0), a.dim("D"), 1e-5f};
  const int64_t n = a.count({d.rows, d.D});
  float* dx = a.buf<float>("dx", n);
  float* dgamma = a.buf<float>("dgamma", d.D);
  float* dbeta = a.buf<float>("dbeta", d.D);
  const float* dout = a.buf<float>("dout", n);
  const float* dadd = a.buf_opt<float>("dadd", n);
  const float* x = a.buf<float>("x", n);
  const float* mean = a.buf<float>("mean", d.rows);
  const float* rstd = a.buf<float>("rstd", d.rows);
  const float* gamma = a.buf<float>("gamma", d.D);
  return [=] { return cuda::layernorm_backward(dx, dgamma, dbeta, dout, dadd, x, mean, rstd, gamma, d); };
}

// ---- Attention (the layer: projections + core) -----------------------------------------------
struct AttentionCommon {
  cuda::AttentionDims d;
  cuda::AttentionMasks m;
  const float* memory = nullptr;
  int64_t q, k, qkv, kv, lse, wqkv, wproj;  // element counts
};

AttentionCommon attention_common(DeviceArgs& a) {
  AttentionCommon c;
  cuda::AttentionDims& d = c.d;
  d.B = a.dim("B"), d.Tq = a.dim("Tq"), d.Tk = a.integer("Tk", d.Tq, 1, int64_t(1) << 40);
  d.D = a.dim("D"), d.H = a.dim("H");
  if (d.D % d.H != 0) a.fail("D (" + std::to_string(d.D) + ") must be divisible by H (" + std::to_string(d.H) + ")");
  c.memory = a.buf_opt<float>("memory", a.count({d.B, d.Tk, d.D}));
  if (!c.memory && d.Tk != d.Tq) a.fail("self-attention (no memory) needs Tk == Tq");
  c.m.causal = a.flag("causal", false);
  c.m.key_padding = a.buf_opt<uint8_t>("keyPaddingMask", a.count({d.B, d.Tk}));
  c.m.attn_batched = d.B > 1 && a.buf_length<uint8_t>("attnMask") == a.count({d.B, d.Tq, d.Tk});
  c.m.attn = a.buf_opt<uint8_t>("attnMask", c.m.attn_batched ? a.count({d.B, d.Tq, d.Tk}) : a.count({d.Tq, d.Tk}));
  const double p = a.number("dropoutP", 0.0, 0.0, 1.0);
  if (p >= 1.0) a.fail("expected dropoutP in [0, 1) but received 1");
  d.dropout.p = float(p);
  d.dropout.seed = seed_arg(a, "seed");
  d.dropout.offset = seed_arg(a, "offset");
  c.q = a.count({d.B, d.Tq, d.D}), c.k = a.count({d.B, d.Tk, d.D}), c.qkv = a.count({3, d.B, d.Tq, d.D});
  c.kv = a.count({2, d.B, d.Tk, d.D}), c.lse = a.count({d.B, d.H, d.Tq});
  c.wqkv = a.count({3, d.D, d.D}), c.wproj = a.count({d.D, d.D});
  return c;
}

Job attention_forward(DeviceArgs& a) {
  const AttentionCommon c = attention_common(a);
  float* out = a.buf<float>("out", c.q);
  float* weights = a.buf_opt<float>("weights", a.count({c.d.B, c.d.H, c.d.Tq, c.d.Tk}));
  float* qkv = c.memory ? nullptr : a.buf<float>("qkv", c.qkv);
  float* q = c.memory ? a.buf<float>("q", c.q) : nullptr;
  float* kv = c.memory ? a.buf<float>("kv", c.kv) : nullptr;
  float* ctx = a.buf<float>("ctx", c.q);
  float* lse = a.buf<float>("lse", c.lse);
  const float* x = a.buf<float>("x", c.q);
  const float* Wqkv = a.buf<float>("qkvWeight", c.wqkv);
  const float* bqkv = a.buf_opt<float>("qkvBias", a.count({3, c.d.D}));
  const float* Wproj = a.buf<float>("projWeight", c.wproj);
  const float* bproj = a.buf_opt<float>("projBias", c.d.D);
  return [=] {
    return cuda::attention_forward(out, weights, qkv, q, kv, ctx, lse, x, c.memory, c.m, Wqkv, bqkv, Wproj, bproj,
                                   c.d);
  };
}

Job attention_backward(DeviceArgs& a) {
  const AttentionCommon c = attention_common(a);
  float* dx = a.buf<float>("dx", c.q);
  float* dmemory = a.buf_opt<float>("dMemory", c.k);
  if (dmemory && !c.memory) a.fail("dMemory is only for cross-attention (with memory)");
  float* dWqkv = a.buf<float>("dQkvWeight", c.wqkv);
  float* dbqkv = a.buf_opt<float>("dQkvBias", a.count({3, c.d.D}));
  float* dWproj = a.buf<float>("dProjWeight", c.wproj);
  float* dbproj = a.buf_opt<float>("dProjBias", c.d.D);
  const float* dout = a.buf<float>("dout", c.q);
  const float* qkv = c.memory ? nullptr : a.buf<float>("qkv", c.qkv);
  const float* q = c.memory ? a.buf<float>("q", c.q) : nullptr;
  const float* kv = c.memory ? a.buf<float>("kv", c.kv) : nullptr;
  const float* ctx = a.buf<float>("ctx", c.q);
  const float* lse = a.buf<float>("lse", c.lse);
  const float* x = a.buf<float>("x", c.q);
  const float* Wqkv = a.buf<float>("qkvWeight", c.wqkv);
  const float* Wproj = a.buf<float>("projWeight", c.wproj);
  return [=] {
    return cuda::attention_backward(dx, dmemory, dWqkv, dbqkv, dWproj, dbproj, dout, qkv, q, kv, ctx, lse, x,
                                    c.memory, c.m, Wqkv, Wproj, c.d);
  };
}

// ---- Feed-forward ----------------------------------------------------------------------------
cuda::FeedForwardDims feedforward_dims(DeviceArgs& a) {
  cuda::FeedForwardDims d;
  d.rows = a.dim("rows", 0), d.D = a.dim("D"), d.F = a.dim("F");
  d.activation = activation(a, "activation", "gelu");
  if (d.activation == cuda::Act::none) a.fail("expected 'gelu', 'gelu_tanh' or 'relu' for activation");
  const double p = a.number("dropout", 0.0, 0.0, 1.0);
  if (p >= 1.0) a.fail("expected dropout in [0, 1) but received 1");
  d.dropout = float(p), d.seed = seed_arg(a, "seed"), d.offset = seed_arg(a, "offset");
  return d;
}

Job feedforward_forward(DeviceArgs& a) {
  const cuda::FeedForwardDims d = feedforward_dims(a);
  const int64_t nx = a.count({d.rows, d.D}), nh = a.count({d.rows, d.F}), nw = a.count({d.F, d.D});
  float* y = a.buf<float>("y", nx);
  float* h = a.buf_opt<float>("h", nh);
  float* act = a.buf<float>("a", nh);
  const float* x = a.buf<float>("x", nx);
  const float* W1 = a.buf<float>("W1", nw);
  const float* b1 = a.buf<float>("b1", d.F);
  const float* W2 = a.buf<float>("W2", nw);
  const float* b2 = a.buf<float>("b2", d.D);
  return [=] { return cuda::feedforward_forward(y, h, act, x, W1, b1, W2, b2, d); };
}

Job feedforward_backward(DeviceArgs& a) {
  const cuda::FeedForwardDims d = feedforward_dims(a);
  const int64_t nx = a.count({d.rows, d.D}), nh = a.count({d.rows, d.F}), nw = a.count({d.F, d.D});
  float* dx = a.buf<float>("dx", nx);
  float* dW1 = a.buf<float>("dW1", nw);
  float* db1 = a.buf<float>("db1", d.F);
  float* dW2 = a.buf<float>("dW2", nw);
  float* db2 = a.buf<float>("db2", d.D);
  const float* dy = a.buf<float>("dy", nx);
  const float* x = a.buf<float>("x", nx);
  const float* h = a.buf<float>("h", nh);
  const float* act = a.buf<float>("a", nh);
  const float* W1 = a.buf<float>("W1", nw);
  const float* W2 = a.buf<float>("W2", nw);
  return [=] { return cuda::feedforward_backward(dx, dW1, db1, dW2, db2, dy, x, h, act, W1, W2, d); };
}

// ---- Patch embedding -------------------------------------------------------------------------
cuda::PatchEmbedDims patch_dims(DeviceArgs& a) {
  cuda::PatchEmbedDims d;
  d.B = a.dim("B", 0), d.C = a.dim("C"), d.H = a.dim("H"), d.W = a.dim("W"), d.P = a.dim("P"), d.D = a.dim("D");
  if (d.H % d.P != 0 || d.W % d.P != 0) a.fail("H and W must be multiples of P");
  return d;
}

Job patch_embed_forward(DeviceArgs& a) {
  const cuda::PatchEmbedDims d = patch_dims(a);
  float* out = a.buf<float>("out", a.count({d.B, d.H / d.P, d.W / d.P, d.D}));
  const float* images = a.buf<float>("images", a.count({d.B, d.C, d.H, d.W}));
  const float* weight = a.buf<float>("weight", a.count({d.D, d.C, d.P, d.P}));
  const float* bias = a.buf<float>("bias", d.D);
  return [=] { return cuda::patch_embed_forward(out, images, weight, bias, d); };
}

Job patch_embed_backward(DeviceArgs& a) {
  const cuda::PatchEmbedDims d = patch_dims(a);
  float* dimages = a.buf_opt<float>("dimages", a.count({d.B, d.C, d.H, d.W}));
  float* dweight = a.buf<float>("dweight", a.count({d.D, d.C, d.P, d.P}));
  float* dbias = a.buf<float>("dbias", d.D);
  const float* dout = a.buf<float>("dout", a.count({d.B, d.H / d.P, d.W / d.P, d.D}));
  const float* images = a.buf<float>("images", a.count({d.B, d.C, d.H, d.W}));
  const float* weight = a.buf<float>("weight", a.count({d.D, d.C, d.P, d.P}));
  return [=] { return cuda::patch_embed_backward(dimages, dweight, dbias, dout, images, weight, d); };
}

// ---- Embeddings ------------------------------------------------------------------------------
struct EmbeddingArgs {
  cuda::EmbeddingDims d;
  int64_t max_len;
};

EmbeddingArgs embedding_args(DeviceArgs& a) {
  EmbeddingArgs e;
  e.d.B = a.dim("B", 0), e.d.T = a.dim("T", 0), e.d.V = a.dim("V", 1, INT32_MAX), e.d.D = a.dim("D");
  e.d.scale = float(a.number("scale", 1.0));
  e.max_len = a.integer("maxLen", e.d.T, e.d.T, int64_t(1) << 40);
  return e;
}

Job embedding_forward(DeviceArgs& a) {
  const EmbeddingArgs e = embedding_args(a);
  const cuda::EmbeddingDims& d = e.d;
  const int32_t* ids = a.buf<int32_t>("ids", a.count({d.B, d.T}));
  float* out = a.buf<float>("out", a.count({d.B, d.T, d.D}));
  const float* table = a.buf<float>("table", a.count({d.V, d.D}));
  const float* pos = a.buf_opt<float>("pos", a.count({e.max_len, d.D}));
  return [=] { return cuda::embedding_forward(out, ids, table, pos, d); };
}

Job embedding_backward(DeviceArgs& a) {
  const EmbeddingArgs e = embedding_args(a);
  const cuda::EmbeddingDims& d = e.d;
  const int32_t* ids = a.buf<int32_t>("ids", a.count({d.B, d.T}));
  float* dtable = a.buf<float>("dtable", a.count({d.V, d.D}));
  float* dpos = a.buf_opt<float>("dpos", a.count({e.max_len, d.D}));
  const float* dout = a.buf<float>("dout", a.count({d.B, d.T, d.D}));
  return [=] { return cuda::embedding_backward(dtable, dpos, dout, ids, d); };
}

Job cls_pos_forward(DeviceArgs& a) {
  const int64_t B = a.dim("B", 0), N = a.dim("N", 0), D = a.dim("D");
  float* out = a.buf<float>("out", a.count({B, N + 1, D}));
  const float* cls = a.buf<float>("cls", D);
  const float* patches = a.buf<float>("patches", a.count({B, N, D}));
  const float* pos = a.buf<float>("pos", a.count({N + 1, D}));
  return [=] { return cuda::cls_pos_forward(out, cls, patches, pos, B, N, D); };
}

Job cls_pos_backward(DeviceArgs& a) {
  const int64_t B = a.dim("B", 0), N = a.dim("N", 0), D = a.dim("D");
  float* dcls = a.buf<float>("dcls", D);
  float* dpatches = a.buf<float>("dpatches", a.count({B, N, D}));
  float* dpos = a.buf<float>("dpos", a.count({N + 1, D}));
  const float* dout = a.buf<float>("dout", a.count({B, N + 1, D}));
  return [=] { return cuda::cls_pos_backward(dcls, dpatches, dpos, dout, B, N, D); };
}

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
      {"linearForward", linear_forward},       {"linearBackward", linear_backward},
      {"layernormForward", layernorm_forward}, {"layernormBackward", layernorm_backward},
      {"attentionForward", attention_forward}, {"attentionBackward", attention_backward},
      {"feedforwardForward", feedforward_forward}, {"feedforwardBackward", feedforward_backward},
      {"patchEmbedForward", patch_embed_forward}, {"patchEmbedBackward", patch_embed_backward},
      {"embeddingForward", embedding_forward}, {"embeddingBackward", embedding_backward},
      {"clsPosForward", cls_pos_forward},     {"clsPosBackward", cls_pos_backward},
      {"add", add},                           {"accumulate", accumulate},
      {"dropoutForward", dropout<true>},      {"dropoutBackward", dropout<false>},
      {"copyRows", copy_rows},                {"crossEntropy", cross_entropy},
      {"adamwStep", adamw_step},
  };
  for (const auto& [name, parse] : ops) register_device_op(env, exports, name, parse);
}

}  // namespace nf::napi
