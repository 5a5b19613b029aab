// Reference GEMM and Linear: triple loops with double accumulators, templated on storage type.
// gemm: C[M,N] = act(alpha op(A) op(B) + beta C + bias[N]); layouts as native/cpu/gemm.h.
#pragma once
#include <cstdint>

#include "../../ops/linear.h"
#include "activation.h"

namespace nf::ref {

// The general form: row strides lda/ldb/ldc and batch strides sA/sB/sC, in elements, as
// cpu::GemmDims (preact is laid out like C).
template <class T>
void gemm_strided(T* C, T* preact, const T* A, const T* B, const T* bias, int64_t M, int64_t N, int64_t K,
                  bool transA, bool transB, double alpha, double beta, Act act, int64_t batch, int64_t lda,
                  int64_t ldb, int64_t ldc, int64_t sA, int64_t sB, int64_t sC) {
  for (int64_t b = 0; b < batch; ++b) {
    const T* Ab = A + b * sA;
    const T* Bb = B + b * sB;
    T* Cb = C + b * sC;
    for (int64_t m = 0; m < M; ++m)
      for (int64_t n = 0; n < N; ++n) {
        double s = 0;
        for (int64_t k = 0; k < K; ++k)
          s += double(transA ? Ab[k * lda + m] : Ab[m * lda + k]) * double(transB ? Bb[n * ldb + k] : Bb[k * ldb + n]);
        double v = alpha * s + (beta != 0 ? beta * double(Cb[m * ldc + n]) : 0.0) + (bias ? double(bias[n]) : 0.0);
        if (preact) preact[b * sC + m * ldc + n] = static_cast<T>(v);
        Cb[m * ldc + n] = static_cast<T>(act_forward(v, act));
      }
  }
}

// Packed operands: A [batch, M, K] (or [batch, K, M] when transA), B [batch, K, N] (or [batch, N, K]).
template <class T>
void gemm(T* C, T* preact, const T* A, const T* B, const T* bias, int64_t M, int64_t N, int64_t K, bool transA,
          bool transB, double alpha, double beta, Act act, int64_t batch = 1) {
  gemm_strided(C, preact, A, B, bias, M, N, K, transA, transB, alpha, beta, act, batch, transA ? M : K,
               transB ? K : N, N, M * K, K * N, M * N);
}

// y[rows,out] = act(x[rows,in] W[out,in]^T + b[out]); preact (optional) gets the value before act
template <class T>
void linear_forward(T* y, const T* x, const T* W, const T* b, int64_t rows, int64_t in, int64_t out,
                    Act act = Act::none, T* preact = nullptr) {
  gemm<T>(y, preact, x, W, b, rows, out, in, false, true, 1.0, 0.0, act);
}

// dx = dy W (overwritten, optional); dW += dy^T x; db += Σ_rows dy (optional)
template <class T>
void linear_backward(T* dx, T* dW, T* db, const T* dy, const T* x, const T* W, int64_t rows, int64_t in, int64_t out) {
  if (dx) gemm<T>(dx, nullptr, dy, W, nullptr, rows, in, out, false, false, 1.0, 0.0, Act::none);
  for (int64_t o = 0; o < out; ++o)
    for (int64_t i = 0; i < in; ++i) {
      double s = 0;
      for (int64_t r = 0; r < rows; ++r) s += double(dy[r * out + o]) * double(x[r * in + i]);
      dW[o * in + i] += static_cast<T>(s);
    }
  if (db)
    for (int64_t o = 0; o < out; ++o) {
      double s = 0;
      for (int64_t r = 0; r < rows; ++r) s += dy[r * out + o];
      db[o] += static_cast<T>(s);
    }
}

// The ops (native/ops/linear.h).
template <class T>
void run(const ops::Gemm<T>& p) {
  ops::GemmDims d = p.d;
  (void)ops::gemm_check(&d);  // fills the packed strides (the binding has checked the rest)
  gemm_strided(p.C, p.preact, p.A, p.B, p.bias, d.M, d.N, d.K, d.transA, d.transB, d.alpha, d.beta, d.act, d.batch,
               d.lda, d.ldb, d.ldc, d.strideA, d.strideB, d.strideC);
}

template <class T>
void run(const ops::LinearForward<T>& p) {
  linear_forward(p.y, p.x, p.W, p.b, p.d.rows, p.d.in_features, p.d.out_features, p.act, p.preact);
}

template <class T>
void run(const ops::LinearBackward<T>& p) {
  linear_backward(p.dx, p.dW, p.db, p.dy, p.x, p.W, p.d.rows, p.d.in_features, p.d.out_features);
}

}  // namespace nf::ref
