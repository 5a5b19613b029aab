// Elementwise ops of the residual stream over flat arrays of n elements: add (the residual add),
// accumulate (merging gradients), dropout (nn.Dropout with Philox masks regenerated in backward),
// a strided row copy (slicing token rows out of a [B, T, D] buffer and back), and the per-channel
// scale of timm's LayerScale over [rows, cols] (rows = B*T, cols = D): y = x · gamma, backward
// dx = dy · gamma, dgamma += Σ_rows dy · x.
// Dropout: element i of the stream (seed, offset) is kept when its uniform number is >= p (see
// native/core/philox.h), and kept values are scaled by 1/(1-p); the same map applied to dout is
// the backward.
#pragma once
#include <cstdint>
#include <string>

#include "../core/status.h"
#include "schema.h"
#include "step_values.h"

namespace nf::ops {

template <class T>
struct Add {
  static constexpr const char* name = "add";
  static constexpr const char* summary = "out = a + b (the residual add); out may be a or b.";
  int64_t n = 0;
  T* out = nullptr;
  const T* a = nullptr;
  const T* b = nullptr;

  template <class R>
  static void fields(R& r, Add& p) {
    r.dim(p.n, "n", 0);
    r.out(p.out, "out", NF_SHAPE(p.n));
    r.in(p.a, "a", NF_SHAPE(p.n));
    r.in(p.b, "b", NF_SHAPE(p.n));
  }
};

template <class T>
struct Accumulate {
  static constexpr const char* name = "accumulate";
  static constexpr const char* summary = "y += x (merging gradients that reach a residual stream along two paths).";
  int64_t n = 0;
  T* y = nullptr;
  const T* x = nullptr;

  template <class R>
  static void fields(R& r, Accumulate& p) {
    r.dim(p.n, "n", 0);
    r.inout(p.y, "y", NF_SHAPE(p.n));
    r.in(p.x, "x", NF_SHAPE(p.n));
  }
};

template <class T>
struct Zero {
  static constexpr const char* name = "zero";
  static constexpr const char* summary =
      "x = 0 (all n elements, whatever they held, NaN included): zeroGrad of a gradient arena in one op.";
  int64_t n = 0;
  T* x = nullptr;

  template <class R>
  static void fields(R& r, Zero& p) {
    r.dim(p.n, "n", 0);
    r.out(p.x, "x", NF_SHAPE(p.n));
  }
};

template <class T>
struct ChannelScaleForward {
  static constexpr const char* name = "channelScaleForward";
  static constexpr const char* summary =
      "y[r, c] = x[r, c] · gamma[c] (timm's LayerScale), x and y [rows, cols], gamma [cols]; y may be x.";
  int64_t rows = 0, cols = 0;
  T* y = nullptr;
  const T* x = nullptr;
  const T* gamma = nullptr;

  template <class R>
  static void fields(R& r, ChannelScaleForward& p) {
    r.dim(p.rows, "rows", 0);
    r.dim(p.cols, "cols");
    r.out(p.y, "y", NF_SHAPE(p.rows, p.cols));
    r.in(p.x, "x", NF_SHAPE(p.rows, p.cols));
    r.in(p.gamma, "gamma", NF_SHAPE(p.cols));
  }
};

template <class T>
struct ChannelScaleBackward {
  static constexpr const char* name = "channelScaleBackward";
  static constexpr const char* summary =
      "dgamma[c] += Σ_r dy[r, c] · x[r, c]; dx = dy · gamma (overwritten; skipped when dx is absent; dx may be dy). "
      "dy, x, dx [rows, cols], gamma and dgamma [cols].";
  int64_t rows = 0, cols = 0;
  T* dx = nullptr;
  T* dgamma = nullptr;
  const T* dy = nullptr;
  const T* x = nullptr;
  const T* gamma = nullptr;

  template <class R>
  static void fields(R& r, ChannelScaleBackward& p) {
    r.dim(p.rows, "rows", 0);
    r.dim(p.cols, "cols");
    r.out(p.dx, "dx", NF_SHAPE(p.rows, p.cols), optional, grad_of("x"));
    r.inout(p.dgamma, "dgamma", NF_SHAPE(p.cols), grad_of("gamma"));
    r.in(p.dy, "dy", NF_SHAPE(p.rows, p.cols), grad_of("y"));
    r.in(p.x, "x", NF_SHAPE(p.rows, p.cols));
    r.in(p.gamma, "gamma", NF_SHAPE(p.cols));
  }
};

struct DropoutDims {
  int64_t n = 0;        // elements
  float p = 0.0f;       // drop probability, in [0, 1); 0 is the identity
  uint64_t seed = 0;    // Philox key
  uint64_t offset = 0;  // Philox stream: one per dropout site and step
  int64_t seed_at = -1;  // the seed from values.table[seed_at] instead (step_values.h)
  StepValues values{};
};

// d with its seed taken from the step values (host memory: the CPU kernels).
inline DropoutDims with_step_values(DropoutDims d) {
  d.seed = static_cast<uint64_t>(step_value(d.values, d.seed_at, static_cast<double>(d.seed)));
  d.seed_at = -1;
  return d;
}

inline Status dropout_check(const char* op, const DropoutDims& d) {
  NF_CHECK(d.n >= 0, op, "n must be non-negative");
  NF_CHECK(d.p >= 0.0f && d.p < 1.0f, op, "p must lie in [0, 1)");
  return Status::Ok();
}

// n, p, seed, offset, seedAt and stepValues. p is used as a float by every backend and precision, so their masks agree.
template <class R>
void dropout_dims(R& r, DropoutDims& d) {
  r.dim(d.n, "n", 0);
  double p = 0.0;
  r.number(p, "p", 0.0, 0.0, 1.0);
  d.p = static_cast<float>(p);
  if (!(d.p < 1.0f)) r.fail("expected a number in [0, 1) for p but received " + std::to_string(p));
  int64_t seed = 0, offset = 0;
  r.dim(seed, "seed", 0, kMaxSafeInteger);
  r.dim(offset, "offset", 0, kMaxSafeInteger);
  d.seed = static_cast<uint64_t>(seed), d.offset = static_cast<uint64_t>(offset);
  step_value_at(r, d.values, d.seed_at, "seedAt");
  step_values_table(r, d.values);
}

template <class T>
struct DropoutForward {
  static constexpr const char* name = "dropoutForward";
  static constexpr const char* summary =
      "out = x * keep / (1 - p), p in [0, 1) (p = 0: a copy); out may be x. seed and offset are integers in "
      "[0, 2^53); use a fresh offset per dropout site and step.";
  DropoutDims d;
  T* out = nullptr;
  const T* x = nullptr;

  template <class R>
  static void fields(R& r, DropoutForward& p) {
    dropout_dims(r, p.d);
    r.out(p.out, "out", NF_SHAPE(p.d.n));
    r.in(p.x, "x", NF_SHAPE(p.d.n));
  }
};

template <class T>
struct DropoutBackward {
  static constexpr const char* name = "dropoutBackward";
  static constexpr const char* summary =
      "dx = dout * keep / (1 - p) with the forward's mask, regenerated from (seed, offset); dx may be dout.";
  DropoutDims d;
  T* dx = nullptr;
  const T* dout = nullptr;

  template <class R>
  static void fields(R& r, DropoutBackward& p) {
    dropout_dims(r, p.d);
    r.out(p.dx, "dx", NF_SHAPE(p.d.n), grad_of("x"));
    r.in(p.dout, "dout", NF_SHAPE(p.d.n), grad_of("out"));
  }
};

template <class T>
struct CopyRows {
  static constexpr const char* name = "copyRows";
  static constexpr const char* summary =
      "dst[dstOffset + r·dstStride + c] = src[srcOffset + r·srcStride + c] for r < rows, c < cols: a block of rows "
      "between two row-major buffers (e.g. the CLS rows out of [B, T, D] tokens). Each array may be longer than "
      "the extent the block spans.";
  int64_t rows = 0, cols = 0, dst_stride = 0, src_stride = 0, dst_offset = 0, src_offset = 0;
  T* dst = nullptr;  // the arrays (the block starts dst_offset, src_offset elements in)
  const T* src = nullptr;

  template <class R>
  static void fields(R& r, CopyRows& p) {
    r.dim(p.rows, "rows", 0);
    r.dim(p.cols, "cols", 0);
    r.dim(p.dst_stride, "dstStride", 0);
    r.dim(p.src_stride, "srcStride", 0);
    r.integer(p.dst_offset, "dstOffset", 0, 0, kMaxDim);
    r.integer(p.src_offset, "srcOffset", 0, 0, kMaxDim);
    if (p.dst_stride < p.cols || p.src_stride < p.cols) r.fail("dstStride and srcStride must be at least cols");
    r.count(NF_SHAPE(p.rows, p.dst_stride));  // the extents below cannot overflow
    r.count(NF_SHAPE(p.rows, p.src_stride));
    const auto extent = [&](int64_t offset, int64_t stride) {
      return p.rows == 0 ? 0 : offset + (p.rows - 1) * stride + p.cols;
    };
    r.inout(p.dst, "dst", Shape::flat(extent(p.dst_offset, p.dst_stride), "[dstOffset + (rows−1)·dstStride + cols]").or_longer());
    r.in(p.src, "src", Shape::flat(extent(p.src_offset, p.src_stride), "[srcOffset + (rows−1)·srcStride + cols]").or_longer());
  }
};

}  // namespace nf::ops
