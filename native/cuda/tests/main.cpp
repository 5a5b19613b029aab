// Runs the registered tests (all, or those whose names contain argv[1]); prints one line per test
// and a summary; exits 1 when any failed. Built for a real GPU (NF_CUDA_REQUIRE_DEVICE), it first
// looks for a device and, finding none, says so and exits 0: the tests are skipped, not failed.
#include <chrono>
#include <cstdio>
#include <cstring>
#include <exception>

#include "harness.h"
#ifdef NF_CUDA_REQUIRE_DEVICE
#include "../device.h"
#endif

int main(int argc, char** argv) {
  const char* filter = argc > 1 ? argv[1] : "";
#ifdef NF_CUDA_REQUIRE_DEVICE
  int devices = 0;
  const nf::Status st = nf::cuda::device_count(&devices);
  if (!st.ok() || devices == 0) {
    std::printf("SKIPPED: no CUDA device (%s)\n", st.ok() ? "none found" : st.message.c_str());
    return 0;
  }
#endif
  int passed = 0, failed = 0;
  const auto t0 = std::chrono::steady_clock::now();
  for (const auto& c : nf::test::registry()) {
    if (!std::strstr(c.name, filter)) continue;
    nf::test::failures() = 0;
    const auto start = std::chrono::steady_clock::now();
    try {
      c.fn();
    } catch (const nf::test::AssertFailed&) {
    } catch (const std::exception& e) {
      nf::test::fail(__FILE__, __LINE__, std::string("exception: ") + e.what());
    }
    const double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
    const bool ok = nf::test::failures() == 0;
    std::printf("%s %s (%.0f ms)\n", ok ? "ok  " : "FAIL", c.name, ms);
    std::fflush(stdout);
    (ok ? passed : failed)++;
  }
  for (const auto& fn : nf::test::at_end()) fn();
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  std::printf("%d passed, %d failed (%.1f s)\n", passed, failed, s);
  return failed == 0 && passed > 0 ? 0 : 1;
}
