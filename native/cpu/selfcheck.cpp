// The load-time known-answer self-check of the ISA variants (run_isa_selfcheck, declared in
// core/cpu_features.h): before the first variant is chosen, every kernel family runs once on a
// tiny fixed input under each candidate variant (avx512bf16, avx512, avx2 or neon: those the CPU
// has) and under the scalar one, and a candidate whose outputs disagree is rejected (cpu_features.cpp
// then uses the next one down). The families: GEMM with each epilogue (every activation of the
// schema; alpha, beta, bias, preact, every transpose, a strided batch), the GEMM at precision bf16
// (both packing paths, an odd K: the avx512bf16 variant's vdpbf16ps against the scalar emulation of
// the same rounding), a Linear at precision 'int8' (the int8 kernels, VNNI ones included),
// self-attention forward and backward (causal),
// layernorm forward and backward (with the residual add), the feed-forward network forward and
// backward with each activation, softmax cross-entropy with its gradient, and an AdamW step.
// Shapes are chosen so every variant meets full vectors, tails and partial register tiles
// (widths 13, 37 against W = 16, 8 and 4 and the tiles 12x32, 6x16, 4x4).
//   Agreement: ‖candidate − scalar‖₂ / ‖scalar‖₂ ≤ kTolerance for every output. The variants
// compute the same formulas from bit-identical vocabulary functions (test/simd.test.ts); they
// differ only in the order of sums (vector lanes, register tiles), which at these sizes
// (reductions of at most 37 terms) moves results by about 1e-7 relative; the copysign bug of
// issue 11 gave NaN, and a wrong lane or a lost tail gives errors of order 1.
//   Cost: every family at these sizes takes microseconds; all of it runs on the calling thread
// (SerialScope: no pool thread is started at load). cpu_features.cpp reports the time.
//   Test hook: NF_SELFCHECK_FAIL=avx512 (a comma-separated list of variants) negates the first
// output of the named variants before the comparison, to exercise rejection and fallback.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <string>
#include <vector>

#include "../core/threadpool.h"
#include "attention.h"
#include "feedforward.h"
#include "gemm.h"
#include "layernorm.h"
#include "linear.h"
#include "loss.h"
#include "optim.h"
#include "isa.h"

#ifdef NF_ISA_PRIMARY
namespace nf::cpu {
namespace {

constexpr double kTolerance = 1e-4;

using Floats = std::vector<float>;

// One named output array of one family.
struct Output {
  std::string name;
  Floats v;
};
using Outputs = std::vector<Output>;

// n fixed pseudo-random floats in [-scale, scale) (a 32-bit LCG; the same on every run).
Floats fixed(int64_t n, uint32_t seed, float scale = 1.0f) {
  Floats v(static_cast<size_t>(n));
  uint32_t s = seed * 2654435761u + 1u;
  for (float& x : v) {
    s = s * 1664525u + 1013904223u;
    x = scale * (static_cast<float>(s >> 8) * (2.0f / 16777216.0f) - 1.0f);
  }
  return v;
}

// The activation's name in the op schema (native/ops/activation.h).
const char* act_name(Act act) {
  for (const ops::Choice<Act>& c : ops::kActivationList)
    if (c.value == act) return c.name;
  return "?";
}

// C = act(alpha op(A) op(B) + beta C + bias), M = 13, N = 37, K = 19, with the transposes and
// batching varied across the epilogues so that both packing paths run.
Outputs gemm_family(Isa isa, Act act) {
  GemmDims d;
  d.M = 13, d.N = 37, d.K = 19;
  d.act = act;
  d.transA = act == Act::none || act == Act::gelu_tanh;
  d.transB = act == Act::gelu || act == Act::gelu_tanh;
  d.alpha = 0.75f;
  d.beta = act == Act::relu ? 0.0f : 0.5f;
  d.batch = act == Act::none ? 2 : 1;
  d.strideA = d.M * d.K + 3, d.strideB = d.K * d.N + 5, d.strideC = d.M * d.N + 7;
  (void)gemm_check(&d);  // fills the leading dimensions; these dims are valid
  const uint32_t seed = 10 + static_cast<uint32_t>(act);
  Floats A = fixed(d.batch * d.strideA, seed, 0.6f), B = fixed(d.batch * d.strideB, seed + 1, 0.6f);
  Floats bias = fixed(d.N, seed + 2), C = fixed(d.batch * d.strideC, seed + 3), preact(C.size(), 0.0f);
  NF_DISPATCH_TO(isa, gemm, C.data(), preact.data(), A.data(), B.data(), bias.data(), d);
  const std::string name = std::string("gemm ") + act_name(act) + " epilogue";
  return {{name + " C", C}, {name + " preact", preact}};
}

// C = A B at precision bf16, M = 13, N = 37, K = 19 (an odd last pair), A and B row-major or both
// transposed: every variant rounds the inputs the same way, so only the order of sums differs.
Outputs gemm_bf16_family(Isa isa, bool trans) {
  GemmDims d;
  d.M = 13, d.N = 37, d.K = 19;
  d.transA = d.transB = trans;
  (void)gemm_check(&d);
  Floats A = fixed(d.M * d.K, 80 + trans, 0.6f), B = fixed(d.K * d.N, 82 + trans, 0.6f), C(d.M * d.N, 0.0f);
  NF_DISPATCH_TO(isa, gemm, C.data(), nullptr, A.data(), B.data(), nullptr, d, {}, ops::Precision::bf16);
  return {{std::string("gemm bf16") + (trans ? " transposed" : "") + " C", C}};
}

// A Linear at precision 'int8' (gemm_int8.cpp: on the avx512 variant the VNNI kernels where the CPU
// has them), rows = 13, 19 → 37, GELU, W quantized per call: the int32 sums are exact on every
// variant, so the outputs agree but for the epilogue's rounding.
Outputs int8_family(Isa isa) {
  const int64_t rows = 13, K = 19, N = 37;
  Floats x = fixed(rows * K, 40), W = fixed(N * K, 41, 0.3f), b = fixed(N, 42), y(rows * N), preact(rows * N);
  PackedB int8;
  int8.int8 = true;
  NF_DISPATCH_TO(isa, linear_forward, y.data(), preact.data(), x.data(), W.data(), b.data(), LinearDims{rows, K, N}, Act::gelu, int8,
                 ops::Precision::int8);
  return {{"linear int8 y", y}, {"linear int8 preact", preact}};
}

// Causal self-attention, B = 2, T = 5, D = 24, H = 2 (Dh = 12), forward then backward.
Outputs attention_family(Isa isa) {
  AttentionDims d;
  d.B = 2, d.Tq = d.Tk = 5, d.D = 24, d.H = 2;
  const int64_t rows = d.B * d.Tq, D = d.D;
  AttentionMasks masks;
  masks.causal = true;
  Floats x = fixed(rows * D, 20), qkv_weight = fixed(3 * D * D, 21, 0.3f), qkv_bias = fixed(3 * D, 22, 0.1f);
  Floats proj_weight = fixed(D * D, 23, 0.3f), proj_bias = fixed(D, 24, 0.1f), dout = fixed(rows * D, 25);
  Floats y(rows * D), weights(d.B * d.H * d.Tq * d.Tk), qkv(rows * 3 * D), ctx(rows * D), lse(d.B * d.H * d.Tq);
  ops::AttentionForward<float> f;
  f.d = d, f.m = masks;
  f.out = y.data(), f.weights = weights.data(), f.qkv = qkv.data(), f.ctx = ctx.data(), f.lse = lse.data();
  f.x = x.data(), f.qkv_weight = qkv_weight.data(), f.qkv_bias = qkv_bias.data(), f.proj_weight = proj_weight.data(), f.proj_bias = proj_bias.data();
  NF_DISPATCH_TO(isa, attention_forward, f);
  Floats dx(rows * D), d_qkv_weight(3 * D * D, 0.0f), d_qkv_bias(3 * D, 0.0f), d_proj_weight(D * D, 0.0f), d_proj_bias(D, 0.0f);
  ops::AttentionBackward<float> b;
  b.d = d, b.m = masks;
  b.dx = dx.data(), b.d_qkv_weight = d_qkv_weight.data(), b.d_qkv_bias = d_qkv_bias.data(), b.d_proj_weight = d_proj_weight.data(), b.d_proj_bias = d_proj_bias.data();
  b.dout = dout.data(), b.qkv = qkv.data(), b.ctx = ctx.data(), b.lse = lse.data(), b.x = x.data();
  b.qkv_weight = qkv_weight.data(), b.proj_weight = proj_weight.data();
  NF_DISPATCH_TO(isa, attention_backward, b);
  return {{"attention forward out", y}, {"attention forward weights", weights},
          {"attention forward lse", lse}, {"attention backward dx", dx},
          {"attention backward d_qkv_weight", d_qkv_weight}, {"attention backward d_qkv_bias", d_qkv_bias},
          {"attention backward d_proj_weight", d_proj_weight}, {"attention backward d_proj_bias", d_proj_bias}};
}

// LayerNorm of x + residual, rows = 3, D = 37, forward then backward (with a gradient to add).
Outputs layernorm_family(Isa isa) {
  const int64_t rows = 3, D = 37, n = rows * D;
  Floats x = fixed(n, 30, 2.0f), residual = fixed(n, 31), gamma = fixed(D, 32), beta = fixed(D, 33);
  Floats y(n), sum(n), mean(rows), rstd(rows), dout = fixed(n, 34), dadd = fixed(n, 35);
  ops::LayerNormForward<float> f;
  f.rows = rows, f.D = D;
  f.out = y.data(), f.sum = sum.data(), f.mean = mean.data(), f.rstd = rstd.data();
  f.x = x.data(), f.residual = residual.data(), f.gamma = gamma.data(), f.beta = beta.data();
  NF_DISPATCH_TO(isa, layernorm_forward, f);
  Floats dx(n), dgamma(D, 0.0f), dbeta(D, 0.0f);
  ops::LayerNormBackward<float> b;
  b.rows = rows, b.D = D;
  b.dx = dx.data(), b.dgamma = dgamma.data(), b.dbeta = dbeta.data(), b.dout = dout.data(), b.dadd = dadd.data();
  b.x = sum.data(), b.mean = mean.data(), b.rstd = rstd.data(), b.gamma = gamma.data();
  NF_DISPATCH_TO(isa, layernorm_backward, b);
  return {{"layernorm forward out", y}, {"layernorm forward mean", mean}, {"layernorm forward rstd", rstd},
          {"layernorm backward dx", dx}, {"layernorm backward dgamma", dgamma},
          {"layernorm backward dbeta", dbeta}};
}

// The feed-forward network, rows = 3, D = 13, F = 37, forward then backward: the activations
// forward (GEMM epilogue) and backward (act_backward_n).
Outputs feedforward_family(Isa isa, Act act) {
  FeedForwardDims d;
  d.rows = 3, d.D = 13, d.F = 37;
  d.activation = act;
  const int64_t D = d.D, F = d.F, rows = d.rows;
  const uint32_t seed = 40 + 10 * static_cast<uint32_t>(act);
  Floats x = fixed(rows * D, seed, 2.0f), W1 = fixed(F * D, seed + 1, 0.6f), b1 = fixed(F, seed + 2);
  Floats W2 = fixed(D * F, seed + 3, 0.3f), b2 = fixed(D, seed + 4), dy = fixed(rows * D, seed + 5);
  Floats y(rows * D), h(rows * F), a(rows * F);
  ops::FeedForwardForward<float> f;
  f.d = d, f.y = y.data(), f.h = h.data(), f.a = a.data();
  f.x = x.data(), f.W1 = W1.data(), f.b1 = b1.data(), f.W2 = W2.data(), f.b2 = b2.data();
  NF_DISPATCH_TO(isa, feedforward_forward, f);
  Floats dx(rows * D), dW1(F * D, 0.0f), db1(F, 0.0f), dW2(D * F, 0.0f), db2(D, 0.0f);
  ops::FeedForwardBackward<float> b;
  b.d = d, b.dx = dx.data(), b.dW1 = dW1.data(), b.db1 = db1.data(), b.dW2 = dW2.data(), b.db2 = db2.data();
  b.dy = dy.data(), b.x = x.data(), b.h = h.data(), b.a = a.data(), b.W1 = W1.data(), b.W2 = W2.data();
  NF_DISPATCH_TO(isa, feedforward_backward, b);
  const std::string name = std::string("feedforward ") + act_name(act);
  return {{name + " forward y", y}, {name + " forward activation", a}, {name + " backward dx", dx},
          {name + " backward dW1", dW1}, {name + " backward db1", db1}, {name + " backward dW2", dW2}};
}

// Softmax cross-entropy with label smoothing and an ignored row, N = 4, V = 37, and its gradient.
Outputs cross_entropy_family(Isa isa) {
  CrossEntropyDims d;
  d.N = 4, d.V = 37, d.label_smoothing = 0.1, d.ignore_index = -100;
  const int32_t targets[4] = {3, 36, -100, 17};
  Floats logits = fixed(d.N * d.V, 60, 4.0f), loss(1), dlogits(d.N * d.V);
  NF_DISPATCH_TO(isa, cross_entropy, loss.data(), dlogits.data(), logits.data(), targets, d);
  return {{"cross_entropy loss", loss}, {"cross_entropy dlogits", dlogits}};
}

// The third AdamW step on 37 parameters with non-zero moments.
Outputs adamw_family(Isa isa) {
  const int64_t n = 37;
  AdamWParams p;
  p.lr = 1e-2, p.step = 3;
  Floats param = fixed(n, 70), m = fixed(n, 71, 0.1f), v = fixed(n, 72, 0.01f), grad = fixed(n, 73);
  for (float& x : v) x = std::fabs(x);
  std::vector<uint16_t> bits(n);  // (the bf16 weight copy of precision 'bf16', written in the same pass)
  float *pp = param.data(), *pm = m.data(), *pv = v.data();
  const float* pg = grad.data();
  uint16_t* pc = bits.data();
  NF_DISPATCH_TO(isa, adamw_multi_step, AdamWList{1, &n, &pp, &pm, &pv, &pg, &pc}, p);
  Floats copy(n);
  for (int64_t i = 0; i < n; ++i) {
    const uint32_t word = uint32_t(bits[i]) << 16;
    std::memcpy(&copy[i], &word, sizeof word);
  }
  return {{"adamw param", param}, {"adamw exp_avg", m}, {"adamw exp_avg_sq", v}, {"adamw bf16 copy", copy}};
}

// Every family's outputs under variant `isa`, in a fixed order.
Outputs run_all(Isa isa) {
  Outputs all;
  const auto add = [&all](Outputs some) { all.insert(all.end(), some.begin(), some.end()); };
  for (int a = 0; a < ops::kActCount; ++a) add(gemm_family(isa, static_cast<Act>(a)));  // every epilogue
  for (bool trans : {false, true}) add(gemm_bf16_family(isa, trans));
  add(int8_family(isa));
  add(attention_family(isa));
  add(layernorm_family(isa));
  for (const ops::Choice<Act>& c : ops::kFeedForwardActivationList) add(feedforward_family(isa, c.value));
  add(cross_entropy_family(isa));
  add(adamw_family(isa));
  return all;
}

// ‖got − ref‖₂ / ‖ref‖₂ (the absolute norm when ref is all zeros); NaN when got has a NaN.
double rel_err(const Floats& got, const Floats& ref) {
  double num = 0, den = 0;
  for (size_t i = 0; i < ref.size(); ++i) {
    const double e = static_cast<double>(got[i]) - ref[i];
    num += e * e;
    den += static_cast<double>(ref[i]) * ref[i];
  }
  return den == 0 ? std::sqrt(num) : std::sqrt(num / den);
}

// Whether NF_SELFCHECK_FAIL names `isa`.
bool simulated_failure(Isa isa) {
  const char* env = std::getenv("NF_SELFCHECK_FAIL");
  if (!env) return false;
  std::string list = env;
  for (size_t start = 0; start <= list.size();) {
    const size_t end = std::min(list.find(',', start), list.size());
    Isa named;
    if (parse_isa(list.substr(start, end - start), &named) && named == isa) return true;
    start = end + 1;
  }
  return false;
}

std::string format_err(double e) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1e", e);
  return buf;
}

}  // namespace
}  // namespace nf::cpu

namespace nf {

namespace {

// Checks each compiled variant above scalar up to `best` against the scalar one, best first,
// appending to `check`.
void check_variants(Isa best, IsaSelfCheck* check) {
  if (isa_rank(best) <= 0) return;
  const cpu::Outputs ref = cpu::run_all(Isa::scalar);
  for (int r = isa_rank(best); r > 0; --r) {
    const Isa isa = kCompiledIsas[r];
    cpu::Outputs got = cpu::run_all(isa);
    const bool simulated = cpu::simulated_failure(isa);
    if (simulated)
      for (float& x : got.front().v) x = -x;
    std::string reason;
    double worst = 0;
    int failed = 0;
    for (size_t k = 0; k < ref.size(); ++k) {
      const double e = cpu::rel_err(got[k].v, ref[k].v);
      if (!std::isnan(worst) && (std::isnan(e) || e > worst)) worst = e;
      if (e <= cpu::kTolerance) continue;
      if (++failed <= 3)  // the first three by name, then how many more
        reason += (reason.empty() ? "" : "; ") + ref[k].name + ": relative error " + cpu::format_err(e);
    }
    check->checked.push_back({isa, worst});
    if (failed > 0) {
      if (failed > 3) reason += "; and " + std::to_string(failed - 3) + " more outputs";
      reason += " (against the scalar variant; tolerance " + cpu::format_err(cpu::kTolerance) + ")";
      if (simulated) reason += " [simulated by NF_SELFCHECK_FAIL]";
      check->rejected.push_back({isa, reason});
    }
  }
}

}  // namespace

IsaSelfCheck run_isa_selfcheck(Isa best) {
  using Clock = std::chrono::steady_clock;
  const Clock::time_point t0 = Clock::now();
  IsaSelfCheck check;
  check.tolerance = cpu::kTolerance;
  try {
    SerialScope serial;
    check_variants(best, &check);
  } catch (const std::exception& e) {  // out of memory for the tiny buffers: no variant is trusted
    for (int r = isa_rank(best) - static_cast<int>(check.checked.size()); r > 0; --r)
      check.rejected.push_back({kCompiledIsas[r], std::string("the self-check could not run: ") + e.what()});
  }
  check.ms = std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
  return check;
}

}  // namespace nf
#endif
#include "isa_end.h"
