// The multi-tensor AdamW (native/cuda/optim.cu, the adamwMultiStep op): lists of awkward sizes (n = 0,
// 1, 7, 4097, tensors longer than a chunk), unaligned tensors (the scalar path) and lists longer than
// one launch's table, against the float64 reference (the CPU backend's twin, native/cpu/ref/optim.h);
// the bf16 copy equal to the new master rounded to nearest even; the same results bit for bit one
// tensor at a time, at any chunk size, aligned or not, and with the step and lr read from the step
// values (a CUDA graph's replays).
#include <cstring>
#include <memory>

#include "../bf16.cuh"
#include "../optim.h"
#include "../../cpu/ref/optim.h"
#include "parity.h"

namespace {

using namespace nf::test;
using nf::ops::bf16;

// One tensor's device arrays (param, grad, exp_avg, exp_avg_sq, a bf16 copy), at `offset` floats into
// their allocations (1: not 16-byte aligned).
struct Tensor {
  int64_t n;
  int offset;
  Vec p0, g, m0, v0;
  DeviceF p, gr, m, v;
  Device<bf16> copy;
  Tensor(int64_t n_, int offset_)
      : n(n_), offset(offset_), p0(randn(size_t(n_))), g(randn(size_t(n_))), m0(randn(size_t(n_), 0.1)),
        v0(square(randn(size_t(n_), 0.1))), p(size_t(n_ + offset_)), gr(size_t(n_ + offset_)),
        m(size_t(n_ + offset_)), v(size_t(n_ + offset_)), copy(size_t(n_ + offset_)) {
    reset();
  }
  static Vec square(Vec x) {
    for (double& e : x) e *= e;
    return x;
  }
  static Vec padded(const Vec& x, int offset) {
    Vec out(size_t(offset), 0.0);
    out.insert(out.end(), x.begin(), x.end());
    return out;
  }
  void reset() {
    p.upload(padded(p0, offset));
    gr.upload(padded(g, offset));
    m.upload(padded(m0, offset));
    v.upload(padded(v0, offset));
  }
  template <class D>
  static std::vector<float> tail(const D& d, int offset) {
    std::vector<float> h = d.download();
    return std::vector<float>(h.begin() + offset, h.end());
  }
  std::vector<float> param() const { return tail(p, offset); }
  std::vector<float> exp_avg() const { return tail(m, offset); }
  std::vector<float> exp_avg_sq() const { return tail(v, offset); }
  std::vector<uint16_t> copy_bits() const {
    std::vector<bf16> h = copy.download();
    std::vector<uint16_t> out;
    for (size_t i = size_t(offset); i < h.size(); ++i) out.push_back(h[i].bits);
    return out;
  }
};

nf::ops::AdamWParams hyper(int64_t step) {
  nf::ops::AdamWParams h;
  h.lr = 3e-3, h.beta1 = 0.8, h.beta2 = 0.99, h.eps = 1e-6, h.weight_decay = 0.05, h.step = step;
  return h;
}

// The op over `ts` (bf16 copies when `copies`).
nf::ops::AdamWMultiStep<bf16> op_of(std::vector<std::unique_ptr<Tensor>>& ts, const nf::ops::AdamWParams& h,
                                    bool copies) {
  nf::ops::AdamWMultiStep<bf16> p;
  p.h = h;
  for (auto& t : ts) {
    p.sizes.push_back(t->n);
    p.param.push_back(t->p.get() + t->offset);
    p.grad.push_back(t->gr.get() + t->offset);
    p.exp_avg.push_back(t->m.get() + t->offset);
    p.exp_avg_sq.push_back(t->v.get() + t->offset);
    p.copy.push_back(copies ? t->copy.get() + t->offset : nullptr);
  }
  return p;
}

// A list of every awkward size, aligned and not, with more tensors than one launch's table holds.
std::vector<std::unique_ptr<Tensor>> awkward_list() {
  std::vector<std::unique_ptr<Tensor>> ts;
  const int64_t sizes[] = {1, 7, 4097, 0, 65536 + 3, 33, 4, 130000};
  for (int k = 0; k < 41; ++k) ts.push_back(std::make_unique<Tensor>(sizes[k % 8] + (k >= 8 ? k % 5 : 0), k % 3 == 1));
  return ts;
}

NF_TEST(cuda_adamw_multi_parity) {
  auto ts = awkward_list();
  for (int64_t step = 1; step <= 3; ++step) NF_ASSERT_OK(nf::cuda::run(op_of(ts, hyper(step), true)));
  for (auto& t : ts) {
    Vec p = t->p0, m = t->m0, v = t->v0;
    for (int64_t step = 1; step <= 3; ++step) {
      const auto h = hyper(step);
      nf::ref::adamw_step(p.data(), m.data(), v.data(), t->g.data(), t->n, h.lr, h.beta1, h.beta2, h.eps,
                          h.weight_decay, h.step);
    }
    const std::string name = dims({{"n", t->n}, {"offset", t->offset}});
    if (t->n == 0) continue;
    check_close("adamw_multi param", name, t->param(), p, kFwdTol);
    check_close("adamw_multi exp_avg", name, t->exp_avg(), m, kFwdTol);
    check_close("adamw_multi exp_avg_sq", name, t->exp_avg_sq(), v, kFwdTol);
    // The copy: the new master rounded to nearest even, bit for bit.
    const std::vector<float> master = t->param();
    const std::vector<uint16_t> bits = t->copy_bits();
    size_t bad = 0;
    for (size_t i = 0; i < master.size(); ++i) bad += bits[i] != nf::cuda::to_bf16(master[i]).bits;
    NF_EXPECT(bad == 0, "bf16 copy differs from the rounded master at " + std::to_string(bad) + " of " + name);
  }
}

// Every tensor's results, for bit comparisons.
std::vector<std::vector<float>> results(std::vector<std::unique_ptr<Tensor>>& ts) {
  std::vector<std::vector<float>> out;
  for (auto& t : ts) {
    out.push_back(t->param());
    out.push_back(t->exp_avg());
    out.push_back(t->exp_avg_sq());
  }
  return out;
}

NF_TEST(cuda_adamw_multi_bit_equal) {
  auto ts = awkward_list();
  const auto h = hyper(5);
  NF_ASSERT_OK(nf::cuda::run(op_of(ts, h, false)));
  const auto whole = results(ts);
  // One tensor at a time (the adamwStep op's path).
  for (auto& t : ts) {
    t->reset();
    NF_ASSERT_OK(nf::cuda::adamw_step(t->p.get() + t->offset, t->m.get() + t->offset, t->v.get() + t->offset,
                                      t->gr.get() + t->offset, t->n, h));
  }
  NF_EXPECT(results(ts) == whole, "adamwStep tensor by tensor differs from the list");
  // Chunks of 8 elements (hundreds of launches' tables, tensors cut across them), with bf16 copies.
  for (auto& t : ts) t->reset();
  NF_ASSERT_OK(nf::cuda::adamw_multi_step(op_of(ts, h, true), 8));
  NF_EXPECT(results(ts) == whole, "chunks of 8 differ");
  // Step and lr from the step values (graph replays): step 5, lr 3e-3 in a device table.
  for (auto& t : ts) t->reset();
  Device<double> table(std::vector<double>{0.0, 5.0, 3e-3});
  auto from_table = hyper(1);
  from_table.lr = 1.0;
  from_table.step_at = 1, from_table.lr_at = 2;
  from_table.values = {table.get(), 2};
  NF_ASSERT_OK(nf::cuda::run(op_of(ts, from_table, false)));
  NF_EXPECT(results(ts) == whole, "step values differ from arguments");
  // The same values unaligned (offset 1: the scalar path) as aligned (the vector path).
  std::vector<std::unique_ptr<Tensor>> aligned, shifted;
  for (int64_t n : {7, 4097, 65536 + 3}) {
    aligned.push_back(std::make_unique<Tensor>(n, 0));
    shifted.push_back(std::make_unique<Tensor>(n, 1));
    shifted.back()->p0 = aligned.back()->p0, shifted.back()->g = aligned.back()->g;
    shifted.back()->m0 = aligned.back()->m0, shifted.back()->v0 = aligned.back()->v0;
    shifted.back()->reset();
  }
  NF_ASSERT_OK(nf::cuda::run(op_of(aligned, h, true)));
  NF_ASSERT_OK(nf::cuda::run(op_of(shifted, h, true)));
  NF_EXPECT(results(aligned) == results(shifted), "the scalar path differs from the vector path");
  for (size_t k = 0; k < aligned.size(); ++k) NF_EXPECT(aligned[k]->copy_bits() == shifted[k]->copy_bits());
}

NF_TEST(cuda_adamw_multi_float_copy_and_errors) {
  // A float32 copy (the op's float instantiation) is the new master exactly.
  Tensor t(4097, 0);
  DeviceF copy(4097);
  nf::ops::AdamWMultiStep<float> p;
  p.h = hyper(2);
  p.sizes = {t.n};
  p.param = {t.p.get()};
  p.grad = {t.gr.get()};
  p.exp_avg = {t.m.get()};
  p.exp_avg_sq = {t.v.get()};
  p.copy = {copy.get()};
  NF_ASSERT_OK(nf::cuda::run(p));
  NF_EXPECT(copy.download() == t.param(), "float copy");
  // An empty list does nothing; bad hyperparameters and chunks are errors naming the op.
  nf::ops::AdamWMultiStep<float> empty;
  NF_ASSERT_OK(nf::cuda::run(empty));
  p.h.step = 0;
  const nf::Status st = nf::cuda::run(p);
  NF_EXPECT(!st.ok() && st.op == "adamw_multi_step", st.message);
  p.h.step = 1;
  NF_EXPECT(!nf::cuda::adamw_multi_step(p, 6).ok(), "a chunk that is no multiple of 4");
}

}  // namespace
