// Parity of the CUDA feed-forward network (every activation, with and without dropout) with the
// float64 reference native/cpu/ref/feedforward.h.
#include <type_traits>

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
    bool residual = false;
  };
  // residual: y = fc2(...) + b2 + r, the add riding on fc2's product as its C (beta 1).
  const Case cases[] = {{1, 24, 72, Act::gelu, 0.0f},       {30, 48, 72, Act::gelu, 0.0f, true},
                        {65, 40, 96, Act::relu, 0.25f, true}, {7, 72, 24, Act::gelu_tanh, 0.1f},
                        {9, 20, 33, Act::silu, 0.2f}};
  for (const Case& c : cases) {
    const std::string name = dims({{"rows", c.rows}, {"D", c.D}, {"F", c.F}, {"act", int(c.act)},
                                   {"residual", c.residual}}) + " p=" + std::to_string(c.p);
    const size_t nx = size_t(c.rows * c.D), nh = size_t(c.rows * c.F), nw = size_t(c.D * c.F);
    const Vec x = randn(nx), W1 = randn(nw, 0.2), b1 = randn(size_t(c.F)), W2 = randn(nw, 0.2),
              b2 = randn(size_t(c.D)), dy = randn(nx), r = c.residual ? randn(nx) : Vec();
    const uint64_t seed = 42, offset = 7;
    const nf::ops::FeedForwardDims d{c.rows, c.D, c.F, c.act, c.p, seed, offset};
    // The same call on either precision's buffers.
    const auto forward = [&d, &c](auto* y, auto* h, auto* a, const auto* x, const auto* W1, const auto* b1,
                                  const auto* W2, const auto* b2, const auto* r) {
      nf::ops::FeedForwardForward<std::remove_pointer_t<decltype(y)>> f;
      f.d = d, f.y = y, f.h = h, f.a = a, f.x = x, f.W1 = W1, f.b1 = b1, f.W2 = W2, f.b2 = b2;
      if (c.residual) f.residual = r;
      return f;
    };
    const auto backward = [&d](auto* dx, auto* dW1, auto* db1, auto* dW2, auto* db2, const auto* dy, const auto* x,
                               const auto* h, const auto* a, const auto* W1, const auto* W2) {
      nf::ops::FeedForwardBackward<std::remove_pointer_t<decltype(dx)>> b;
      b.d = d, b.dx = dx, b.dW1 = dW1, b.db1 = db1, b.dW2 = dW2, b.db2 = db2, b.dy = dy, b.x = x, b.h = h, b.a = a;
      b.W1 = W1, b.W2 = W2;
      return b;
    };
    Vec y(nx), h(nh), a(nh), dx(nx), dW1(nw, 0.5), db1(size_t(c.F), 0.5), dW2(nw, -0.5), db2(size_t(c.D), -0.5);
    nf::ref::run(forward(y.data(), h.data(), a.data(), x.data(), W1.data(), b1.data(), W2.data(), b2.data(), r.data()));
    nf::ref::run(backward(dx.data(), dW1.data(), db1.data(), dW2.data(), db2.data(), dy.data(), x.data(), h.data(),
                          a.data(), W1.data(), W2.data()));
    DeviceF d_r(c.residual ? r : Vec(1)), d_x(x), d_W1(W1), d_b1(b1), d_W2(W2), d_b2(b2), d_dy(dy), d_y(nx), d_h(nh), d_a(nh), d_dx(nx),
        d_dW1(std::vector<float>(nw, 0.5f)), d_db1(std::vector<float>(size_t(c.F), 0.5f)),
        d_dW2(std::vector<float>(nw, -0.5f)), d_db2(std::vector<float>(size_t(c.D), -0.5f));
    NF_ASSERT_OK(nf::cuda::run(forward(d_y.get(), d_h.get(), d_a.get(), d_x.get(), d_W1.get(), d_b1.get(), d_W2.get(),
                                       d_b2.get(), d_r.get())));
    check_close("feedforward y", name, d_y.download(), y, kFwdTol);
    check_close("feedforward h", name, d_h.download(), h, kFwdTol);
    check_close("feedforward a", name, d_a.download(), a, kFwdTol);
    NF_ASSERT_OK(nf::cuda::run(backward(d_dx.get(), d_dW1.get(), d_db1.get(), d_dW2.get(), d_db2.get(), d_dy.get(),
                                        d_x.get(), d_h.get(), d_a.get(), d_W1.get(), d_W2.get())));
    check_close("feedforward dx", name, d_dx.download(), dx, kBwdTol);
    check_close("feedforward dW1", name, d_dW1.download(), dW1, kBwdTol);
    check_close("feedforward db1", name, d_db1.download(), db1, kBwdTol);
    check_close("feedforward dW2", name, d_dW2.download(), dW2, kBwdTol);
    check_close("feedforward db2", name, d_db2.download(), db2, kBwdTol);
  }
}

}  // namespace
