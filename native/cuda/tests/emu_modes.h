// Helpers of the emulator-only tests (emu_*_test.cpp): running a test under every scheduling mode
// of the SIMT emulator, and naming a CUDA error.
#pragma once
#include <string>

#include "../runtime.h"

// Runs fn under every scheduling mode (fibers, fibers switched by swapcontext, OS threads, fibers
// started in reverse order), restoring the options afterwards.
template <class F>
void for_each_mode(F fn) {
  const nf::emu::Options saved = nf::emu::options();
  for (int mode = 0; mode < 4; ++mode) {
    nf::emu::options().ucontext = mode == 1;
    nf::emu::options().os_threads = mode == 2;
    nf::emu::options().reverse = mode == 3;
    fn();
  }
  nf::emu::options() = saved;
}

// "cudaErrorX: its description".
inline std::string why(cudaError_t e) { return std::string(cudaGetErrorName(e)) + ": " + cudaGetErrorString(e); }
