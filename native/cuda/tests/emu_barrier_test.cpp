// Every __syncthreads of every kernel is needed and tested: for each parity test of the CUDA ops,
// each barrier call site its kernels reach is removed in turn (nf::emu::options().drop_barrier) and
// the test must then fail, through poisoned shared memory read as NaN or through wrong results, in the
// emulator's thread order or, failing that, in the reverse one (NF_EMU_REVERSE's: a reader that runs
// after all its writers in one order runs before them in the other). A barrier whose removal went
// unnoticed in both would be unnecessary, or its hazard untested.
#include <algorithm>
#include <cstdio>
#include <cstring>
#include <vector>

#include "../runtime.h"
#include "harness.h"

namespace {

// Runs the registered test `name` quietly; true when it failed.
bool fails_quietly(const nf::test::Case& c) {
  const int before = nf::test::failures();
  nf::test::quiet() = true;
  try {
    c.fn();
  } catch (const nf::test::AssertFailed&) {
  }
  nf::test::quiet() = false;
  const bool failed = nf::test::failures() > before;
  nf::test::failures() = before;
  return failed;
}

NF_TEST(emulator_every_barrier_is_needed) {
#ifdef __SANITIZE_THREAD__
  std::printf("    skipped: needs the deterministic fiber schedule (ThreadSanitizer runs OS threads)\n");
  return;
#endif
  const char* suites[] = {"cuda_layernorm_parity",      "cuda_gemm_parity",           "cuda_linear_parity",
                          "cuda_bias_act_parity",       "cuda_cross_entropy_parity",  "cuda_attention_parity",
                          "cuda_token_pos_parity",      "cuda_clip_grad_norm_parity", "cuda_first_nonfinite_parity",
                          "cuda_mma_gemm_bf16",         "cuda_cp_async_copies",       "cuda_attention_tensor_core_parity",
                          "cuda_attention_atomic_dq_parity"};
  const nf::emu::Options saved = nf::emu::options();
  nf::emu::options().os_threads = false;
  std::vector<std::string> proven;  // barriers of kernels shared by several suites are removed once
  for (const char* name : suites) {
    const nf::test::Case* suite = nullptr;
    for (const auto& c : nf::test::registry())
      if (std::strcmp(c.name, name) == 0) suite = &c;
    NF_ASSERT(suite, std::string("no test named ") + name);
    nf::emu::options().drop_barrier.clear();
    nf::emu::clear_barrier_sites();
    NF_ASSERT(!fails_quietly(*suite), std::string(name) + " fails with every barrier in place");
    const std::vector<std::string> sites = nf::emu::barrier_sites();
    std::string list;
    for (const std::string& site : sites) {
      if (std::find(proven.begin(), proven.end(), site) != proven.end()) continue;
      nf::emu::options().drop_barrier = site;
      bool failed = fails_quietly(*suite);
      if (!failed) {  // some hazards show in one thread order only (all writers before their reader)
        nf::emu::options().reverse = !saved.reverse;
        failed = fails_quietly(*suite);
        nf::emu::options().reverse = saved.reverse;
      }
      NF_EXPECT(failed, std::string(name) + ": removing the __syncthreads at " + site + " went unnoticed");
      if (failed) proven.push_back(site), list += " " + site;
    }
    std::printf("    %s:%s\n", name, list.empty() ? " no new barriers" : list.c_str());
  }
  nf::emu::options() = saved;
}

}  // namespace
