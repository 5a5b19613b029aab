// GEMM kernels. C[M,N] = act(alpha * op(A)[M,K] op(B)[K,N] + beta * C + bias[N]).
// Layout: row-major with leading dimensions; see gemm.h for the dimension key.
// Structure: (to be tuned in the speed issue) B is packed into NR-wide column panels, the
// micro-kernel keeps an MR x NR tile of C in registers, threads split the M x N tile grid.
#include "gemm.h"

#include <algorithm>
#include <cstring>

#include "../core/allocator.h"
#include "../core/threadpool.h"
#include "isa.h"

namespace nf::cpu::NF_ISA_NS {
#include "simd.h"
#include "activation_inl.h"

namespace {

// One [rows of C] x [all N] strip for a single batch entry: straightforward vectorised loop over
// N with K outer. Placeholder until the packed micro-kernel lands.
void gemm_rows(float* C, float* preact, const float* A, const float* B, const float* bias,
               const GemmDims& d, int64_t m0, int64_t m1, float* brow) {
  for (int64_t m = m0; m < m1; ++m) {
    float* c = C + m * d.ldc;
    float* acc = brow;  // N floats
    std::memset(acc, 0, sizeof(float) * d.N);
    for (int64_t k = 0; k < d.K; ++k) {
      float a = d.transA ? A[k * d.lda + m] : A[m * d.lda + k];
      if (a == 0.0f) continue;
      vf va = vset1(a);
      if (!d.transB) {
        const float* b = B + k * d.ldb;
        int64_t n = 0;
        for (; n + W <= d.N; n += W) vstore(acc + n, vfma(va, vload(b + n), vload(acc + n)));
        for (; n < d.N; ++n) acc[n] += a * b[n];
      } else {
        for (int64_t n = 0; n < d.N; ++n) acc[n] += a * B[n * d.ldb + k];
      }
    }
    for (int64_t n = 0; n < d.N; ++n) {
      float v = d.alpha * acc[n];
      if (d.beta != 0.0f) v += d.beta * c[n];
      if (bias) v += bias[n];
      acc[n] = v;
    }
    if (preact) std::memcpy(preact + m * d.ldc, acc, sizeof(float) * d.N);
    act_forward_n(c, acc, d.N, d.act);
  }
}

}  // namespace

void gemm(float* C, float* preact, const float* A, const float* B, const float* bias, const GemmDims& d) {
  int64_t row_blocks = (d.M + 7) / 8;
  parallel_for(d.batch * row_blocks, [&](int64_t t0, int64_t t1) {
    float* brow = static_cast<float*>(thread_scratch(0, sizeof(float) * d.N));
    for (int64_t t = t0; t < t1; ++t) {
      int64_t b = t / row_blocks, rb = t % row_blocks;
      int64_t m0 = rb * 8, m1 = std::min(d.M, m0 + 8);
      gemm_rows(C + b * d.strideC, preact ? preact + b * d.strideC : nullptr, A + b * d.strideA,
                B + b * d.strideB, bias, d, m0, m1, brow);
    }
  });
}

}  // namespace nf::cpu::NF_ISA_NS

#ifdef NF_ISA_PRIMARY
namespace nf::cpu {

Status gemm_check(GemmDims* d) {
  NF_CHECK(d->M >= 0 && d->N >= 0 && d->K >= 0, "gemm", "M, N and K must be non-negative");
  NF_CHECK(d->batch >= 1, "gemm", "batch must be at least 1");
  if (d->lda == 0) d->lda = d->transA ? d->M : d->K;
  if (d->ldb == 0) d->ldb = d->transB ? d->K : d->N;
  if (d->ldc == 0) d->ldc = d->N;
  NF_CHECK(d->lda >= (d->transA ? d->M : d->K), "gemm", "lda is smaller than a row of A");
  NF_CHECK(d->ldb >= (d->transB ? d->K : d->N), "gemm", "ldb is smaller than a row of B");
  NF_CHECK(d->ldc >= d->N, "gemm", "ldc is smaller than a row of C");
  return Status::Ok();
}

Status gemm(float* C, float* preact, const float* A, const float* B, const float* bias, GemmDims d) {
  NF_TRY(gemm_check(&d));
  if (d.M == 0 || d.N == 0) return Status::Ok();
  NF_DISPATCH(gemm, C, preact, A, B, bias, d);
  return Status::Ok();
}

}  // namespace nf::cpu
#endif
