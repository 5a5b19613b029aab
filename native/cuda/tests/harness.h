// A minimal test harness for the CUDA backend's C++ tests (the emulator build and, on a machine with
// a GPU, the real one): NF_TEST(name) registers a test, NF_EXPECT records a failure and goes on,
// NF_ASSERT stops the test. main() (main.cpp) runs the tests whose names contain argv[1].
#pragma once
#include <cstdio>
#include <functional>
#include <string>
#include <vector>

namespace nf::test {

struct Case {
  const char* name;
  std::function<void()> fn;
};

inline std::vector<Case>& registry() {
  static std::vector<Case> r;
  return r;
}

struct Register {
  Register(const char* name, std::function<void()> fn) { registry().push_back({name, std::move(fn)}); }
};

// Failures of the running test.
inline int& failures() {
  static int n = 0;
  return n;
}

// Run by main() after the tests (e.g. to print the largest errors seen).
inline std::vector<std::function<void()>>& at_end() {
  static std::vector<std::function<void()>> fns;
  return fns;
}

// While set, failures are counted but not printed (tests that expect other tests to fail).
inline bool& quiet() {
  static bool q = false;
  return q;
}

struct AssertFailed {};

// Records a failure; in quiet mode also ends the test at once (only whether it fails matters).
inline void fail(const char* file, int line, const std::string& what) {
  ++failures();
  if (quiet()) throw AssertFailed{};
  std::printf("    FAILED %s:%d: %s\n", file, line, what.c_str());
}

}  // namespace nf::test

#define NF_TEST_CAT2(a, b) a##b
#define NF_TEST_CAT(a, b) NF_TEST_CAT2(a, b)
#define NF_TEST(name)                                                                        \
  static void NF_TEST_CAT(nf_test_, name)();                                                 \
  static ::nf::test::Register NF_TEST_CAT(nf_test_reg_, name)(#name, NF_TEST_CAT(nf_test_, name)); \
  static void NF_TEST_CAT(nf_test_, name)()

#define NF_EXPECT(cond, ...)                                                                   \
  do {                                                                                         \
    if (!(cond)) ::nf::test::fail(__FILE__, __LINE__, std::string(#cond) + " " + std::string(__VA_ARGS__)); \
  } while (0)

#define NF_ASSERT(cond, ...)                                                                   \
  do {                                                                                         \
    if (!(cond)) {                                                                             \
      ::nf::test::fail(__FILE__, __LINE__, std::string(#cond) + " " + std::string(__VA_ARGS__)); \
      throw ::nf::test::AssertFailed{};                                                        \
    }                                                                                          \
  } while (0)

// Asserts that an nf::Status is ok, printing its message otherwise.
#define NF_ASSERT_OK(expr)                                                                     \
  do {                                                                                         \
    ::nf::Status nf_test_st_ = (expr);                                                         \
    if (!nf_test_st_.ok()) {                                                                   \
      ::nf::test::fail(__FILE__, __LINE__, #expr ": " + nf_test_st_.op + ": " + nf_test_st_.message); \
      throw ::nf::test::AssertFailed{};                                                        \
    }                                                                                          \
  } while (0)
