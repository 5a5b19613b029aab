// Parity of the CUDA embeddings (token gather with positions, deterministic scatter-add backward with
// repeated ids, bad ids), the sinusoidal position table and the ViT token starts (CLS + positions,
// mask token + positions), with the float64 references native/cpu/ref/embedding.h.
#include <type_traits>

#include "../../cpu/ref/embedding.h"
#include "../embedding.h"
#include "parity.h"

namespace {

using namespace nf::test;

NF_TEST(cuda_embedding_parity) {
  struct Case {
    int64_t B, T, V, D;
    double scale;
    bool pos;
  };
  const Case cases[] = {{1, 1, 1, 24, 1.0, false}, {2, 7, 5, 72, 8.0, true}, {5, 65, 300, 40, 0.5, true},
                        {3, 197, 11, 7, 1.0, false}};
  for (const Case& c : cases) {
    const std::string name = dims({{"B", c.B}, {"T", c.T}, {"V", c.V}, {"D", c.D}, {"pos", c.pos}});
    const size_t rows = size_t(c.B * c.T), n = rows * size_t(c.D);
    std::vector<int32_t> ids(rows);
    for (size_t r = 0; r < rows; ++r) ids[r] = int32_t((r * r * 7 + 3) % size_t(c.V));  // repeats when V < rows
    const Vec table = randn(size_t(c.V * c.D)), pos = c.pos ? randn(size_t(c.T * c.D)) : Vec(), dout = randn(n);
    const nf::ops::EmbeddingDims d{c.B, c.T, c.V, c.D, c.scale};
    // The ops' params on either precision's buffers.
    const auto forward = [&](auto* out, const int32_t* ids_ptr, const auto* table_ptr, const auto* pos_ptr) {
      nf::ops::EmbeddingForward<std::remove_pointer_t<decltype(out)>> f;
      f.d = d, f.max_len = c.T, f.out = out, f.ids = ids_ptr, f.table = table_ptr, f.pos = c.pos ? pos_ptr : nullptr;
      return f;
    };
    const auto backward = [&](auto* dtable_ptr, auto* dpos_ptr, const auto* dout_ptr, const int32_t* ids_ptr) {
      nf::ops::EmbeddingBackward<std::remove_pointer_t<decltype(dtable_ptr)>> b;
      b.d = d, b.max_len = c.T, b.dtable = dtable_ptr, b.dpos = c.pos ? dpos_ptr : nullptr, b.dout = dout_ptr;
      b.ids = ids_ptr;
      return b;
    };
    Vec out(n), dtable(table.size(), 0.5), dpos(pos.size(), -0.25);
    nf::ref::run(forward(out.data(), ids.data(), table.data(), pos.data()));
    nf::ref::run(backward(dtable.data(), dpos.data(), dout.data(), ids.data()));
    Device<int32_t> d_ids(ids);
    DeviceF d_table(table), d_pos(pos), d_out(n), d_dout(dout), d_dtable(std::vector<float>(table.size(), 0.5f)),
        d_dpos(std::vector<float>(pos.size(), -0.25f));
    NF_ASSERT_OK(nf::cuda::run(forward(d_out.get(), d_ids.get(), d_table.get(), d_pos.get())));
    check_close("embedding out", name, d_out.download(), out, kFwdTol);
    NF_ASSERT_OK(nf::cuda::run(backward(d_dtable.get(), d_dpos.get(), d_dout.get(), d_ids.get())));
    check_close("embedding dtable", name, d_dtable.download(), dtable, kBwdTol);
    if (c.pos) check_close("embedding dpos", name, d_dpos.download(), dpos, kBwdTol);
  }
}

NF_TEST(cuda_embedding_bad_ids) {
  Device<int32_t> ids(std::vector<int32_t>{0, 3, 4, -1});
  DeviceF table(randn(4 * 8)), out(4 * 8);
  nf::ops::EmbeddingForward<float> f;
  f.d = {1, 4, 4, 8, 1.0}, f.max_len = 4, f.out = out, f.ids = ids, f.table = table;
  const nf::Status st = nf::cuda::run(f);
  NF_EXPECT(!st.ok() && st.op == "embedding_forward" && st.message.find("position 2") != std::string::npos,
            st.message);
  nf::ops::EmbeddingBackward<float> b;
  b.d = {2, 2, 4, 8, 1.0}, b.max_len = 2, b.dtable = table, b.dout = out, b.ids = ids;
  const nf::Status bw = nf::cuda::run(b);
  NF_EXPECT(!bw.ok() && bw.message.find("position 2") != std::string::npos, bw.message);
}

NF_TEST(cuda_cls_pos_parity) {
  struct Case {
    int64_t B, N, D;
  };
  const Case cases[] = {{1, 1, 24}, {3, 9, 48}, {5, 16, 7}, {2, 196, 40}};
  for (const Case& c : cases) {
    const std::string name = dims({{"B", c.B}, {"N", c.N}, {"D", c.D}});
    const size_t nt = size_t(c.B * (c.N + 1) * c.D), np = size_t(c.B * c.N * c.D), npos = size_t((c.N + 1) * c.D);
    const Vec cls = randn(size_t(c.D)), patches = randn(np), pos = randn(npos), dout = randn(nt);
    const nf::ops::TokenPosDims d{c.B, c.N, c.D};
    const auto forward = [&d](auto* out, const auto* cls_ptr, const auto* patches_ptr, const auto* pos_ptr) {
      nf::ops::ClsPosForward<std::remove_pointer_t<decltype(out)>> f;
      f.d = d, f.out = out, f.cls = cls_ptr, f.patches = patches_ptr, f.pos = pos_ptr;
      return f;
    };
    const auto backward = [&d](auto* dcls_ptr, auto* dpatches_ptr, auto* dpos_ptr, const auto* dout_ptr) {
      nf::ops::ClsPosBackward<std::remove_pointer_t<decltype(dcls_ptr)>> b;
      b.d = d, b.dcls = dcls_ptr, b.dpatches = dpatches_ptr, b.dpos = dpos_ptr, b.dout = dout_ptr;
      return b;
    };
    Vec out(nt), dcls(size_t(c.D), 0.5), dpatches(np), dpos(npos, -0.25);
    nf::ref::run(forward(out.data(), cls.data(), patches.data(), pos.data()));
    nf::ref::run(backward(dcls.data(), dpatches.data(), dpos.data(), dout.data()));
    DeviceF d_cls(cls), d_patches(patches), d_pos(pos), d_out(nt), d_dout(dout),
        d_dcls(std::vector<float>(size_t(c.D), 0.5f)), d_dpatches(np), d_dpos(std::vector<float>(npos, -0.25f));
    NF_ASSERT_OK(nf::cuda::run(forward(d_out.get(), d_cls.get(), d_patches.get(), d_pos.get())));
    check_close("cls_pos out", name, d_out.download(), out, kFwdTol);
    NF_ASSERT_OK(nf::cuda::run(backward(d_dcls.get(), d_dpatches.get(), d_dpos.get(), d_dout.get())));
    check_close("cls_pos dcls", name, d_dcls.download(), dcls, kBwdTol);
    check_close("cls_pos dpatches", name, d_dpatches.download(), dpatches, kBwdTol);
    check_close("cls_pos dpos", name, d_dpos.download(), dpos, kBwdTol);
  }
}

NF_TEST(cuda_sinusoidal_parity) {
  struct Case {
    int64_t len, D;
  };
  const Case cases[] = {{1, 1}, {7, 12}, {9, 7}, {197, 20}, {50, 40}, {3, 5}, {4096, 6}, {0, 4}};
  for (const Case& c : cases) {
    const std::string name = dims({{"len", c.len}, {"D", c.D}});
    const size_t n = size_t(c.len * c.D);
    Vec ref(n);
    nf::ops::SinusoidalEncoding<double> r;
    r.len = c.len, r.D = c.D, r.out = ref.data();
    nf::ref::run(r);
    DeviceF d_out(std::vector<float>(n, -7.0f));
    nf::ops::SinusoidalEncoding<float> f;
    f.len = c.len, f.D = c.D, f.out = d_out;
    NF_ASSERT_OK(nf::cuda::run(f));
    check_close("sinusoidal out", name, d_out.download(), ref, kFwdTol);
  }
  nf::ops::SinusoidalEncoding<float> bad;
  bad.len = 3, bad.D = 0;
  NF_EXPECT(!nf::cuda::run(bad).ok(), "D 0");
}

NF_TEST(cuda_token_pos_parity) {
  struct Case {
    int64_t B, N, D;
  };
  // N 1100: more rows than one chunk of the column sums (their two-stage path).
  const Case cases[] = {{1, 1, 24}, {3, 7, 12}, {5, 9, 7}, {2, 196, 40}, {3, 1100, 20}, {0, 4, 12}};
  for (const Case& c : cases) {
    const std::string name = dims({{"B", c.B}, {"N", c.N}, {"D", c.D}});
    const size_t nt = size_t(c.B * c.N * c.D), npos = size_t(c.N * c.D);
    const Vec token = randn(size_t(c.D)), pos = randn(npos), dout = randn(nt);
    const nf::ops::TokenPosDims d{c.B, c.N, c.D};
    const auto forward = [&d](auto* out, const auto* token_ptr, const auto* pos_ptr) {
      nf::ops::TokenPosForward<std::remove_pointer_t<decltype(out)>> f;
      f.d = d, f.out = out, f.token = token_ptr, f.pos = pos_ptr;
      return f;
    };
    const auto backward = [&d](auto* dtoken_ptr, auto* dpos_ptr, const auto* dout_ptr) {
      nf::ops::TokenPosBackward<std::remove_pointer_t<decltype(dtoken_ptr)>> b;
      b.d = d, b.dtoken = dtoken_ptr, b.dpos = dpos_ptr, b.dout = dout_ptr;
      return b;
    };
    // The parameter gradients start non-zero: they accumulate.
    const Vec dtoken0 = randn(size_t(c.D)), dpos0 = randn(npos);
    Vec out(nt), dtoken = dtoken0, dpos = dpos0;
    nf::ref::run(forward(out.data(), token.data(), pos.data()));
    nf::ref::run(backward(dtoken.data(), dpos.data(), dout.data()));
    DeviceF d_token(token), d_pos(pos), d_out(std::vector<float>(nt, -7.0f)), d_dout(dout), d_dtoken(dtoken0),
        d_dpos(dpos0);
    NF_ASSERT_OK(nf::cuda::run(forward(d_out.get(), d_token.get(), d_pos.get())));
    check_close("token_pos out", name, d_out.download(), out, kFwdTol);
    NF_ASSERT_OK(nf::cuda::run(backward(d_dtoken.get(), d_dpos.get(), d_dout.get())));
    check_close("token_pos dtoken", name, d_dtoken.download(), dtoken, kBwdTol);
    check_close("token_pos dpos", name, d_dpos.download(), dpos, kBwdTol);
  }
}

}  // namespace
