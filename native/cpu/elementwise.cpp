// Elementwise ops: add, accumulate, zero, dropout, the activations, the per-channel scale; and the
// conversion between float32 and bfloat16 storage (Tensor.cast on the CPU).
// Math: add: out = a + b; accumulate: y += x (the same kernel with out = a = y); zero: x = 0;
//   dropout: out_i = x_i m_i, m_i = 1/(1-p) if Philox keeps element i of stream (seed, offset),
//   else 0; its backward is the same map applied to dout (the mask is regenerated, never stored);
//   activation: y = act(x), dx = dy act'(x) (activation_inl.h); channel scale (timm's LayerScale):
//   y[r, c] = x[r, c] gamma[c], backward dgamma[c] += Σ_r dy[r, c] x[r, c] (linear.cpp's column
//   sums), then dx = dy gamma (the forward's kernel).
// Layout: flat arrays of n floats; the channel scale's are [rows, cols] row-major, gamma [cols].
//   Element i of a dropout stream takes lane i % 4 of the Philox block for counter i / 4
//   (core/philox.h), so one block serves four consecutive elements.
// Dimension key: n elements (B*T*D for activations); rows = B*T, cols = D.
// Threads split the elements (the channel scale: its rows); dropout works in tiles of 64 (16 Philox
// blocks, a whole number of vectors), turning the tile's mask into a small buffer of factors, then
// multiplying vectorised.
#include "elementwise.h"

#include <algorithm>
#include <cstring>
#include <type_traits>

#include "../core/philox.h"
#include "../core/threadpool.h"
#include "isa.h"
#include "linear.h"

namespace nf::cpu::NF_ISA_NS {
#include "simd.h"
#include "activation_inl.h"

// Chunks of elementwise work worth a thread (~64 KB of floats).
constexpr int64_t kGrain = 1 << 14;

void convert_bf16(void* dst, const void* src, int64_t n, bool to_bf16) {
  parallel_for(n, kGrain, [&](int64_t i0, int64_t i1) {
    if (to_bf16) narrow_bf16_n(static_cast<uint16_t*>(dst) + i0, static_cast<const float*>(src) + i0, i1 - i0);
    else widen_bf16_n(static_cast<float*>(dst) + i0, static_cast<const uint16_t*>(src) + i0, i1 - i0);
  });
}

void add(float* out, const float* a, const float* b, int64_t n) {
  parallel_for(n, kGrain, [&](int64_t i0, int64_t i1) {
    int64_t i = i0;
    for (; i + W <= i1; i += W) vstore(out + i, vadd(vload(a + i), vload(b + i)));
    for (; i < i1; ++i) out[i] = a[i] + b[i];
  });
}

void activation_forward(float* y, const float* x, int64_t n, Act act) {
  parallel_for(n, kGrain, [&](int64_t i0, int64_t i1) { act_forward_n(y + i0, x + i0, i1 - i0, act); });
}

void activation_backward(float* dx, const float* dy, const float* x, int64_t n, Act act) {
  parallel_for(n, kGrain, [&](int64_t i0, int64_t i1) { act_backward_n(dx + i0, dy + i0, x + i0, i1 - i0, act); });
}

void channel_scale(float* y, const float* x, const float* gamma, int64_t rows, int64_t cols) {
  parallel_for(rows, std::max<int64_t>(1, kGrain / cols), [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r) {
      const float* xr = x + r * cols;
      float* yr = y + r * cols;
      int64_t c = 0;
      for (; c + W <= cols; c += W) vstore(yr + c, vmul(vload(xr + c), vload(gamma + c)));
      if (c < cols) {
        const int t = int(cols - c);
        vstore_n(yr + c, vmul(vload_n(xr + c, t), vload_n(gamma + c, t)), t);
      }
    }
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

void convert_bf16_storage(void* dst, const void* src, int64_t n, bool to_bf16) {
  NF_DISPATCH(convert_bf16, dst, src, n, to_bf16);
}

Status run(const ops::Add<float>& p) {
  NF_CHECK(p.n >= 0, "add", "n must be non-negative");
  NF_DISPATCH(add, p.out, p.a, p.b, p.n);
  return Status::Ok();
}

Status run(const ops::Accumulate<float>& p) {
  NF_CHECK(p.n >= 0, "accumulate", "n must be non-negative");
  NF_DISPATCH(add, p.y, p.y, p.x, p.n);
  return Status::Ok();
}

Status run(const ops::ActivationForward<float>& p) {
  NF_CHECK(p.n >= 0, "activation_forward", "n must be non-negative");
  NF_DISPATCH(activation_forward, p.y, p.x, p.n, p.act);
  return Status::Ok();
}

Status run(const ops::ActivationBackward<float>& p) {
  NF_CHECK(p.n >= 0, "activation_backward", "n must be non-negative");
  NF_DISPATCH(activation_backward, p.dx, p.dy, p.x, p.n, p.act);
  return Status::Ok();
}

static Status channel_scale_check(const char* op, int64_t rows, int64_t cols) {
  NF_CHECK(rows >= 0 && cols >= 1, op, "rows must be non-negative and cols at least 1");
  return Status::Ok();
}

Status run(const ops::ChannelScaleForward<float>& p) {
  NF_TRY(channel_scale_check("channel_scale_forward", p.rows, p.cols));
  NF_DISPATCH(channel_scale, p.y, p.x, p.gamma, p.rows, p.cols);
  return Status::Ok();
}

Status run(const ops::ChannelScaleBackward<float>& p) {
  NF_TRY(channel_scale_check("channel_scale_backward", p.rows, p.cols));
  NF_DISPATCH(bias_grad, p.dgamma, p.dy, p.rows, p.cols, p.x);  // before dx, which may be dy
  if (p.dx) NF_DISPATCH(channel_scale, p.dx, p.dy, p.gamma, p.rows, p.cols);
  return Status::Ok();
}

Status run(const ops::Zero<float>& p) {
  NF_CHECK(p.n >= 0, "zero", "n must be non-negative");
  // Memory-bound: both threads write halves (a 57M-float gradient arena is 228 MB).
  parallel_for(p.n, 1 << 16, [&](int64_t i0, int64_t i1) { std::memset(p.x + i0, 0, sizeof(float) * size_t(i1 - i0)); });
  return Status::Ok();
}

static Status dropout_run(const char* op, float* out, const float* x, const DropoutDims& dims) {
  const DropoutDims d = ops::with_step_values(dims);
  NF_TRY(ops::dropout_check(op, d));
  if (d.p == 0.0f) {
    if (out != x && d.n > 0) std::memmove(out, x, sizeof(float) * d.n);
    return Status::Ok();
  }
  NF_DISPATCH(dropout, out, x, d);
  return Status::Ok();
}

Status run(const ops::DropoutForward<float>& p) { return dropout_run("dropout_forward", p.out, p.x, p.d); }

Status run(const ops::DropoutBackward<float>& p) { return dropout_run("dropout_backward", p.dx, p.dout, p.d); }

Status run(const ops::CopyRows<float>& p) {
  NF_CHECK(p.rows >= 0 && p.cols >= 0, "copy_rows", "rows and cols must be non-negative");
  NF_CHECK(p.dst_stride >= p.cols && p.src_stride >= p.cols, "copy_rows", "strides must be at least cols");
  float* dst = p.dst + p.dst_offset;
  const float* src = p.src + p.src_offset;
  for (int64_t r = 0; r < p.rows; ++r)  // a few rows (e.g. the CLS token of each image): no threads
    std::memmove(dst + r * p.dst_stride, src + r * p.src_stride, sizeof(float) * p.cols);
  return Status::Ok();
}

}  // namespace nf::cpu
#endif
#include "isa_end.h"
