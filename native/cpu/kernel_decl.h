// Declaring and dispatching ISA-variant kernels.
//
// Every kernel .cpp in native/cpu/ is compiled four times, with NF_ISA = 0 (scalar), 1 (AVX2+FMA),
// 2 (AVX-512) and 3 (AVX-512 with BF16), into namespaces nf::cpu::scalar, avx2, avx512 and
// avx512bf16 (see isa.h).
// A family header declares its variant functions once with NF_KERNEL_DECL, and its public entry
// point (compiled only in the scalar pass, guarded by NF_ISA_PRIMARY) checks dims and calls the
// active variant with NF_DISPATCH.
//
// Inside variant code, call other variants qualified, e.g. `NF_ISA_NS::gemm(...)`: argument-
// dependent lookup would otherwise also find the public nf::cpu::gemm and make the call ambiguous.
#pragma once
#include "../core/cpu_features.h"
#include "../core/status.h"

#define NF_KERNEL_DECL(...)          \
  namespace scalar { __VA_ARGS__; }  \
  namespace avx2 { __VA_ARGS__; }    \
  namespace avx512 { __VA_ARGS__; }  \
  namespace avx512bf16 { __VA_ARGS__; }

// Calls variant `fn` of `isa` (an nf::Isa the CPU can run): the load-time self-check and the test
// hooks pick the variant themselves; NF_DISPATCH picks the active one.
#define NF_DISPATCH_TO(isa, fn, ...)                           \
  do {                                                         \
    switch (isa) {                                             \
      case ::nf::Isa::avx512bf16: avx512bf16::fn(__VA_ARGS__); break;  \
      case ::nf::Isa::avx512: avx512::fn(__VA_ARGS__); break;  \
      case ::nf::Isa::avx2: avx2::fn(__VA_ARGS__); break;      \
      default: scalar::fn(__VA_ARGS__); break;                 \
    }                                                          \
  } while (0)

#define NF_DISPATCH(fn, ...) NF_DISPATCH_TO(::nf::active_isa(), fn, __VA_ARGS__)
