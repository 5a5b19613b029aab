// Parity of the CUDA GEMM (both tile shapes, split-K, transposes, leading dimensions, strided batches
// with a broadcast operand, alpha/beta, bias, every activation, preact, operands at 4-byte-aligned
// offsets), Linear forward/backward (and its halves with a fused activation backward), bias
// gradient, and bias + activation forward/backward with the float64 references
// (native/cpu/ref/linear.h, ref/activation.h). The products go through the GEMM dispatch: run with
// NF_CUBLASLT_PATH naming the CPU stand-in (native/cuda/cublaslt_standin.cpp) they take cuBLASLt's
// path (descriptors, epilogues, heuristic, workspace), and the backend's own kernel is then checked
// on the same cases as well; without it, the kernel runs them. Also: which backend ran (and that
// the fused epilogues did run there), the compute modes (tf32, bf16: their own tolerances against
// the float64 reference), and the fallbacks when cuBLASLt offers no algorithm.
#include <algorithm>
#include <cstdlib>
#include <limits>

#include "../../cpu/ref/linear.h"
#include "../activation.cuh"
#include "../activation.h"
#include "../linear.h"
#include "bf16_parity.h"

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
  int64_t offset = 0;         // A, B, C and preact start this many floats into their buffers
};

bool cublaslt_loaded() { return nf::cuda::gemm_backend_info().cublaslt.loaded; }

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
  // Every case through the dispatch; with cuBLASLt loaded, through the backend's own kernel too.
  for (bool kernel_only : {false, true}) {
    if (kernel_only && !cublaslt_loaded()) break;
    const size_t o = size_t(c.offset);
    Vec pA(o, 0.0), pB(o, 0.0), pC(o, 0.0);
    pA.insert(pA.end(), hA.begin(), hA.end());
    pB.insert(pB.end(), hB.begin(), hB.end());
    pC.insert(pC.end(), hC.begin(), hC.end());
    DeviceF dA(pA), dB(pB), dC(pC), dP(pC.size()), dbias(bias);
    nf::cuda::GemmDims d;
    d.M = c.M, d.N = c.N, d.K = c.K, d.transA = c.transA, d.transB = c.transB, d.lda = lda, d.ldb = ldb, d.ldc = ldc;
    d.batch = c.batch, d.strideA = ar * lda, d.strideB = c.broadcast_B ? 0 : br * ldb, d.strideC = c.M * ldc;
    d.alpha = c.alpha, d.beta = c.beta, d.act = c.act;
    float* dpre = c.preact ? dP.get() + o : nullptr;
    const float* bp = c.bias ? dbias.get() : nullptr;
    if (kernel_only) NF_ASSERT_OK(nf::cuda::gemm_kernel_only(dC.get() + o, dpre, dA.get() + o, dB.get() + o, bp, d));
    else NF_ASSERT_OK(nf::cuda::gemm(dC.get() + o, dpre, dA.get() + o, dB.get() + o, bp, d));
    const std::vector<float> allC = dC.download(), allP = dP.download();
    const std::vector<float> gotC(allC.begin() + c.offset, allC.end()), gotP(allP.begin() + c.offset, allP.end());
    const std::string label = kernel_only ? "gemm kernel " : "gemm ";
    for (int64_t b = 0; b < c.batch; ++b) {
      const std::vector<float> cb(gotC.begin() + b * c.M * ldc, gotC.begin() + (b + 1) * c.M * ldc);
      const Vec got = packed(cb, c.M, c.N, ldc);
      check_close(label + "C", name, std::vector<float>(got.begin(), got.end()), C[b], kFwdTol);
      if (c.preact) {
        const std::vector<float> pb(gotP.begin() + b * c.M * ldc, gotP.begin() + (b + 1) * c.M * ldc);
        const Vec gp = packed(pb, c.M, c.N, ldc);
        check_close(label + "preact", name, std::vector<float>(gp.begin(), gp.end()), P[b], kFwdTol);
      }
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
      // Operands one float into their buffers (4-byte aligned only), batched; the tanh GELU with its
      // input saved (cuBLASLt's GELU_AUX_BIAS epilogue when the aux ld is a multiple of 8).
      {24, 48, 40, false, true, 2, 1.0f, 0.0f, true, Act::gelu_tanh, true, 0, false, 1},
      {17, 33, 9, true, false, 1, 1.0f, 0.0f, true, Act::gelu_tanh, true, 0, false, 3},
      {40, 16, 24, false, false, 1, 1.0f, 0.0f, true, Act::relu, false},
      {40, 16, 24, false, false, 1, 1.0f, 0.0f, false, Act::none, true},
      {40, 16, 24, false, false, 1, 1.0f, 0.0f, false, Act::silu, true},
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
      // At 65 rows the bias sits one float past an aligned address: the rows could take 16-byte
      // vectors, the bias cannot, so the kernel runs element by element.
      const int pad = rows == 65 ? 1 : 0;
      std::vector<float> b_padded(size_t(pad), 0.0f);
      for (double v : b) b_padded.push_back(float(v));
      DeviceF d_xy(x), d_b_store(b_padded), d_pre(total), d_dy(dy), d_db(std::vector<float>(size_t(n), 0.5f));
      const float* d_b = d_b_store.get() + pad;
      const nf::cuda::BiasActDims d{rows, n, act};
      NF_ASSERT_OK(nf::cuda::bias_act_forward(d_xy, d_pre, d_xy, d_b, d));  // in place
      check_close("bias_act y", name, d_xy.download(), y, kFwdTol);
      check_close("bias_act preact", name, d_pre.download(), pre, kFwdTol);
      NF_ASSERT_OK(nf::cuda::bias_act_backward(d_dy, d_db, d_dy, d_pre, d));  // in place
      check_close("bias_act dx", name, d_dy.download(), dx, kBwdTol);
      check_close("bias_act dbias", name, d_db.download(), db, kBwdTol);
    }
}

// GELU after a product of bf16 inputs takes Φ from normcdf_reduced (activation.cuh, the CPU's Φ for the
// GELU fused into its bf16 products): within 1e-6 of Φ everywhere; the elementwise pass takes it with
// BiasActDims::reduced, and a product of bf16 operands (or of float ones at Compute::bf16 through
// cuBLASLt) applies it to its pre-activation; fp32 products keep erff's.
NF_TEST(cuda_gelu_reduced) {
  using nf::cuda::Compute;
  double worst = 0.0;
  for (int i = -120000; i <= 120000; ++i) {  // x in [-12, 12]
    const float x = float(i * 1e-4);
    const double exact = 0.5 * std::erfc(-double(x) / std::sqrt(2.0));
    worst = std::max(worst, std::abs(double(nf::cuda::normcdf_reduced(x)) - exact));
  }
  std::printf("    normcdf_reduced: max |error| %.2e on [-12, 12]\n", worst);
  NF_EXPECT(worst < 1e-6, "normcdf_reduced is off by " + std::to_string(worst));
  // Which GELU each output is, where the two differ by more than float rounding (host and device may
  // round erff, or a fused multiply-add, differently): every such output is nearer the expected one.
  const auto check_gelu = [](const std::string& what, const std::vector<float>& y, const std::vector<float>& pre,
                             bool reduced) {
    size_t decisive = 0, wrong = 0;
    for (size_t i = 0; i < y.size(); ++i) {
      const double r = nf::cuda::act_forward(pre[i], Act::gelu, true);
      const double e = nf::cuda::act_forward(pre[i], Act::gelu, false);
      if (std::abs(r - e) <= 1e-6 * std::abs(e) + 1e-30) continue;  // (8 float roundings apart or less)
      ++decisive;
      wrong += (std::abs(y[i] - r) < std::abs(y[i] - e)) != reduced;
    }
    NF_EXPECT(decisive > 0 && wrong == 0, what + ": " + std::to_string(wrong) + " of " + std::to_string(decisive) +
                                              " outputs nearer the " + (reduced ? "erff" : "reduced") + " GELU");
  };
  const int64_t M = 65, N = 72, K = 40;
  const Vec x = randn(size_t(M * N), 3.0);
  for (bool reduced : {false, true}) {
    DeviceF d_x(x), d_y(x.size());
    NF_ASSERT_OK(nf::cuda::bias_act_forward(d_y, nullptr, d_x, nullptr, {M, N, Act::gelu, reduced}));
    std::vector<float> xf;
    for (double v : x) xf.push_back(float(v));
    check_gelu(std::string("bias_act_forward reduced=") + (reduced ? "1" : "0"), d_y.download(), xf, reduced);
  }
  nf::cuda::GemmDims d;
  d.M = M, d.N = N, d.K = K, d.transB = true, d.act = Act::gelu;
  const Vec a = randb(size_t(M * K)), b = randb(size_t(N * K), 0.3), bias = randn(size_t(N));
  DeviceF d_bias(bias);
  {  // bf16 operands (the layers' precision 'bf16'), float C
    DeviceB dA(bits(a)), dB(bits(b));
    DeviceF dC(size_t(M * N)), dP(size_t(M * N));
    NF_ASSERT_OK(nf::cuda::gemm(dC.get(), dP.get(), dA.get(), dB.get(), d_bias.get(), d, Compute::bf16));
    check_gelu("gemm, bf16 operands", dC.download(), dP.download(), true);
  }
  for (Compute mode : {Compute::fp32, Compute::bf16}) {  // float operands
    DeviceF dA(a), dB(b), dC(size_t(M * N)), dP(size_t(M * N));
    NF_ASSERT_OK(nf::cuda::gemm(dC.get(), dP.get(), dA.get(), dB.get(), d_bias.get(), d, mode));
    // (the own kernel computes float operands in fp32 whatever the mode)
    check_gelu(std::string("gemm, float operands, ") + nf::cuda::compute_name(mode), dC.download(), dP.download(),
               mode == Compute::bf16 && cublaslt_loaded());
  }
}

// Which backend runs the products. Emulated build: cuBLASLt (the CPU stand-in) exactly when
// NF_CUBLASLT_PATH names it, else the backend's own kernel, with the reason; GPU build: whatever
// this machine has (reported), never the stand-in; NF_CUBLASLT=0: the kernel.
NF_TEST(cuda_gemm_backend) {
  const char* path = std::getenv("NF_CUBLASLT_PATH");
  const char* off = std::getenv("NF_CUBLASLT");
  const nf::cuda::GemmBackendInfo info = nf::cuda::gemm_backend_info();
  const nf::cuda::lt::Info& lt = info.cublaslt;
  std::printf("    gemm backend: %s%s (%s, version %lld) cuBLASLt products %lld (fused %lld), kernel %lld, no algorithm "
              "%lld, heuristic queries %lld, workspace %lld bytes\n",
              lt.loaded ? "cublaslt" : "kernel", lt.stand_in ? " (CPU stand-in)" : "",
              lt.library.empty() ? lt.reason.c_str() : lt.library.c_str(), (long long)lt.version, (long long)lt.matmuls,
              (long long)lt.fused, (long long)info.kernel, (long long)lt.unsupported, (long long)lt.heuristic_queries,
              (long long)lt.workspace_bytes);
  NF_EXPECT(info.cublaslt.loaded == info.cublaslt.reason.empty(), info.cublaslt.reason);
  if (off && std::string(off) == "0") {
    NF_EXPECT(!info.cublaslt.loaded && info.cublaslt.reason == "disabled by NF_CUBLASLT=0", info.cublaslt.reason);
  } else if (info.cublaslt.loaded) {
    NF_EXPECT(!info.cublaslt.library.empty() && info.cublaslt.version >= 120000, std::to_string(info.cublaslt.version));
  }
#ifdef NF_CUDA_REQUIRE_DEVICE
  (void)path;
  NF_EXPECT(!info.cublaslt.stand_in, "a GPU build must refuse the CPU stand-in");
#else
  if (path && *path && !(off && std::string(off) == "0"))
    NF_EXPECT(info.cublaslt.loaded && info.cublaslt.stand_in && info.cublaslt.library == path, info.cublaslt.reason);
  else
    NF_EXPECT(!info.cublaslt.loaded && !info.cublaslt.stand_in && info.cublaslt.library.empty());
#endif
  // One product, and the counters move where it ran.
  const Vec a = randn(6 * 8), b = randn(8 * 5);
  DeviceF dA(a), dB(b), dC(6 * 5);
  nf::cuda::GemmDims d;
  d.M = 6, d.N = 5, d.K = 8;
  NF_ASSERT_OK(nf::cuda::gemm(dC, nullptr, dA, dB, nullptr, d));
  const nf::cuda::GemmBackendInfo after = nf::cuda::gemm_backend_info();
  NF_EXPECT((after.cublaslt.matmuls - info.cublaslt.matmuls) + (after.kernel - info.kernel) == 1);
  if (info.cublaslt.loaded) {
    NF_EXPECT(!info.cublaslt.stand_in || after.cublaslt.matmuls == info.cublaslt.matmuls + 1,
              "the stand-in takes every plain product");
    NF_EXPECT(after.cublaslt.workspace_bytes > 0,
              "the workspace comes from the caching allocator on the first product");
  } else {
    NF_EXPECT(after.kernel == info.kernel + 1 && after.cublaslt.matmuls == 0);
  }
}

// The compute modes against the float64 product of the unrounded inputs, each with its own
// tolerance: fp32 1e-5; tf32 (inputs rounded to a 10-bit mantissa: unit roundoff 2^-11 = 4.9e-4
// per factor, so about 1e-3 per product, averaging down over K) 3e-3; bf16 (7-bit mantissa,
// 2^-8 = 3.9e-3 per factor) 2e-2. Through cuBLASLt the reduced modes must show their rounding
// (tf32 error above 1e-5, bf16 above tf32; checked with the stand-in, reported on a GPU); the
// backend's own kernel computes every mode in fp32.
NF_TEST(cuda_gemm_compute_modes) {
  using nf::cuda::Compute;
  const bool lt = cublaslt_loaded(), stand_in = nf::cuda::gemm_backend_info().cublaslt.stand_in;
  struct Case {
    int64_t M, N, K;
    bool tA, tB;
  };
  for (const Case& c : {Case{64, 72, 256, false, true}, Case{33, 40, 517, true, false}, Case{7, 9, 1024, true, true}}) {
    const std::string name = dims({{"M", c.M}, {"N", c.N}, {"K", c.K}, {"tA", c.tA}, {"tB", c.tB}});
    const Vec a = randn(size_t(c.M * c.K)), b = randn(size_t(c.K * c.N)), bias = randn(size_t(c.N));
    Vec ref(size_t(c.M * c.N)), pre(ref.size());
    nf::ref::gemm<double>(ref.data(), pre.data(), a.data(), b.data(), bias.data(), c.M, c.N, c.K, c.tA, c.tB, 1.0,
                          0.0, Act::none);
    double err[3] = {};
    for (Compute mode : {Compute::fp32, Compute::tf32, Compute::bf16}) {
      DeviceF dA(a), dB(b), dbias(bias), dC(ref.size());
      nf::cuda::GemmDims d;
      d.M = c.M, d.N = c.N, d.K = c.K, d.transA = c.tA, d.transB = c.tB;
      NF_ASSERT_OK(nf::cuda::gemm(dC, nullptr, dA, dB, dbias, d, mode));
      const std::vector<float> got = dC.download();
      err[int(mode)] = rel_err(got, ref);
      const double tol = mode == Compute::fp32 ? kFwdTol : mode == Compute::tf32 ? 3e-3 : 2e-2;
      check_close(std::string("gemm ") + nf::cuda::compute_name(mode), name, got, ref, lt ? tol : kFwdTol);
    }
    std::printf("    %s: relative error fp32 %.2e, tf32 %.2e, bf16 %.2e (%s)\n", name.c_str(), err[0], err[1], err[2],
                lt ? "cuBLASLt" : "own kernel: fp32 in every mode");
    if (stand_in) {  // (the real library "allows" down-conversion: on a GPU the errors are reported only)
      NF_EXPECT(err[1] > 1e-5, name + ": tf32 shows no input rounding");
      NF_EXPECT(err[2] > err[1], name + ": bf16 no coarser than tf32");
    }
  }
}

// linear_backward's halves with what rides on them: dx = (dy W) ∘ act'(preact) for every activation
// (cuBLASLt's DGELU epilogue for gelu_tanh, the product then the elementwise backward otherwise) and
// dW += dyᵀ x with db += Σ dy (BGRADB). With the stand-in the fused ones must have run there; on a
// GPU, whether cuBLASLt took them is printed.
NF_TEST(cuda_linear_fused_backward_parity) {
  const bool stand_in = nf::cuda::gemm_backend_info().cublaslt.stand_in;
  const nf::cuda::GemmBackendInfo first = nf::cuda::gemm_backend_info();
  for (Act act : {Act::gelu_tanh, Act::gelu, Act::relu, Act::silu, Act::none})
    for (int64_t rows : {1, 37}) {
      const int64_t in = 48, out = 40;
      const std::string name = dims({{"rows", rows}, {"in", in}, {"out", out}, {"act", int(act)}});
      const Vec x = randn(size_t(rows * in)), pre = randn(size_t(rows * in), 2.0), W = randn(size_t(out * in), 0.2),
                dy = randn(size_t(rows * out));
      Vec dx(size_t(rows * in)), dW(W.size(), 0.5), db(size_t(out), -0.25);
      nf::ref::linear_backward<double>(dx.data(), dW.data(), db.data(), dy.data(), x.data(), W.data(), rows, in, out);
      if (act != Act::none)
        for (size_t i = 0; i < dx.size(); ++i) dx[i] *= nf::ref::act_derivative(pre[i], act);
      DeviceF d_x(x), d_pre(pre), d_W(W), d_dy(dy), d_dx(dx.size()), d_dW(std::vector<float>(W.size(), 0.5f)),
          d_db(std::vector<float>(db.size(), -0.25f));
      const nf::cuda::LinearDims d{rows, in, out};
      const nf::cuda::GemmBackendInfo before = nf::cuda::gemm_backend_info();
      NF_ASSERT_OK(nf::cuda::linear_backward_input(d_dx, d_dy, d_W, d, d_pre, act));
      NF_ASSERT_OK(nf::cuda::linear_backward_weight(d_dW, d_db, d_dy, d_x, d));
      const nf::cuda::GemmBackendInfo after = nf::cuda::gemm_backend_info();
      check_close("linear fused dx", name, d_dx.download(), dx, kBwdTol);
      check_close("linear fused dW", name, d_dW.download(), dW, kBwdTol);
      check_close("linear fused db", name, d_db.download(), db, kBwdTol);
      if (stand_in) {
        NF_EXPECT(after.cublaslt.matmuls == before.cublaslt.matmuls + 2 && after.kernel == before.kernel, name);
        NF_EXPECT(after.cublaslt.fused == before.cublaslt.fused + 1 + (act == Act::gelu_tanh ? 1 : 0),
                  name + ": BGRADB (and DGELU)");
      }
    }
  const nf::cuda::GemmBackendInfo last = nf::cuda::gemm_backend_info();
  std::printf("    20 products: cuBLASLt %lld (fused epilogues %lld; DGELU and BGRADB would be 12), kernel %lld\n",
              (long long)(last.cublaslt.matmuls - first.cublaslt.matmuls),
              (long long)(last.cublaslt.fused - first.cublaslt.fused), (long long)(last.kernel - first.kernel));
}

// When cuBLASLt offers no algorithm (the stand-in refusing, by NF_CUBLASLT_STANDIN_REFUSE), the
// dispatch runs the plain product through it and the rest as elementwise kernels; when it refuses
// everything, the backend's own kernel runs. The same results either way. (Only with the stand-in.)
NF_TEST(cuda_gemm_cublaslt_fallbacks) {
  if (!nf::cuda::gemm_backend_info().cublaslt.stand_in) {
    std::printf("    skipped: the CPU stand-in for cuBLASLt is not loaded\n");
    return;
  }
  struct Mode {
    const char* refuse;
    bool kernel;  // everything on the backend's kernel
  };
  int64_t shape = 0;  // a new shape per mode: cached algorithms are per shape
  for (const Mode& m : {Mode{"bias,gelu,dgelu,bgradb", false}, Mode{"all", true}}) {
    setenv("NF_CUBLASLT_STANDIN_REFUSE", m.refuse, 1);
    for (Act act : {Act::gelu_tanh, Act::relu, Act::none}) {
      const int64_t rows = 29 + shape, in = 24, out = 32;
      ++shape;
      const std::string name = std::string(m.refuse) + " " + dims({{"rows", rows}, {"act", int(act)}});
      const Vec x = randn(size_t(rows * in)), W = randn(size_t(out * in), 0.2), b = randn(size_t(out)),
                dy = randn(size_t(rows * out)), pre = randn(size_t(rows * in));
      Vec y(size_t(rows * out)), h(y.size()), dx(size_t(rows * in)), dW(W.size(), 0.5), db(b.size(), -0.25);
      nf::ref::gemm<double>(y.data(), h.data(), x.data(), W.data(), b.data(), rows, out, in, false, true, 1.0, 0.0, act);
      nf::ref::linear_backward<double>(dx.data(), dW.data(), db.data(), dy.data(), x.data(), W.data(), rows, in, out);
      for (size_t i = 0; i < dx.size(); ++i) dx[i] *= act == Act::none ? 1.0 : nf::ref::act_derivative(pre[i], act);
      DeviceF d_x(x), d_W(W), d_b(b), d_y(y.size()), d_h(y.size()), d_dy(dy), d_pre(pre), d_dx(dx.size()),
          d_dW(std::vector<float>(W.size(), 0.5f)), d_db(std::vector<float>(b.size(), -0.25f));
      const nf::cuda::LinearDims d{rows, in, out};
      const nf::cuda::GemmBackendInfo before = nf::cuda::gemm_backend_info();
      NF_ASSERT_OK(nf::cuda::linear_forward(d_y, d_h, d_x, d_W, d_b, d, act));
      NF_ASSERT_OK(nf::cuda::linear_backward_input(d_dx, d_dy, d_W, d, d_pre, act));
      NF_ASSERT_OK(nf::cuda::linear_backward_weight(d_dW, d_db, d_dy, d_x, d));
      const nf::cuda::GemmBackendInfo after = nf::cuda::gemm_backend_info();
      check_close("fallback y", name, d_y.download(), y, kFwdTol);
      check_close("fallback preact", name, d_h.download(), h, kFwdTol);
      check_close("fallback dx", name, d_dx.download(), dx, kBwdTol);
      check_close("fallback dW", name, d_dW.download(), dW, kBwdTol);
      check_close("fallback db", name, d_db.download(), db, kBwdTol);
      NF_EXPECT(after.cublaslt.fused == before.cublaslt.fused, name + ": a refused epilogue ran");
      NF_EXPECT(after.cublaslt.unsupported > before.cublaslt.unsupported, name);
      if (m.kernel)
        NF_EXPECT(after.kernel == before.kernel + 3 && after.cublaslt.matmuls == before.cublaslt.matmuls, name);
      else NF_EXPECT(after.cublaslt.matmuls == before.cublaslt.matmuls + 3 && after.kernel == before.kernel, name);
    }
  }
  unsetenv("NF_CUBLASLT_STANDIN_REFUSE");
}

}  // namespace
