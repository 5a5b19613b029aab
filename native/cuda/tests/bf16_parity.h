// Helpers of the parity tests of bf16 storage (precision 'bf16'): values rounded to bfloat16 as the
// kernels store them, and bf16 device arrays read back as floats.
#pragma once
#include <cstring>

#include "../../ops/schema.h"
#include "parity.h"

namespace nf::test {

using ops::bf16;

// v rounded to bfloat16 (nearest even), as bits and as the double it stands for.
inline bf16 to_bf16(double v) {
  const float f = float(v);
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return bf16{uint16_t((u + 0x7fffu + ((u >> 16) & 1u)) >> 16)};
}
inline double value(bf16 b) {
  const uint32_t u = uint32_t(b.bits) << 16;
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}
inline std::vector<bf16> bits(const Vec& v) {
  std::vector<bf16> out(v.size());
  for (size_t i = 0; i < v.size(); ++i) out[i] = to_bf16(v[i]);
  return out;
}
// Normal samples times scale, rounded to bf16 (what a bf16 activation holds).
inline Vec randb(size_t n, double scale = 1.0) {
  Vec v = randn(n, scale);
  for (double& x : v) x = value(to_bf16(x));
  return v;
}
using DeviceB = Device<bf16>;
// A bf16 device array's values as floats (for check_close).
inline std::vector<float> floats(const DeviceB& d) {
  std::vector<float> out;
  for (bf16 b : d.download()) out.push_back(float(value(b)));
  return out;
}

}  // namespace nf::test
