// Parity of the CUDA embeddings (token gather with positions, deterministic scatter-add backward with
// repeated ids, bad ids) and of the ViT CLS + position start, with the float64 references
// native/cpu/ref/embedding.h.
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
    Vec out(n), dtable(table.size(), 0.5), dpos(pos.size(), -0.25);
    nf::ref::embedding_forward<double>(out.data(), ids.data(), table.data(), c.pos ? pos.data() : nullptr, c.B, c.T,
                                       c.D, c.scale);
    nf::ref::embedding_backward<double>(dtable.data(), c.pos ? dpos.data() : nullptr, dout.data(), ids.data(), c.B,
                                        c.T, c.D, c.scale);
    Device<int32_t> d_ids(ids);
    DeviceF d_table(table), d_pos(pos), d_out(n), d_dout(dout), d_dtable(std::vector<float>(table.size(), 0.5f)),
        d_dpos(std::vector<float>(pos.size(), -0.25f));
    const nf::cuda::EmbeddingDims d{c.B, c.T, c.V, c.D, float(c.scale)};
    NF_ASSERT_OK(nf::cuda::embedding_forward(d_out, d_ids, d_table, c.pos ? d_pos.get() : nullptr, d));
    check_close("embedding out", name, d_out.download(), out, kFwdTol);
    NF_ASSERT_OK(nf::cuda::embedding_backward(d_dtable, c.pos ? d_dpos.get() : nullptr, d_dout, d_ids, d));
    check_close("embedding dtable", name, d_dtable.download(), dtable, kBwdTol);
    if (c.pos) check_close("embedding dpos", name, d_dpos.download(), dpos, kBwdTol);
  }
}

NF_TEST(cuda_embedding_bad_ids) {
  Device<int32_t> ids(std::vector<int32_t>{0, 3, 4, -1});
  DeviceF table(randn(4 * 8)), out(4 * 8);
  const nf::Status st = nf::cuda::embedding_forward(out, ids, table, nullptr, {1, 4, 4, 8, 1.0f});
  NF_EXPECT(!st.ok() && st.op == "embedding_forward" && st.message.find("position 2") != std::string::npos,
            st.message);
  const nf::Status bw = nf::cuda::embedding_backward(table, nullptr, out, ids, {2, 2, 4, 8, 1.0f});
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
    Vec out(nt), dcls(size_t(c.D), 0.5), dpatches(np), dpos(npos, -0.25);
    nf::ref::cls_pos_forward<double>(out.data(), cls.data(), patches.data(), pos.data(), c.B, c.N, c.D);
    nf::ref::cls_pos_backward<double>(dcls.data(), dpatches.data(), dpos.data(), dout.data(), c.B, c.N, c.D);
    DeviceF d_cls(cls), d_patches(patches), d_pos(pos), d_out(nt), d_dout(dout),
        d_dcls(std::vector<float>(size_t(c.D), 0.5f)), d_dpatches(np), d_dpos(std::vector<float>(npos, -0.25f));
    NF_ASSERT_OK(nf::cuda::cls_pos_forward(d_out, d_cls, d_patches, d_pos, c.B, c.N, c.D));
    check_close("cls_pos out", name, d_out.download(), out, kFwdTol);
    NF_ASSERT_OK(nf::cuda::cls_pos_backward(d_dcls, d_dpatches, d_dpos, d_dout, c.B, c.N, c.D));
    check_close("cls_pos dcls", name, d_dcls.download(), dcls, kBwdTol);
    check_close("cls_pos dpatches", name, d_dpatches.download(), dpatches, kBwdTol);
    check_close("cls_pos dpos", name, d_dpos.download(), dpos, kBwdTol);
  }
}

}  // namespace
