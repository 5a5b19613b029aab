// Parity of the CUDA GEMM (both tile shapes, split-K, transposes, leading dimensions, strided batches
// with a broadcast operand, alpha/beta, bias, every activation, preact), Linear forward/backward, bias
// gradient, and bias + activation forward/backward with the float64 references
// (native/cpu/ref/linear.h, ref/activation.h).
#include <limits>

#include "../../cpu/ref/linear.h"
#include "../activation.h"
#include "../linear.h"
#include "parity.h"

namespace {

using namespace nf::test;
using nf::cuda::Act;

struct GemmCase {
  int64_t M, N, K;
  bool transA, transB;
  int64_t batch = 1;
  float alpha = 1.0f, beta = 0.0f;
  bool bias = false;
  Act act = Act::none;
  bool preact = false;
  int64_t pad = 0;            // extra elements per row of A, B and C
  bool broadcast_B = false;   // strideB = 0
};

// rows x cols matrix (packed) placed in a buffer with row stride ld.
Vec strided(const Vec& m, int64_t rows, int64_t cols, int64_t ld, double fill) {
  Vec out(size_t(rows * ld), fill);
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < cols; ++c) out[size_t(r * ld + c)] = m[size_t(r * cols + c)];
  return out;
}
Vec packed(const std::vector<float>& m, int64_t rows, int64_t cols, int64_t ld) {
  Vec out(size_t(rows * cols));
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < cols; ++c) out[size_t(r * cols + c)] = m[size_t(r * ld + c)];
  return out;
}

void run_gemm_case(const GemmCase& c) {
  const std::string name = dims({{"M", c.M}, {"N", c.N}, {"K", c.K}, {"tA", c.transA}, {"tB", c.transB},
                                 {"batch", c.batch}, {"act", int(c.act)}, {"pad", c.pad}});
  // Stored shapes: A [M, K] or [K, M]; B [K, N] or [N, K]; C [M, N].
  const int64_t ar = c.transA ? c.K : c.M, ac = c.transA ? c.M : c.K;
  const int64_t br = c.transB ? c.N : c.K, bc = c.transB ? c.K : c.N;
  const int64_t lda = ac + c.pad, ldb = bc + c.pad, ldc = c.N + c.pad;
  const int64_t bB = c.broadcast_B ? 1 : c.batch;
  std::vector<Vec> A, B, C0;
  for (int64_t b = 0; b < c.batch; ++b) {
    A.push_back(randn(size_t(ar * ac)));
    if (b < bB) B.push_back(randn(size_t(br * bc)));
    C0.push_back(randn(size_t(c.M * c.N)));
  }
  const Vec bias = c.bias ? randn(size_t(c.N)) : Vec();
  // Reference, batch by batch.
  std::vector<Vec> C = C0, P(size_t(c.batch), Vec(size_t(c.M * c.N)));
  for (int64_t b = 0; b < c.batch; ++b)
    nf::ref::gemm<double>(C[b].data(), P[b].data(), A[b].data(), B[c.broadcast_B ? 0 : b].data(),
                          c.bias ? bias.data() : nullptr, c.M, c.N, c.K, c.transA, c.transB, c.alpha, c.beta,
                          c.act);
  // CUDA: the batches side by side, each in a strided buffer. With beta = 0, C starts as NaN: it
  // must not be read.
  const double nan = std::numeric_limits<double>::quiet_NaN();
  Vec hA, hB, hC;
  for (int64_t b = 0; b < c.batch; ++b) {
    const Vec a = strided(A[b], ar, ac, lda, 0), cc = strided(C0[b], c.M, c.N, ldc, 0);
    hA.insert(hA.end(), a.begin(), a.end());
    if (c.beta != 0.0f) hC.insert(hC.end(), cc.begin(), cc.end());
    else hC.insert(hC.end(), cc.size(), nan);
    if (b < bB) {
      const Vec bb = strided(B[b], br, bc, ldb, 0);
      hB.insert(hB.end(), bb.begin(), bb.end());
    }
  }
  DeviceF dA(hA), dB(hB), dC(hC), dP(hC.size()), dbias(bias);
  nf::cuda::GemmDims d;
  d.M = c.M, d.N = c.N, d.K = c.K, d.transA = c.transA, d.transB = c.transB, d.lda = lda, d.ldb = ldb, d.ldc = ldc;
  d.batch = c.batch, d.strideA = ar * lda, d.strideB = c.broadcast_B ? 0 : br * ldb, d.strideC = c.M * ldc;
  d.alpha = c.alpha, d.beta = c.beta, d.act = c.act;
  NF_ASSERT_OK(nf::cuda::gemm(dC, c.preact ? dP.get() : nullptr, dA, dB, c.bias ? dbias.get() : nullptr, d));
  const std::vector<float> gotC = dC.download(), gotP = dP.download();
  for (int64_t b = 0; b < c.batch; ++b) {
    const std::vector<float> cb(gotC.begin() + b * c.M * ldc, gotC.begin() + (b + 1) * c.M * ldc);
    const Vec got = packed(cb, c.M, c.N, ldc);
    check_close("gemm C", name, std::vector<float>(got.begin(), got.end()), C[b], kFwdTol);
    if (c.preact) {
      const std::vector<float> pb(gotP.begin() + b * c.M * ldc, gotP.begin() + (b + 1) * c.M * ldc);
      const Vec gp = packed(pb, c.M, c.N, ldc);
      check_close("gemm preact", name, std::vector<float>(gp.begin(), gp.end()), P[b], kFwdTol);
    }
  }
}

NF_TEST(cuda_gemm_parity) {
  GemmCase cases[] = {
      {1, 1, 1, false, false},
      {7, 24, 40, true, false, 1, 1.0f, 0.0f, true, Act::gelu, true},
      {65, 72, 96, false, true, 1, 1.0f, 0.5f, false, Act::relu},
      {197, 40, 59, true, true, 3, 0.7f, 0.0f, true, Act::gelu_tanh, true},
      {33, 17, 0, false, false, 1, 1.0f, 1.0f, true},
      {130, 129, 33, false, true, 2, 1.0f, 0.0f, true, Act::none, false, 5, true},
      {64, 200, 17, true, true, 1, -1.5f, 2.0f, false, Act::gelu, true, 3},
      // Few tiles, long K: split-K (the shape of weight gradients), also batched with beta and epilogue.
      {40, 72, 3000, false, false},
      {72, 40, 1100, true, false, 2, 0.5f, 1.0f, true, Act::gelu, true, 3},
      // 12 x 11 tiles of 128 x 128: the large tile shape.
      {1536, 1408, 20, false, true, 1, 1.0f, 0.0f, true, Act::gelu, true},
  };
  for (const GemmCase& c : cases) run_gemm_case(c);
}

NF_TEST(cuda_gemm_bad_dims) {
  nf::cuda::GemmDims d;
  d.M = 4, d.N = 4, d.K = 4, d.lda = 2;
  nf::Status st = nf::cuda::gemm(nullptr, nullptr, nullptr, nullptr, nullptr, d);
  NF_EXPECT(!st.ok() && st.op == "gemm" && st.message.find("lda") != std::string::npos, st.message);
  d = nf::cuda::GemmDims{};
  d.M = -1;
  st = nf::cuda::gemm(nullptr, nullptr, nullptr, nullptr, nullptr, d);
  NF_EXPECT(!st.ok(), st.message);
}

NF_TEST(cuda_linear_parity) {
  struct Case {
    int64_t rows, in, out;
    Act act;
    bool bias;
  };
  const Case cases[] = {{1, 24, 40, Act::none, true}, {7, 72, 24, Act::gelu, true}, {197 * 5, 40, 96, Act::relu, true},
                        {65, 96, 72, Act::none, false}};
  for (const Case& c : cases) {
    const std::string name = dims({{"rows", c.rows}, {"in", c.in}, {"out", c.out}, {"act", int(c.act)}});
    const Vec x = randn(size_t(c.rows * c.in)), W = randn(size_t(c.out * c.in), 0.2), b = randn(size_t(c.out)),
              dy = randn(size_t(c.rows * c.out));
    Vec y(size_t(c.rows * c.out)), pre(y.size());
    nf::ref::gemm<double>(y.data(), pre.data(), x.data(), W.data(), c.bias ? b.data() : nullptr, c.rows, c.out, c.in,
                          false, true, 1.0, 0.0, c.act);
    Vec dx(size_t(c.rows * c.in)), dW(W.size(), 0.5), db(b.size(), -0.25);
    nf::ref::linear_backward<double>(dx.data(), dW.data(), c.bias ? db.data() : nullptr, dy.data(), x.data(), W.data(),
                                     c.rows, c.in, c.out);
    DeviceF d_x(x), d_W(W), d_b(b), d_y(y.size()), d_pre(y.size()), d_dy(dy), d_dx(dx.size()),
        d_dW(std::vector<float>(W.size(), 0.5f)), d_db(std::vector<float>(b.size(), -0.25f));
    const nf::cuda::LinearDims d{c.rows, c.in, c.out};
    NF_ASSERT_OK(nf::cuda::linear_forward(d_y, d_pre, d_x, d_W, c.bias ? d_b.get() : nullptr, d, c.act));
    check_close("linear y", name, d_y.download(), y, kFwdTol);
    check_close("linear preact", name, d_pre.download(), pre, kFwdTol);
    NF_ASSERT_OK(nf::cuda::linear_backward(d_dx, d_dW, c.bias ? d_db.get() : nullptr, d_dy, d_x, d_W, d));
    check_close("linear dx", name, d_dx.download(), dx, kBwdTol);
    check_close("linear dW", name, d_dW.download(), dW, kBwdTol);
    if (c.bias) check_close("linear db", name, d_db.download(), db, kBwdTol);
  }
}

NF_TEST(cuda_bias_act_parity) {
  for (Act act : {Act::none, Act::relu, Act::gelu, Act::gelu_tanh, Act::silu, Act::tanh})
    for (int64_t rows : {1, 65, 1100}) {
      const int64_t n = rows == 65 ? 72 : 24;
      const std::string name = dims({{"rows", rows}, {"n", n}, {"act", int(act)}});
      const size_t total = size_t(rows * n);
      const Vec x = randn(total, 2.0), b = randn(size_t(n)), dy = randn(total);
      Vec y(total), pre(total), dx(total), db(size_t(n), 0.5);
      for (size_t i = 0; i < total; ++i) {
        pre[i] = x[i] + b[i % size_t(n)];
        y[i] = nf::ref::act_forward(pre[i], act);
        dx[i] = dy[i] * nf::ref::act_derivative(pre[i], act);
        db[i % size_t(n)] += dx[i];
      }
      DeviceF d_xy(x), d_b(b), d_pre(total), d_dy(dy), d_db(std::vector<float>(size_t(n), 0.5f));
      const nf::cuda::BiasActDims d{rows, n, act};
      NF_ASSERT_OK(nf::cuda::bias_act_forward(d_xy, d_pre, d_xy, d_b, d));  // in place
      check_close("bias_act y", name, d_xy.download(), y, kFwdTol);
      check_close("bias_act preact", name, d_pre.download(), pre, kFwdTol);
      NF_ASSERT_OK(nf::cuda::bias_act_backward(d_dy, d_db, d_dy, d_pre, d));  // in place
      check_close("bias_act dx", name, d_dy.download(), dx, kBwdTol);
      check_close("bias_act dbias", name, d_db.download(), db, kBwdTol);
    }
}

}  // namespace
