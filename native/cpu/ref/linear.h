// Reference GEMM and Linear: triple loops with double accumulators, templated on storage type.
// gemm: C[M,N] = act(alpha op(A) op(B) + beta C + bias[N]); layouts as native/cpu/gemm.h.
#pragma once
#include <cstdint>

#include "activation.h"

namespace nf::ref {

template <class T>
void gemm(T* C, T* preact, const T* A, const T* B, const T* bias, int64_t M, int64_t N, int64_t K, bool transA,
          bool transB, double alpha, double beta, int act, int64_t batch = 1) {
  for (int64_t b = 0; b < batch; ++b) {
    const T* Ab = A + b * M * K;
    const T* Bb = B + b * K * N;
    T* Cb = C + b * M * N;
    for (int64_t m = 0; m < M; ++m)
      for (int64_t n = 0; n < N; ++n) {
        double s = 0;
        for (int64_t k = 0; k < K; ++k)
          s += double(transA ? Ab[k * M + m] : Ab[m * K + k]) * double(transB ? Bb[n * K + k] : Bb[k * N + n]);
        double v = alpha * s + (beta != 0 ? beta * double(Cb[m * N + n]) : 0.0) + (bias ? double(bias[n]) : 0.0);
        if (preact) preact[b * M * N + m * N + n] = static_cast<T>(v);
        Cb[m * N + n] = static_cast<T>(act_forward(v, act));
      }
  }
}

// y[rows,out] = x[rows,in] W[out,in]^T + b[out]
template <class T>
void linear_forward(T* y, const T* x, const T* W, const T* b, int64_t rows, int64_t in, int64_t out) {
  gemm<T>(y, nullptr, x, W, b, rows, out, in, false, true, 1.0, 0.0, 0);
}

// dx = dy W (overwritten, optional); dW += dy^T x; db += Σ_rows dy (optional)
template <class T>
void linear_backward(T* dx, T* dW, T* db, const T* dy, const T* x, const T* W, int64_t rows, int64_t in, int64_t out) {
  if (dx) gemm<T>(dx, nullptr, dy, W, nullptr, rows, in, out, false, false, 1.0, 0.0, 0);
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

}  // namespace nf::ref
