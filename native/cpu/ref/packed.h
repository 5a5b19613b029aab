// Reference packWeights: the definition of the prepacked layout (native/ops/packed.h), element by
// element, for the panel shape (NR, KC) of the active CPU kernel variant, which the layout depends on.
// It defines the fp32 panels (precision 'fp32' and 'tf32'); the bf16 packings are held to the
// products that read them (test/prepack_ops.test.ts).
// The header words are written as the float values of their bit patterns (exactly representable
// in T = double), so a float32 packing and this one compare equal value by value.
#pragma once
#include <algorithm>
#include <cstdint>
#include <cstring>

#include "../../ops/packed.h"
#include "../packed.h"

namespace nf::ref {

template <class T>
void run(const ops::PackWeights<T>& p) {
  const Isa isa = active_isa();
  const cpu::PanelShape s = cpu::panel_shape(isa);
  const int64_t N = p.N, K = p.K, nr = s.nr, Np = ops::packed_width(N);
  const int32_t words[] = {ops::kPackedMagic, static_cast<int32_t>(isa), s.nr, static_cast<int32_t>(s.kc_max),
                           static_cast<int32_t>(N), static_cast<int32_t>(K)};
  for (int64_t i = 0; i < ops::kPackedHeader; ++i) {
    float f = 0.0f;
    if (i < int64_t(std::size(words))) std::memcpy(&f, &words[i], sizeof f);
    p.packed[i] = static_cast<T>(f);
  }
  // K in ⌈K / KC⌉ blocks as even as possible with kc even: kc rows each, the last block what is left.
  const int64_t blocks = std::max<int64_t>(1, (K + s.kc_max - 1) / s.kc_max), kc = ((K + blocks - 1) / blocks + 1) / 2 * 2;
  T* panels = p.packed + ops::kPackedHeader;
  for (int64_t k = 0; k < K; ++k) {
    const int64_t k0 = k / kc * kc, depth = std::min(kc, K - k0);
    for (int64_t n = 0; n < Np; ++n)
      panels[k0 * Np + n / nr * depth * nr + (k - k0) * nr + n % nr] = n < N ? p.W[n * K + k] : T(0);
  }
}

}  // namespace nf::ref
