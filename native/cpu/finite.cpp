// Finite scan: the first NaN or ±Inf of a float array.
// Math: a float is non-finite exactly when its 8 exponent bits are all ones (0x7f800000 under the
//   mask 0x7f800000), whatever its sign and mantissa; comparing bits needs no floating-point
//   compare, so it works the same with any rounding or denormal mode.
// Layout: a flat array of n floats.
// Threads split the array into blocks of 16K floats claimed in order; a block that starts past
// a non-finite value already found is skipped, and the smallest index found wins (atomic min).
#include "finite.h"

#include <algorithm>
#include <atomic>
#include <cstring>

#include "../core/threadpool.h"
#include "isa.h"

namespace nf::cpu::NF_ISA_NS {

namespace {

constexpr uint32_t kExponent = 0x7f800000u;

bool nonfinite(float v) {
  uint32_t u;
  std::memcpy(&u, &v, sizeof u);
  return (u & kExponent) == kExponent;
}

}  // namespace

int64_t first_nonfinite_range(const float* x, int64_t begin, int64_t end) {
  int64_t i = begin;
#if NF_AVX512
  const __m512i e = _mm512_set1_epi32(static_cast<int>(kExponent));
  for (; i + 16 <= end; i += 16) {
    const __m512i v = _mm512_and_si512(_mm512_loadu_si512(x + i), e);
    const __mmask16 m = _mm512_cmpeq_epi32_mask(v, e);
    if (m) return i + __builtin_ctz(m);
  }
#elif NF_ISA == 1
  const __m256i e = _mm256_set1_epi32(static_cast<int>(kExponent));
  for (; i + 8 <= end; i += 8) {
    const __m256i v = _mm256_and_si256(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(x + i)), e);
    const int m = _mm256_movemask_ps(_mm256_castsi256_ps(_mm256_cmpeq_epi32(v, e)));
    if (m) return i + __builtin_ctz(static_cast<unsigned>(m));
  }
#elif NF_ISA == 3
  const uint32x4_t e = vdupq_n_u32(kExponent);
  for (; i + 4 <= end; i += 4) {
    const uint32x4_t v = vandq_u32(vreinterpretq_u32_f32(vld1q_f32(x + i)), e);
    if (vmaxvq_u32(vceqq_u32(v, e))) break;  // one of these 4: the loop below finds which
  }
#endif
  for (; i < end; ++i)
    if (nonfinite(x[i])) return i;
  return -1;
}

}  // namespace nf::cpu::NF_ISA_NS

#ifdef NF_ISA_PRIMARY
namespace nf::cpu {

Status first_nonfinite(int64_t* first, const float* x, int64_t n) {
  NF_CHECK(n >= 0, "first_nonfinite", "n must be non-negative");
  constexpr int64_t kBlock = int64_t(1) << 14;
  std::atomic<int64_t> found{n};
  parallel_for((n + kBlock - 1) / kBlock, 4, [&](int64_t b0, int64_t b1) {
    for (int64_t b = b0; b < b1; ++b) {
      const int64_t begin = b * kBlock;
      if (begin >= found.load(std::memory_order_relaxed)) return;  // nothing earlier can be in this chunk
      const int64_t end = std::min(n, begin + kBlock);
      const int64_t i = NF_DISPATCH(first_nonfinite_range, x, begin, end);
      if (i >= 0) {
        int64_t prev = found.load(std::memory_order_relaxed);
        while (i < prev && !found.compare_exchange_weak(prev, i, std::memory_order_relaxed)) {
        }
        return;
      }
    }
  });
  *first = found.load() == n ? -1 : found.load();
  return Status::Ok();
}

Status run(const ops::FirstNonFinite<float>& p) {
  int64_t first = -1;
  NF_TRY(first_nonfinite(&first, p.x, p.n));
  *p.index = static_cast<double>(first);
  return Status::Ok();
}

}  // namespace nf::cpu
#endif
#include "isa_end.h"
