// Parity of the CUDA multi-head attention layer (self and cross, causal / key-padding / attention
// masks, fully blocked rows, dropout, weights output, head widths 6 to 128) with the float64
// reference native/cpu/ref/attention.h, which draws the same Philox dropout mask: a different mask
// could not match. The core is flash_attention_*.cu's tensor-core kernels at every precision: 'fp32'
// (3xTF32 products) at fp32's tolerances, 'bf16' and 'tf32' at their own (Tolerance below). The
// projections run in fp32 here either way (the backend's own GEMM kernel: no cuBLASLt in this test),
// so the errors are the attention core's. And the layer with bf16 storage (AttentionForward<bf16>,
// precision 'bf16': x, memory, the saved qkv / q / kv and ctx, out and the activation gradients bf16,
// the weights bf16 copies; biases, parameter gradients, lse, weights fp32), whose reference reads the
// bf16 inputs' rounded values (bf16_test.cpp's method) at bf16's tolerances.
#include <cmath>
#include <type_traits>

#include "../../cpu/ref/attention.h"
#include "../attention.h"
#include "../flash_attention.h"
#include "bf16_parity.h"

namespace {

using namespace nf::test;

// The test's view of storage T (float or bf16): random inputs as T holds them, read-back as floats.
template <class T>
Vec rand_in(size_t n, double scale = 1.0) {
  if constexpr (std::is_same_v<T, bf16>) return randb(n, scale);
  else return randn(n, scale);
}
std::vector<float> host(const Device<float>& d) { return d.download(); }
std::vector<float> host(const Device<bf16>& d) { return floats(d); }

struct Case {
  int64_t B, Tq, Tk, D, H;
  bool cross = false, causal = false, key_padding_mask = false, attn_mask = false, attn_batched = false;
  float p = 0.0f;
  bool weights = false;
  int64_t blocked_row = -1;  // a query row the attention mask blocks entirely
};

// ‖Δ‖/‖ref‖ bounds of the forward outputs (out, ctx, lse, weights) and of the gradients.
// bf16 operands carry 8 significant bits (unit roundoff u = 2^-8 = 3.9e-3): Q, K, V, P and dO, dS
// each rounded once, errors that add in quadrature over the products, give ~u forward and a few u
// through the backward's chain (dS = P ∘ (dP − Di) cancels): 1e-2 and 3e-2, issue 23's bounds.
// tf32 keeps 11 bits (u = 2^-11 = 4.9e-4): the same argument at u/8 gives 2e-3 and 5e-3.
struct Tolerance {
  double fwd, bwd;
};
Tolerance tolerance(nf::ops::Precision p) {
  switch (p) {
    case nf::ops::Precision::bf16: return {1e-2, 3e-2};
    case nf::ops::Precision::tf32: return {2e-3, 5e-3};
    default: return {kFwdTol, kBwdTol};
  }
}

std::vector<uint8_t> random_mask(size_t n, double rate) {
  std::vector<uint8_t> m(n);
  std::bernoulli_distribution bit(rate);
  for (auto& v : m) v = bit(rng());
  return m;
}

// lse rows that are -inf must be -inf on both sides; they are then left out of the error.
void check_lse(const std::string& label, const std::string& name, std::vector<float> got, Vec ref, double tol) {
  for (size_t i = 0; i < ref.size(); ++i)
    if (std::isinf(ref[i])) {
      NF_EXPECT(std::isinf(got[i]) && got[i] < 0, name + ": fully blocked row " + std::to_string(i));
      got[i] = 0, ref[i] = 0;
    }
  check_close(label, name, got, ref, tol);
}

template <class T = float>
void run_case(const Case& c, nf::ops::Precision precision = nf::ops::Precision::fp32) {
  constexpr bool kBf16 = std::is_same_v<T, bf16>;
  const std::string name = dims({{"B", c.B}, {"Tq", c.Tq}, {"Tk", c.Tk}, {"D", c.D}, {"H", c.H}, {"cross", c.cross},
                                 {"causal", c.causal}, {"dropout%", int64_t(c.p * 100)}});
  const Tolerance tol = tolerance(precision);
  // Labels of the error log: "attention out", or "attention bf16 out".
  const std::string tag = kBf16 ? "attention bf16-storage " : precision == nf::ops::Precision::fp32 ? "attention " :
                          std::string("attention ") + (precision == nf::ops::Precision::bf16 ? "bf16 " : "tf32 ");
  const int64_t D = c.D, rq = c.B * c.Tq, rk = c.B * c.Tk;
  const Vec x = rand_in<T>(size_t(rq * D)), memory = c.cross ? rand_in<T>(size_t(rk * D)) : Vec();
  const Vec qkv_weight = rand_in<T>(size_t(3 * D * D), 1.0 / std::sqrt(double(D))), qkv_bias = randn(size_t(3 * D), 0.1);
  const Vec proj_weight = rand_in<T>(size_t(D * D), 1.0 / std::sqrt(double(D))), proj_bias = randn(size_t(D), 0.1);
  const Vec dout = rand_in<T>(size_t(rq * D));
  const std::vector<uint8_t> kp = c.key_padding_mask ? random_mask(size_t(c.B * c.Tk), 0.2) : std::vector<uint8_t>();
  std::vector<uint8_t> am = c.attn_mask ? random_mask(size_t((c.attn_batched ? c.B : 1) * c.Tq * c.Tk), 0.1)
                                   : std::vector<uint8_t>();
  if (c.blocked_row >= 0)
    for (int64_t j = 0; j < c.Tk; ++j) am[size_t(c.blocked_row * c.Tk + j)] = 1;

  // The ops' params for either precision: dims and masks from the case, the buffers given.
  const nf::ops::AttentionDims dims{c.B, c.Tq, c.Tk, D, c.H, {c.p, 1234567, 42}};
  const auto masks = [&c](const uint8_t* kp_ptr, const uint8_t* am_ptr) {
    nf::ops::AttentionMasks m;
    m.causal = c.causal;
    m.key_padding_mask = c.key_padding_mask ? kp_ptr : nullptr;
    m.attn_mask = c.attn_mask ? am_ptr : nullptr;
    m.attn_batched = c.attn_batched;
    return m;
  };
  // Self-attention saves qkv, cross-attention q and kv: the other pointers stay null.
  const auto saved = [&c](auto& p, auto* qkv, auto* q, auto* kv) {
    p.qkv = c.cross ? nullptr : qkv;
    p.q = c.cross ? q : nullptr;
    p.kv = c.cross ? kv : nullptr;
  };
  // Reference forward and backward (parameter gradients accumulate onto 0.5).
  Vec out(size_t(rq * D)), weights(c.weights ? size_t(c.B * c.H * c.Tq * c.Tk) : 0), qkv(c.cross ? 0 : size_t(rq * 3 * D)),
      q(c.cross ? size_t(rq * D) : 0), kv(c.cross ? size_t(rk * 2 * D) : 0), ctx(size_t(rq * D)),
      lse(size_t(c.B * c.H * c.Tq));
  auto ptr = [](Vec& v) { return v.empty() ? nullptr : v.data(); };
  nf::ops::AttentionForward<double> rf;
  rf.d = dims, rf.m = masks(kp.data(), am.data()), rf.memory = c.cross ? memory.data() : nullptr;
  rf.out = out.data(), rf.weights = ptr(weights), rf.ctx = ctx.data(), rf.lse = lse.data();
  saved(rf, ptr(qkv), ptr(q), ptr(kv));
  rf.x = x.data(), rf.qkv_weight = qkv_weight.data(), rf.qkv_bias = qkv_bias.data(), rf.proj_weight = proj_weight.data(), rf.proj_bias = proj_bias.data();
  nf::ref::run(rf);
  Vec dx(size_t(rq * D)), dmem(memory.size()), d_qkv_weight(qkv_weight.size(), 0.5), d_qkv_bias(qkv_bias.size(), 0.5),
      d_proj_weight(proj_weight.size(), 0.5), d_proj_bias(proj_bias.size(), 0.5);
  nf::ops::AttentionBackward<double> rb;
  rb.d = dims, rb.m = rf.m, rb.memory = rf.memory;
  rb.dx = dx.data(), rb.dmemory = ptr(dmem), rb.d_qkv_weight = d_qkv_weight.data(), rb.d_qkv_bias = d_qkv_bias.data();
  rb.d_proj_weight = d_proj_weight.data(), rb.d_proj_bias = d_proj_bias.data(), rb.dout = dout.data();
  saved(rb, rf.qkv, rf.q, rf.kv);
  rb.ctx = ctx.data(), rb.lse = lse.data(), rb.x = x.data(), rb.qkv_weight = qkv_weight.data(), rb.proj_weight = proj_weight.data();
  nf::ref::run(rb);
  // CUDA (activations and weights as T: bf16 from the rounded values, exactly).
  const auto dev = [](const Vec& v) {
    if constexpr (kBf16) return bits(v);
    else return v;
  };
  Device<T> d_x(dev(x)), d_mem(dev(memory)), d_Wqkv(dev(qkv_weight)), d_Wproj(dev(proj_weight)), d_dout(dev(dout)),
      d_out(out.size()), d_qkv(qkv.size()), d_q(q.size()), d_kv(kv.size()), d_ctx(ctx.size());
  DeviceF d_bqkv(qkv_bias), d_bproj(proj_bias), d_weights(weights.size()), d_lse(lse.size());
  Device<uint8_t> d_kp(kp), d_am(am);
  nf::ops::AttentionForward<T> f;
  f.d = dims, f.m = masks(d_kp, d_am), f.memory = c.cross ? d_mem.get() : nullptr, f.precision = precision;
  f.out = d_out, f.weights = c.weights ? d_weights.get() : nullptr, f.ctx = d_ctx, f.lse = d_lse;
  saved(f, d_qkv.get(), d_q.get(), d_kv.get());
  f.x = d_x, f.qkv_weight = d_Wqkv, f.qkv_bias = d_bqkv, f.proj_weight = d_Wproj, f.proj_bias = d_bproj;
  NF_ASSERT_OK(nf::cuda::run(f));
  check_close(tag + "out", name, host(d_out), out, tol.fwd);
  check_close(tag + "ctx", name, host(d_ctx), ctx, tol.fwd);
  check_lse(tag + "lse", name, d_lse.download(), lse, tol.fwd);
  if (c.weights) check_close(tag + "weights", name, d_weights.download(), weights, tol.fwd);
  Device<T> d_dx(dx.size()), d_dmem(dmem.size());
  DeviceF d_dWqkv(std::vector<float>(qkv_weight.size(), 0.5f)),
      d_dbqkv(std::vector<float>(qkv_bias.size(), 0.5f)), d_dWproj(std::vector<float>(proj_weight.size(), 0.5f)),
      d_dbproj(std::vector<float>(proj_bias.size(), 0.5f));
  nf::ops::AttentionBackward<T> bw;
  bw.d = dims, bw.m = f.m, bw.memory = f.memory, bw.precision = precision;
  bw.dx = d_dx, bw.dmemory = c.cross ? d_dmem.get() : nullptr, bw.d_qkv_weight = d_dWqkv, bw.d_qkv_bias = d_dbqkv;
  bw.d_proj_weight = d_dWproj, bw.d_proj_bias = d_dbproj, bw.dout = d_dout;
  saved(bw, f.qkv, f.q, f.kv);
  bw.ctx = d_ctx, bw.lse = d_lse, bw.x = d_x, bw.qkv_weight = d_Wqkv, bw.proj_weight = d_Wproj;
  NF_ASSERT_OK(nf::cuda::run(bw));
  check_close(tag + "dx", name, host(d_dx), dx, tol.bwd);
  if (c.cross) check_close(tag + "dmemory", name, host(d_dmem), dmem, tol.bwd);
  check_close(tag + "d_qkv_weight", name, d_dWqkv.download(), d_qkv_weight, tol.bwd);
  check_close(tag + "d_qkv_bias", name, d_dbqkv.download(), d_qkv_bias, tol.bwd);
  check_close(tag + "d_proj_weight", name, d_dWproj.download(), d_proj_weight, tol.bwd);
  check_close(tag + "d_proj_bias", name, d_dbproj.download(), d_proj_bias, tol.bwd);
}

NF_TEST(cuda_attention_parity) {
  Case cases[] = {
      {2, 7, 7, 24, 4},  // Dh 6
      {1, 65, 65, 96, 4, false, true, false, false, false, 0.1f, true},  // Dh 24, causal, dropout
      {2, 7, 40, 80, 2, true, false, true, true, true, 0.0f, true},      // Dh 40, cross, masks
      {1, 33, 33, 118, 2, false, true, true, true, false, 0.0f, false, 5},  // Dh 59, a fully blocked row
      {1, 40, 40, 256, 2, false, false, false, false, false, 0.2f},      // Dh 128, dropout
      {3, 1, 1, 16, 1},                                                   // T = 1
      {2, 5, 1, 32, 1, true},                                             // Dh 32, one key
  };
  for (const Case& c : cases) run_case(c);
}

// The tensor-core kernels at every precision: every native head width (32, 64, 96, 128), padded
// ones (12, 20, 40; 59, whose unaligned rows take the plain-load path instead of cp.async), every mask
// kind, fully blocked rows, dropout, odd lengths (7, 33, 65, 197), cross-attention with Tk != Tq.
const std::vector<Case>& tensor_core_cases() {
  static const std::vector<Case> cases = {
      {1, 197, 197, 64, 1},                                                  // Dh 64, T 197
      {2, 65, 65, 256, 2, false, true, false, false, false, 0.1f},          // Dh 128, causal, dropout
      {1, 7, 7, 192, 2, false, false, true, true},                          // Dh 96, key padding, shared mask
      {2, 7, 40, 64, 2, true, false, true, true, true, 0.0f, true},         // Dh 32, cross, batched mask, weights
      {1, 33, 33, 40, 2, false, true, true, true, false, 0.0f, false, 5},   // Dh 20, causal + masks, a blocked row
      {1, 65, 65, 80, 2, false, false, false, false, false, 0.2f, true},    // Dh 40, dropout, weights
      {1, 33, 33, 118, 2, false, true, true, false},                        // Dh 59 (plain loads), causal, padding
      {2, 65, 130, 24, 2, true, false, true},                               // Dh 12, cross, Tk 130
      {1, 197, 197, 128, 1, false, true, true},                             // Dh 128, T 197, causal, padding
  };
  return cases;
}
NF_TEST(cuda_attention_tensor_core_parity) {
  for (nf::ops::Precision p : {nf::ops::Precision::bf16, nf::ops::Precision::tf32, nf::ops::Precision::fp32})
    for (const Case& c : tensor_core_cases()) run_case(c, p);
}

// The layer with bf16 storage (precision 'bf16'): self- and cross-attention, causal, key padding and
// attention masks, a fully blocked row, dropout, the weights output; head widths 12, 20, 64 (and 32,
// 96, 128: cp.async of 8 bf16 a chunk where Dh is a multiple of 8, plain loads for 12 and 20; at 96 a
// row is 12 chunks, so 8 of the 128 threads idle in the copies); odd T.
const std::vector<Case>& bf16_storage_cases() {
  static const std::vector<Case> cases = {
      {2, 7, 7, 24, 2},                                                      // Dh 12, T 7
      {1, 197, 197, 64, 1, false, false, true},                              // Dh 64, T 197, key padding
      {2, 65, 65, 40, 2, false, true, false, false, false, 0.1f, true},      // Dh 20, causal, dropout, weights
      {2, 7, 40, 64, 2, true, false, true, true, true, 0.0f, true},          // Dh 32, cross, masks, weights
      {1, 65, 130, 128, 2, true, true, true},                                // Dh 64, cross, Tk 130, causal, padding
      {1, 33, 33, 40, 2, false, true, true, true, false, 0.0f, false, 5},    // Dh 20, a fully blocked row
      {1, 65, 65, 256, 2, false, false, false, false, false, 0.2f},          // Dh 128, dropout
      {1, 33, 33, 192, 2, false, true, true},                                // Dh 96, causal, key padding
  };
  return cases;
}
NF_TEST(cuda_attention_bf16_storage_parity) {
  for (const Case& c : bf16_storage_cases()) run_case<bf16>(c, nf::ops::Precision::bf16);
}

// dQ by FlashAttention-2's atomic adds from the dK/dV kernel (NF_CUDA_ATTENTION_DQ=atomic) instead of
// the recompute pass: the suites above again, at every precision and at bf16 storage (their cases with
// attention dropout, and fp32 storage with tf32 operands at head width 128, keep the recompute pass).
// How the backward forms dQ for the scope's life; the process's choice again after it, also when an
// assertion throws.
struct DqScope {
  nf::cuda::AttentionDq before = nf::cuda::AttentionDq::recompute;
  explicit DqScope(nf::cuda::AttentionDq mode) {
    (void)nf::cuda::attention_dq(&before);  // (a bad NF_CUDA_ATTENTION_DQ: back to the default after)
    nf::cuda::set_attention_dq(mode);
  }
  ~DqScope() { nf::cuda::set_attention_dq(before); }
};

NF_TEST(cuda_attention_atomic_dq_parity) {
  const DqScope atomic(nf::cuda::AttentionDq::atomic);
  for (nf::ops::Precision p : {nf::ops::Precision::bf16, nf::ops::Precision::tf32, nf::ops::Precision::fp32})
    for (const Case& c : tensor_core_cases()) run_case(c, p);
  for (const Case& c : bf16_storage_cases()) run_case<bf16>(c, nf::ops::Precision::bf16);
}

// The attention core on views the layer never makes: Q, K and V side by side in rows an odd number of
// floats apart (no 16-byte rows: the tiles come by plain loads, not cp.async), O and dO in rows of
// D + 1 floats, so every other output row is not 8-byte aligned and takes single-column stores
// (store_rows), the gradients dQ, dK, dV in the rows of Q, K, V. 'bf16' and 'tf32' against 'fp32'
// (the same kernels with 3xTF32 products, checked against float64 by the suites above) on the same views, without and with causality (the band
// masking of mask_tile, the idle warps), and the column past each row's heads left as it was: no
// store reaches past a head. Both ways of forming dQ (flash_attention.h: the recompute pass, atomic adds).
NF_TEST(cuda_attention_core_strided_views) {
  const int64_t B = 2, H = 2, T = 37, Dh = 20, D = H * Dh, rs = 3 * D + 1, os = D + 1;
  const float kGap = 7.0f;  // every buffer's initial value; the gap columns must keep it
  nf::ops::AttentionCoreDims d;
  d.B = B, d.H = H, d.Tq = d.Tk = T, d.Dh = Dh, d.scale = 1.0f / std::sqrt(float(Dh));
  d.q = d.k = d.v = {T * rs, rs, Dh};
  d.o = {T * os, os, Dh};
  const Vec x = randn(size_t(B * T * rs)), dout = randn(size_t(B * T * os));
  DeviceF d_x(x), d_dout(dout);
  const float* q = d_x.get();
  const float* k = q + D;
  const float* v = q + 2 * D;
  // The elements of heads (b, t, h, 0..Dh-1) of a [B, T, row] buffer at column offset `at`; and the rest.
  const auto heads = [&](const std::vector<float>& a, int64_t row, int64_t at, bool inside) {
    std::vector<float> out;
    for (int64_t r = 0; r < B * T; ++r)
      for (int64_t c = 0; c < row; ++c)
        if ((c >= at && c < at + D) == inside) out.push_back(a[size_t(r * row + c)]);
    return out;
  };
  for (const auto dq : {nf::cuda::AttentionDq::recompute, nf::cuda::AttentionDq::atomic}) {
    for (bool causal : {false, true}) {
      const DqScope scope(dq);
      nf::ops::AttentionMasks masks;
      masks.causal = causal;
      const auto run = [&](nf::ops::Precision p, std::vector<float>* o, std::vector<float>* grads) {
        DeviceF d_o(std::vector<float>(size_t(B * T * os), kGap)), d_lse(size_t(B * H * T));
        DeviceF d_g(std::vector<float>(size_t(B * T * rs), kGap));  // dQ | dK | dV in Q, K, V's rows
        NF_ASSERT_OK(nf::cuda::attention_core_forward(d_o, d_lse, nullptr, q, k, v, masks, d, p));
        NF_ASSERT_OK(nf::cuda::attention_core_backward(d_g, d_g.get() + D, d_g.get() + 2 * D, d_dout, q, k, v, d_o,
                                                       d_lse, masks, d, p));
        *o = d_o.download(), *grads = d_g.download();
      };
      std::vector<float> o32, g32;
      run(nf::ops::Precision::fp32, &o32, &g32);
      const auto as_ref = [](const std::vector<float>& a) { return Vec(a.begin(), a.end()); };
      for (nf::ops::Precision p : {nf::ops::Precision::bf16, nf::ops::Precision::tf32}) {
        const std::string name = std::string(p == nf::ops::Precision::bf16 ? "bf16" : "tf32") + (causal ? " causal" : "") +
                                 (dq == nf::cuda::AttentionDq::atomic ? " atomic dQ" : "");
        std::vector<float> o, g;
        run(p, &o, &g);
        check_close("attention strided o", name, heads(o, os, 0, true), as_ref(heads(o32, os, 0, true)), tolerance(p).fwd);
        for (int64_t at : {int64_t(0), D, 2 * D})
          check_close("attention strided dq|dk|dv", name + " at column " + std::to_string(at), heads(g, rs, at, true),
                      as_ref(heads(g32, rs, at, true)), tolerance(p).bwd);
        for (const float gap : heads(o, os, 0, false)) NF_EXPECT(gap == kGap, name + ": a store past O's heads");
        for (int64_t r = 0; r < B * T; ++r)
          NF_EXPECT(g[size_t(r * rs + 3 * D)] == kGap, name + ": a store past the gradients' heads");
      }
    }
  }
}

NF_TEST(cuda_attention_bad_dims) {
  float buf = 0;
  nf::ops::AttentionForward<float> f;
  f.d = {1, 4, 4, 258, 2, {}};  // Dh 129
  f.out = f.qkv = f.ctx = f.lse = &buf, f.x = f.qkv_weight = f.proj_weight = &buf;
  nf::Status st = nf::cuda::run(f);
  NF_EXPECT(!st.ok() && st.message.find("head widths") != std::string::npos, st.message);
  f.d = {1, 4, 5, 8, 2, {}};
  st = nf::cuda::run(f);
  NF_EXPECT(!st.ok() && st.message.find("Tk == Tq") != std::string::npos, st.message);
  nf::ops::AttentionBackward<float> b;
  b.d = {1, 4, 4, 9, 2, {}};
  b.dx = b.d_qkv_weight = b.d_proj_weight = &buf, b.dout = b.qkv = b.ctx = b.lse = b.x = b.qkv_weight = b.proj_weight = &buf;
  st = nf::cuda::run(b);
  NF_EXPECT(!st.ok() && st.message.find("divisible") != std::string::npos, st.message);
}

}  // namespace
