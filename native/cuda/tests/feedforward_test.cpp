// Parity of the CUDA feed-forward network (every activation, with and without dropout) with the
// float64 reference native/cpu/ref/feedforward.h.
#include "../../cpu/ref/feedforward.h"
#include "../feedforward.h"
#include "parity.h"

namespace {

using namespace nf::test;
using nf::cuda::Act;

NF_TEST(cuda_feedforward_parity) {
  struct Case {
    int64_t rows, D, F;
    Act act;
    float p;
  };
  const Case cases[] = {{1, 24, 72, Act::gelu, 0.0f}, {30, 48, 72, Act::gelu, 0.0f}, {65, 40, 96, Act::relu, 0.25f},
                        {7, 72, 24, Act::gelu_tanh, 0.1f}};
  for (const Case& c : cases) {
    const std::string name = dims({{"rows", c.rows}, {"D", c.D}, {"F", c.F}, {"act", int(c.act)}}) +
                             " p=" + std::to_string(c.p);
    const size_t nx = size_t(c.rows * c.D), nh = size_t(c.rows * c.F), nw = size_t(c.D * c.F);
    const Vec x = randn(nx), W1 = randn(nw, 0.2), b1 = randn(size_t(c.F)), W2 = randn(nw, 0.2),
              b2 = randn(size_t(c.D)), dy = randn(nx);
    const uint64_t seed = 42, offset = 7;
    Vec y(nx), h(nh), a(nh), dx(nx), dW1(nw, 0.5), db1(size_t(c.F), 0.5), dW2(nw, -0.5), db2(size_t(c.D), -0.5);
    nf::ref::feedforward_forward<double>(y.data(), h.data(), a.data(), x.data(), W1.data(), b1.data(), W2.data(),
                                         b2.data(), c.rows, c.D, c.F, int(c.act), c.p, seed, offset);
    nf::ref::feedforward_backward<double>(dx.data(), dW1.data(), db1.data(), dW2.data(), db2.data(), dy.data(),
                                          x.data(), h.data(), a.data(), W1.data(), W2.data(), c.rows, c.D, c.F,
                                          int(c.act), c.p, seed, offset);
    DeviceF d_x(x), d_W1(W1), d_b1(b1), d_W2(W2), d_b2(b2), d_dy(dy), d_y(nx), d_h(nh), d_a(nh), d_dx(nx),
        d_dW1(std::vector<float>(nw, 0.5f)), d_db1(std::vector<float>(size_t(c.F), 0.5f)),
        d_dW2(std::vector<float>(nw, -0.5f)), d_db2(std::vector<float>(size_t(c.D), -0.5f));
    const nf::cuda::FeedForwardDims d{c.rows, c.D, c.F, c.act, c.p, seed, offset};
    NF_ASSERT_OK(nf::cuda::feedforward_forward(d_y, d_h, d_a, d_x, d_W1, d_b1, d_W2, d_b2, d));
    check_close("feedforward y", name, d_y.download(), y, kFwdTol);
    check_close("feedforward h", name, d_h.download(), h, kFwdTol);
    check_close("feedforward a", name, d_a.download(), a, kFwdTol);
    NF_ASSERT_OK(nf::cuda::feedforward_backward(d_dx, d_dW1, d_db1, d_dW2, d_db2, d_dy, d_x, d_h, d_a, d_W1, d_W2, d));
    check_close("feedforward dx", name, d_dx.download(), dx, kBwdTol);
    check_close("feedforward dW1", name, d_dW1.download(), dW1, kBwdTol);
    check_close("feedforward db1", name, d_db1.download(), db1, kBwdTol);
    check_close("feedforward dW2", name, d_dW2.download(), dW2, kBwdTol);
    check_close("feedforward db2", name, d_db2.download(), db2, kBwdTol);
  }
}

}  // namespace
