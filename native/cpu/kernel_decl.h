// Declaring and dispatching ISA-variant kernels.
//
// Every kernel .cpp in native/cpu/ is compiled three times, with NF_ISA = 0 (scalar), 1 (AVX2+FMA)
// and 2 (AVX-512), into namespaces nf::cpu::scalar, nf::cpu::avx2 and nf::cpu::avx512 (see isa.h).
// A family header declares its variant functions once with NF_KERNEL_DECL, and its public entry
// point (compiled only in the scalar pass, guarded by NF_ISA_PRIMARY) checks dims and calls the
// active variant with NF_DISPATCH.
//
// Inside variant code, call other variants qualified, e.g. `NF_ISA_NS::gemm(...)`: argument-
// dependent lookup would otherwise also find the public nf::cpu::gemm and make the call ambiguous.
#pragma once
#include "../core/cpu_features.h"
#include "../core/status.h"

// The x86 variants exist only in x86-64 builds: elsewhere (arm64) the kernels are compiled once,
// as scalar (native/sources.js isas), and every dispatch goes to it.
#if defined(__x86_64__) || defined(_M_X64)
#define NF_X86_VARIANTS 1
#else
#define NF_X86_VARIANTS 0
#endif

#if NF_X86_VARIANTS
#define NF_KERNEL_DECL(...)          \
  namespace scalar { __VA_ARGS__; }  \
  namespace avx2 { __VA_ARGS__; }    \
  namespace avx512 { __VA_ARGS__; }

// Calls variant `fn` of `isa` (an nf::Isa the CPU can run): the load-time self-check and the test
// hooks pick the variant themselves; NF_DISPATCH picks the active one.
#define NF_DISPATCH_TO(isa, fn, ...)                           \
  do {                                                         \
    switch (isa) {                                             \
      case ::nf::Isa::avx512: avx512::fn(__VA_ARGS__); break;  \
      case ::nf::Isa::avx2: avx2::fn(__VA_ARGS__); break;      \
      default: scalar::fn(__VA_ARGS__); break;                 \
    }                                                          \
  } while (0)
#else
#define NF_KERNEL_DECL(...) namespace scalar { __VA_ARGS__; }
#define NF_DISPATCH_TO(isa, fn, ...) ((void)(isa), scalar::fn(__VA_ARGS__))
#endif

#define NF_DISPATCH(fn, ...) NF_DISPATCH_TO(::nf::active_isa(), fn, __VA_ARGS__)
