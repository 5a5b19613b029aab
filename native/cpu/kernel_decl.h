// Declaring and dispatching ISA-variant kernels.
//
// Every kernel .cpp in native/cpu/ is compiled once per variant of the target architecture (see
// isa.h): on x86-64 with NF_ISA = 0 (scalar), 1 (AVX2+FMA), 2 (AVX-512) and 4 (AVX-512 with BF16),
// into namespaces nf::cpu::scalar, avx2, avx512 and avx512bf16; on AArch64 with NF_ISA = 0 and 3
// (NEON), into nf::cpu::scalar and nf::cpu::neon. A family header declares its variant functions once with
// NF_KERNEL_DECL, and its public entry point (compiled only in the scalar pass, guarded by
// NF_ISA_PRIMARY) checks dims and calls the active variant with NF_DISPATCH.
//
// Inside variant code, call other variants qualified, e.g. `NF_ISA_NS::gemm(...)`: argument-
// dependent lookup would otherwise also find the public nf::cpu::gemm and make the call ambiguous.
#pragma once
#include "../core/cpu_features.h"
#include "../core/status.h"

// NF_DISPATCH_TO(isa, fn, ...) calls variant `fn` of `isa` (a compiled nf::Isa the CPU can run;
// any other runs the scalar one) and gives its result: the load-time self-check and the test hooks
// pick the variant themselves; NF_DISPATCH picks the active one.
#if NF_X86
#define NF_KERNEL_DECL(...)          \
  namespace scalar { __VA_ARGS__; }  \
  namespace avx2 { __VA_ARGS__; }    \
  namespace avx512 { __VA_ARGS__; }  \
  namespace avx512bf16 { __VA_ARGS__; }

#define NF_DISPATCH_TO(isa, fn, ...)                                \
  ([&]() -> decltype(auto) {                                        \
    switch (isa) {                                                  \
      case ::nf::Isa::avx512bf16: return avx512bf16::fn(__VA_ARGS__);  \
      case ::nf::Isa::avx512: return avx512::fn(__VA_ARGS__);       \
      case ::nf::Isa::avx2: return avx2::fn(__VA_ARGS__);           \
      default: return scalar::fn(__VA_ARGS__);                      \
    }                                                               \
  }())
#elif NF_ARM64
#define NF_KERNEL_DECL(...)          \
  namespace scalar { __VA_ARGS__; }  \
  namespace neon { __VA_ARGS__; }

#define NF_DISPATCH_TO(isa, fn, ...)                                \
  ([&]() -> decltype(auto) {                                        \
    switch (isa) {                                                  \
      case ::nf::Isa::neon: return neon::fn(__VA_ARGS__);           \
      default: return scalar::fn(__VA_ARGS__);                      \
    }                                                               \
  }())
#else
#define NF_KERNEL_DECL(...) \
  namespace scalar { __VA_ARGS__; }

#define NF_DISPATCH_TO(isa, fn, ...) (static_cast<void>(isa), scalar::fn(__VA_ARGS__))
#endif

#define NF_DISPATCH(fn, ...) NF_DISPATCH_TO(::nf::active_isa(), fn, __VA_ARGS__)
