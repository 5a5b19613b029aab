// Step values: the arguments that change every training step — a dropout site's seed, the
// optimizer's step count and learning rate — read by the kernel from a float64 table at run time
// instead of from the call, so that a CUDA graph captured once replays with each step's values
// (lib/training/graph.ts fills the table before each launch; native/cuda/device.h, CUDA graphs).
// An op that takes one has an index field (`seedAt`, `stepAt`, `lrAt`: −1, the default, means the
// call's own argument) and the table, `stepValues` (float64, at least max index + 1 long; on the
// op's device). A value read from the table is used exactly as the argument would be (a seed is
// the integer the double holds), so a call gives the same result either way.
#pragma once
#include <cstdint>

#include "schema.h"

namespace nf::ops {

// The table of a call's step values and the largest index it reads (−1: none).
struct StepValues {
  const double* table = nullptr;
  int64_t last = -1;
};

// The bound of an index (the table is a small per-step buffer).
constexpr int64_t kMaxStepValue = int64_t(1) << 20;

// Reads index field `name` (default −1) into `at`, noting it in `v`.
template <class R>
void step_value_at(R& r, StepValues& v, int64_t& at, const char* name) {
  r.integer(at, name, int64_t(-1), int64_t(-1), kMaxStepValue - 1);
  if (at > v.last) v.last = at;
}

// Reads the table, required when an index was given (after every step_value_at of the call).
template <class R>
void step_values_table(R& r, StepValues& v) {
  r.in(v.table, "stepValues", Shape("[(the largest index) + 1]", v.last + 1).or_longer(),
       when(v.last >= 0, "an index field (seedAt, stepAt, lrAt) is given"),
       doc("this step's values, read at run time by the fields that index it (CUDA graphs replay them)"));
}

// The value at `at`, or `arg` when at < 0 (host memory: the CPU kernels' reading).
inline double step_value(const StepValues& v, int64_t at, double arg) { return at >= 0 ? v.table[at] : arg; }

}  // namespace nf::ops
