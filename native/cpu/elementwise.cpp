// Elementwise ops: add, accumulate, dropout.
// Math: add: out = a + b; accumulate: y += x (the same kernel with out = a = y);
//   dropout: out_i = x_i m_i, m_i = 1/(1-p) if Philox keeps element i of stream (seed, offset),
//   else 0; its backward is the same map applied to dout (the mask is regenerated, never stored).
// Layout: flat arrays of n floats. Element i of a dropout stream takes lane i % 4 of the Philox
//   block for counter i / 4 (core/philox.h), so one block serves four consecutive elements.
// Dimension key: n elements (B*T*D for activations).
// Threads split the elements; dropout works in tiles of 64 (16 Philox blocks, a whole number of
// vectors), turning the tile's mask into a small buffer of factors, then multiplying vectorised.
#include "elementwise.h"

#include <algorithm>
#include <cstring>

#include "../core/philox.h"
#include "../core/threadpool.h"
#include "isa.h"

namespace nf::cpu::NF_ISA_NS {
#include "simd.h"

void add(float* out, const float* a, const float* b, int64_t n) {
  parallel_for(n, 1 << 14, [&](int64_t i0, int64_t i1) {
    int64_t i = i0;
    for (; i + W <= i1; i += W) vstore(out + i, vadd(vload(a + i), vload(b + i)));
    for (; i < i1; ++i) out[i] = a[i] + b[i];
  });
}

void dropout(float* out, const float* x, const DropoutDims& d) {
  constexpr int64_t kTile = 64;
  const float keep_scale = 1.0f / (1.0f - d.p);
  parallel_for((d.n + kTile - 1) / kTile, 64, [&](int64_t t0, int64_t t1) {
    float m[kTile];
    for (int64_t tile = t0; tile < t1; ++tile) {
      const int64_t i0 = tile * kTile, len = std::min(kTile, d.n - i0);
      for (int64_t g = 0; g < kTile / 4; ++g) {
        const PhiloxBlock blk = philox4x32_10(i0 / 4 + g, d.offset, d.seed);
        for (int k = 0; k < 4; ++k) m[4 * g + k] = philox_bits_to_uniform(blk.v[k]) >= d.p ? keep_scale : 0.0f;
      }
      const float* xs = x + i0;
      float* os = out + i0;
      int64_t i = 0;
      for (; i + W <= len; i += W) vstore(os + i, vmul(vload(xs + i), vload(m + i)));
      for (; i < len; ++i) os[i] = xs[i] * m[i];
    }
  });
}

}  // namespace nf::cpu::NF_ISA_NS

#ifdef NF_ISA_PRIMARY
namespace nf::cpu {

Status add(float* out, const float* a, const float* b, int64_t n) {
  NF_CHECK(n >= 0, "add", "n must be non-negative");
  NF_DISPATCH(add, out, a, b, n);
  return Status::Ok();
}

Status accumulate(float* y, const float* x, int64_t n) {
  NF_CHECK(n >= 0, "accumulate", "n must be non-negative");
  NF_DISPATCH(add, y, y, x, n);
  return Status::Ok();
}

static Status dropout_run(const char* op, float* out, const float* x, const DropoutDims& d) {
  NF_CHECK(d.n >= 0, op, "n must be non-negative");
  NF_CHECK(d.p >= 0.0f && d.p < 1.0f, op, "p must lie in [0, 1)");
  if (d.p == 0.0f) {
    if (out != x && d.n > 0) std::memmove(out, x, sizeof(float) * d.n);
    return Status::Ok();
  }
  NF_DISPATCH(dropout, out, x, d);
  return Status::Ok();
}

Status dropout_forward(float* out, const float* x, DropoutDims d) { return dropout_run("dropout_forward", out, x, d); }

Status dropout_backward(float* dx, const float* dout, DropoutDims d) {
  return dropout_run("dropout_backward", dx, dout, d);
}

}  // namespace nf::cpu
#endif
