// The SIMD vocabulary's test hook (test/simd.test.ts, through native/cpu/napi/bind_simd_probe.cpp):
// applies one named ISA-specific helper (a function of simd.h, activation_inl.h or pack_inl.h, or
// the finite scan) with one variant's lane width W to float arrays, so that a test can compare every
// variant lane by lane with the scalar one and with the functions' definitions. The functions and
// what each does with the arrays are listed in simd_probe.cpp.
#pragma once
#include <cstdint>

#include "kernel_decl.h"

namespace nf::cpu {

struct SimdProbe {
  const char* fn = "";              // the helper's name, e.g. "vexp", "vload_n", "pack_transposed"
  float* out = nullptr;             // out_n floats
  int64_t out_n = 0;
  const float* in[4] = {};          // the operands, n floats each (null past the helper's arity)
  int64_t n = 0;
  int64_t arg[4] = {0, 0, 0, 0};    // the helper's integer parameters (tail length, P, rows, ...)
};

// Runs `p` on variant `isa`; *width = that variant's W. An error for an unknown name, wrong
// arity or sizes, or a variant this CPU cannot run.
Status simd_probe(Isa isa, const SimdProbe& p, int* width);

NF_KERNEL_DECL(void simd_probe(const SimdProbe& p, Status* status))
NF_KERNEL_DECL(void simd_width(int* width))

}  // namespace nf::cpu
