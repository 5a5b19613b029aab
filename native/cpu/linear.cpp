// Linear layer, forward and backward, on top of the GEMM.
// Math: y = act(x Wᵀ + b); dx = dy W; dW += dyᵀ x; db += Σ_rows dy (the column sums also give a
//   per-column scale's gradient, Σ_rows dy ∘ x).
// Layout: x [rows, in], W [out, in], b [out], y/dy [rows, out], all row-major. The forward reads a
// prepacked W (WPacked, from packWeights) instead of packing W when given.
// Dimension key: rows = B*T, in/out = feature widths.
#include "linear.h"

#include <algorithm>
#include <type_traits>

#include "../core/threadpool.h"
#include "packed.h"
#include "isa.h"

namespace nf::cpu::NF_ISA_NS {
#include "simd.h"

void linear_forward(float* y, float* preact, const float* x, const float* W, const float* b, const LinearDims& d,
                    Act act, const PackedB& Wp, ops::Precision precision, bool round_out, bool bf16) {
  // Precision 'int8' (falling back to the float product when its buffers cannot be allocated).
  if (Wp.int8 && gemm_int8(static_cast<Isa>(NF_ISA), y, preact, x, W, Wp.q, b, d.rows, d.out_features,
                           d.in_features, d.in_features, d.out_features, act, round_out))
    return;
  GemmDims g;
  g.M = d.rows, g.N = d.out_features, g.K = d.in_features;
  g.transB = true;
  g.lda = d.in_features, g.ldb = d.in_features, g.ldc = d.out_features;
  g.act = act;
  NF_ISA_NS::gemm(y, preact, x, W, b, g, Wp, precision, round_out, nullptr, {bf16, bf16, bf16});
}

void bias_grad(float* db, const float* dy, int64_t rows, int64_t n, const float* x, bool bf16) {
  // Threads own column blocks of 4 vectors, summed down all rows in registers (contiguous reads).
  constexpr int kVecs = 4;
  constexpr int64_t kBlock = kVecs * W;
  parallel_for((n + kBlock - 1) / kBlock, [&](int64_t b0, int64_t b1) {
    for (int64_t blk = b0; blk < b1; ++blk) {
      const int64_t c0 = blk * kBlock;
      int width[kVecs];
      for (int v = 0; v < kVecs; ++v) width[v] = static_cast<int>(std::clamp<int64_t>(n - c0 - v * W, 0, W));
      vf acc[kVecs];
      for (int v = 0; v < kVecs; ++v) acc[v] = vzero();
      // Every row's terms, each vector read by load(p, i, v) (element i of p, whole, or masked in a partial block).
      const auto sum_rows = [&](auto load) {
        for (int64_t r = 0; r < rows; ++r) {
          if (x)
            for (int v = 0; v < kVecs; ++v) acc[v] = vfma(load(dy, r * n + c0, v), load(x, r * n + c0, v), acc[v]);
          else
            for (int v = 0; v < kVecs; ++v) acc[v] = vadd(acc[v], load(dy, r * n + c0, v));
        }
      };
      const auto load16 = [&](const float* p, int64_t i, int v) {
        return vload_bf16_w(reinterpret_cast<const uint16_t*>(p) + i + v * W, width[v]);
      };
      if (bf16)
        sum_rows(load16);
      else if (width[kVecs - 1] == W)
        sum_rows([&](const float* p, int64_t i, int v) { return vload(p + i + v * W); });
      else
        sum_rows([&](const float* p, int64_t i, int v) { return vload_n(p + i + v * W, width[v]); });
      for (int v = 0; v < kVecs; ++v)
        if (width[v] > 0) vstore_n(db + c0 + v * W, vadd(acc[v], vload_n(db + c0 + v * W, width[v])), width[v]);
    }
  });
}

void linear_backward(float* dx, float* dW, float* db, const float* dy, const float* x, const float* W,
                     const LinearDims& d, ops::Precision precision, const float* act_grad, Act act, bool bf16) {
  if (dx) {  // dx[rows,in] = dy[rows,out] W[out,in] (∘ act'(act_grad))
    GemmDims g;
    g.M = d.rows, g.N = d.in_features, g.K = d.out_features;
    g.lda = d.out_features, g.ldb = d.in_features, g.ldc = d.in_features;
    g.act = act_grad ? act : Act::none;
    NF_ISA_NS::gemm(dx, nullptr, dy, W, nullptr, g, {}, precision, false, act_grad, {bf16, bf16, bf16});
  }
  {  // dW[out,in] += dyᵀ[out,rows] x[rows,in]
    GemmDims g;
    g.M = d.out_features, g.N = d.in_features, g.K = d.rows;
    g.transA = true;
    g.lda = d.out_features, g.ldb = d.in_features, g.ldc = d.in_features;
    g.beta = 1.0f;
    NF_ISA_NS::gemm(dW, nullptr, dy, x, nullptr, g, {}, precision, false, nullptr, {bf16, bf16, false});
  }
  if (db) NF_ISA_NS::bias_grad(db, dy, d.rows, d.out_features, nullptr, bf16);
}

}  // namespace nf::cpu::NF_ISA_NS

#ifdef NF_ISA_PRIMARY
namespace nf::cpu {
namespace {

template <class T>
Status run_forward(const ops::LinearForward<T>& p) {
  constexpr bool b16 = std::is_same_v<T, ops::bf16>;
  NF_TRY(ops::linear_check("linear_forward", p.d));
  NF_TRY(ops::bf16_storage_check("linear_forward", p.precision, b16));
  const Isa isa = active_isa();
  PackedB Wp;
  NF_TRY(packed_weight(&Wp, p.W_packed, p.d.out_features, p.d.in_features, isa, p.precision, "linear_forward", "WPacked"));
  if (p.d.rows == 0) return Status::Ok();
  NF_DISPATCH_TO(isa, linear_forward, storage_ptr(p.y), storage_ptr(p.preact), storage_ptr(p.x), storage_ptr(p.W), p.b,
                 p.d, p.act, Wp, p.precision, false, b16);
  return Status::Ok();
}

template <class T>
Status run_backward(const ops::LinearBackward<T>& p) {
  constexpr bool b16 = std::is_same_v<T, ops::bf16>;
  NF_TRY(ops::int8_inference_check("linear_backward", p.precision, "a backward"));
  NF_TRY(ops::linear_check("linear_backward", p.d));
  NF_TRY(ops::bf16_storage_check("linear_backward", p.precision, b16));
  if (p.d.rows == 0) return Status::Ok();
  NF_DISPATCH(linear_backward, storage_ptr(p.dx), p.dW, p.db, storage_ptr(p.dy), storage_ptr(p.x), storage_ptr(p.W), p.d,
              p.precision, nullptr, Act::none, b16);
  return Status::Ok();
}

}  // namespace

Status run(const ops::LinearForward<float>& p) { return run_forward(p); }
Status run(const ops::LinearForward<ops::bf16>& p) { return run_forward(p); }
Status run(const ops::LinearBackward<float>& p) { return run_backward(p); }
Status run(const ops::LinearBackward<ops::bf16>& p) { return run_backward(p); }

}  // namespace nf::cpu
#endif
#include "isa_end.h"
