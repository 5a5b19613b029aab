// Parity of the CUDA multi-head attention layer (self and cross, causal / key-padding / attention
// masks, fully blocked rows, dropout, weights output, head widths 6 to 128) with the float64
// reference native/cpu/ref/attention.h, which draws the same Philox dropout mask: a different mask
// could not match.
#include <cmath>

#include "../../cpu/ref/attention.h"
#include "../attention.h"
#include "parity.h"

namespace {

using namespace nf::test;

struct Case {
  int64_t B, Tq, Tk, D, H;
  bool cross = false, causal = false, key_padding = false, attn = false, attn_batched = false;
  float p = 0.0f;
  bool weights = false;
  int64_t blocked_row = -1;  // a query row the attention mask blocks entirely
};

std::vector<uint8_t> random_mask(size_t n, double rate) {
  std::vector<uint8_t> m(n);
  std::bernoulli_distribution bit(rate);
  for (auto& v : m) v = bit(rng());
  return m;
}

// lse rows that are -inf must be -inf on both sides; they are then left out of the error.
void check_lse(const std::string& name, std::vector<float> got, Vec ref) {
  for (size_t i = 0; i < ref.size(); ++i)
    if (std::isinf(ref[i])) {
      NF_EXPECT(std::isinf(got[i]) && got[i] < 0, name + ": fully blocked row " + std::to_string(i));
      got[i] = 0, ref[i] = 0;
    }
  check_close("attention lse", name, got, ref, kFwdTol);
}

void run_case(const Case& c) {
  const std::string name = dims({{"B", c.B}, {"Tq", c.Tq}, {"Tk", c.Tk}, {"D", c.D}, {"H", c.H}, {"cross", c.cross},
                                 {"causal", c.causal}, {"dropout%", int64_t(c.p * 100)}});
  const int64_t D = c.D, rq = c.B * c.Tq, rk = c.B * c.Tk;
  const Vec x = randn(size_t(rq * D)), memory = c.cross ? randn(size_t(rk * D)) : Vec();
  const Vec Wqkv = randn(size_t(3 * D * D), 1.0 / std::sqrt(double(D))), bqkv = randn(size_t(3 * D), 0.1);
  const Vec Wproj = randn(size_t(D * D), 1.0 / std::sqrt(double(D))), bproj = randn(size_t(D), 0.1);
  const Vec dout = randn(size_t(rq * D));
  const std::vector<uint8_t> kp = c.key_padding ? random_mask(size_t(c.B * c.Tk), 0.2) : std::vector<uint8_t>();
  std::vector<uint8_t> am = c.attn ? random_mask(size_t((c.attn_batched ? c.B : 1) * c.Tq * c.Tk), 0.1)
                                   : std::vector<uint8_t>();
  if (c.blocked_row >= 0)
    for (int64_t j = 0; j < c.Tk; ++j) am[size_t(c.blocked_row * c.Tk + j)] = 1;

  nf::ref::AttentionSpec spec;
  spec.B = c.B, spec.Tq = c.Tq, spec.Tk = c.Tk, spec.D = D, spec.H = c.H, spec.causal = c.causal;
  spec.key_padding = c.key_padding ? kp.data() : nullptr;
  spec.attn_mask = c.attn ? am.data() : nullptr;
  spec.attn_batched = c.attn_batched;
  spec.dropout_p = c.p, spec.seed = 1234567, spec.offset = 42;
  // Reference forward and backward (parameter gradients accumulate onto 0.5).
  Vec out(size_t(rq * D)), weights(c.weights ? size_t(c.B * c.H * c.Tq * c.Tk) : 0), qkv(c.cross ? 0 : size_t(rq * 3 * D)),
      q(c.cross ? size_t(rq * D) : 0), kv(c.cross ? size_t(rk * 2 * D) : 0), ctx(size_t(rq * D)),
      lse(size_t(c.B * c.H * c.Tq));
  auto ptr = [](Vec& v) { return v.empty() ? nullptr : v.data(); };
  auto cptr = [](const Vec& v) { return v.empty() ? nullptr : v.data(); };
  nf::ref::attention_forward<double>(out.data(), ptr(weights), ptr(qkv), ptr(q), ptr(kv), ctx.data(), lse.data(),
                                     x.data(), cptr(memory), spec, Wqkv.data(), bqkv.data(), Wproj.data(), bproj.data());
  Vec dx(size_t(rq * D)), dmem(memory.size()), dWqkv(Wqkv.size(), 0.5), dbqkv(bqkv.size(), 0.5),
      dWproj(Wproj.size(), 0.5), dbproj(bproj.size(), 0.5);
  nf::ref::attention_backward<double>(dx.data(), ptr(dmem), dWqkv.data(), dbqkv.data(), dWproj.data(), dbproj.data(),
                                      dout.data(), cptr(qkv), cptr(q), cptr(kv), ctx.data(), lse.data(), x.data(),
                                      cptr(memory), spec, Wqkv.data(), Wproj.data());
  // CUDA.
  DeviceF d_x(x), d_mem(memory), d_Wqkv(Wqkv), d_bqkv(bqkv), d_Wproj(Wproj), d_bproj(bproj), d_dout(dout),
      d_out(out.size()), d_weights(weights.size()), d_qkv(qkv.size()), d_q(q.size()), d_kv(kv.size()),
      d_ctx(ctx.size()), d_lse(lse.size());
  Device<uint8_t> d_kp(kp), d_am(am);
  nf::cuda::AttentionMasks masks;
  masks.causal = c.causal;
  masks.key_padding = c.key_padding ? d_kp.get() : nullptr;
  masks.attn = c.attn ? d_am.get() : nullptr;
  masks.attn_batched = c.attn_batched;
  nf::cuda::AttentionDims d{c.B, c.Tq, c.Tk, D, c.H, {c.p, 1234567, 42}};
  float* none = nullptr;
  NF_ASSERT_OK(nf::cuda::attention_forward(d_out, c.weights ? d_weights.get() : none, c.cross ? none : d_qkv.get(),
                                           c.cross ? d_q.get() : none, c.cross ? d_kv.get() : none, d_ctx, d_lse, d_x,
                                           c.cross ? d_mem.get() : none, masks, d_Wqkv, d_bqkv, d_Wproj, d_bproj, d));
  check_close("attention out", name, d_out.download(), out, kFwdTol);
  check_close("attention ctx", name, d_ctx.download(), ctx, kFwdTol);
  check_lse(name, d_lse.download(), lse);
  if (c.weights) check_close("attention weights", name, d_weights.download(), weights, kFwdTol);
  DeviceF d_dx(dx.size()), d_dmem(dmem.size()), d_dWqkv(std::vector<float>(Wqkv.size(), 0.5f)),
      d_dbqkv(std::vector<float>(bqkv.size(), 0.5f)), d_dWproj(std::vector<float>(Wproj.size(), 0.5f)),
      d_dbproj(std::vector<float>(bproj.size(), 0.5f));
  NF_ASSERT_OK(nf::cuda::attention_backward(d_dx, c.cross ? d_dmem.get() : none, d_dWqkv, d_dbqkv, d_dWproj, d_dbproj,
                                            d_dout, c.cross ? none : d_qkv.get(), c.cross ? d_q.get() : none,
                                            c.cross ? d_kv.get() : none, d_ctx, d_lse, d_x,
                                            c.cross ? d_mem.get() : none, masks, d_Wqkv, d_Wproj, d));
  check_close("attention dx", name, d_dx.download(), dx, kBwdTol);
  if (c.cross) check_close("attention dmemory", name, d_dmem.download(), dmem, kBwdTol);
  check_close("attention dWqkv", name, d_dWqkv.download(), dWqkv, kBwdTol);
  check_close("attention dbqkv", name, d_dbqkv.download(), dbqkv, kBwdTol);
  check_close("attention dWproj", name, d_dWproj.download(), dWproj, kBwdTol);
  check_close("attention dbproj", name, d_dbproj.download(), dbproj, kBwdTol);
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

NF_TEST(cuda_attention_bad_dims) {
  nf::cuda::AttentionMasks m;
  nf::cuda::AttentionDims d{1, 4, 4, 258, 2, {}};  // Dh 129
  float buf = 0;
  nf::Status st = nf::cuda::attention_forward(&buf, nullptr, &buf, nullptr, nullptr, &buf, &buf, &buf, nullptr, m,
                                              &buf, nullptr, &buf, nullptr, d);
  NF_EXPECT(!st.ok() && st.message.find("head widths") != std::string::npos, st.message);
  d = {1, 4, 5, 8, 2, {}};
  st = nf::cuda::attention_forward(&buf, nullptr, &buf, nullptr, nullptr, &buf, &buf, &buf, nullptr, m, &buf,
                                   nullptr, &buf, nullptr, d);
  NF_EXPECT(!st.ok() && st.message.find("Tk == Tq") != std::string::npos, st.message);
  d = {1, 4, 4, 9, 2, {}};
  st = nf::cuda::attention_backward(&buf, nullptr, &buf, nullptr, &buf, nullptr, &buf, &buf, nullptr, nullptr, &buf,
                                    &buf, &buf, nullptr, m, &buf, &buf, d);
  NF_EXPECT(!st.ok() && st.message.find("divisible") != std::string::npos, st.message);
}

}  // namespace
