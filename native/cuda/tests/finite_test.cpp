// The CUDA finite scan (firstNonFinite) against the reference (native/cpu/ref/finite.h): NaN, ±Inf
// and nothing at positions across blocks and grid strides, the first of several, and n = 0.
#include <cmath>
#include <limits>

#include "../../cpu/ref/finite.h"
#include "../finite.h"
#include "parity.h"

namespace {

using namespace nf::test;

NF_TEST(cuda_first_nonfinite_parity) {
  const float inf = std::numeric_limits<float>::infinity(), nan = std::numeric_limits<float>::quiet_NaN();
  struct Case {
    int64_t n;
    std::vector<std::pair<int64_t, float>> bad;  // positions and values to plant
  };
  // 262144 = 1024 blocks of 256 threads (the largest grid): 300001 makes threads take a second
  // stride, so a later hit in one thread's slice must not hide an earlier one in another's.
  const Case cases[] = {
      {0, {}},
      {1, {}},
      {1, {{0, nan}}},
      {1000, {{999, -inf}}},
      {1000, {{37, nan}, {5, inf}, {900, -inf}}},
      {4099, {{4098, inf}, {256, nan}}},
      {300001, {}},
      {300001, {{299999, nan}, {262145, inf}}},
      {300001, {{262143, -inf}, {262144, nan}, {1, -nan}}},
      {70000, {{65536, -nan}}},
  };
  for (const Case& c : cases) {
    std::vector<float> x = to_float(randn(size_t(c.n), 1e30));  // large but finite
    for (const auto& [i, v] : c.bad) x[size_t(i)] = v;
    const int64_t want = nf::ref::first_nonfinite(x.data(), c.n);
    Device<float> d_x(x);
    Device<double> d_index(std::vector<double>{-7.0});
    NF_ASSERT_OK(nf::cuda::first_nonfinite(d_index, d_x, c.n));
    const double got = d_index.download()[0];
    NF_EXPECT(got == double(want), dims({{"n", c.n}, {"want", want}, {"got", int64_t(got)}}));
  }
  // The op's params, as the binding fills them.
  Device<float> d_x(std::vector<float>{1.0f, 2.0f, inf});
  Device<double> d_index(1);
  nf::ops::FirstNonFinite<float> p;
  p.n = 3, p.x = d_x, p.index = d_index;
  NF_ASSERT_OK(nf::cuda::run(p));
  NF_EXPECT(d_index.download()[0] == 2.0);
  NF_EXPECT(!nf::cuda::first_nonfinite(d_index, d_x, -1).ok(), "n < 0");
}

}  // namespace
