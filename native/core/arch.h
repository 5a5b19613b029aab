// The target architecture, for the few places that differ by it: which ISA variants of the CPU
// kernels a build compiles (native/cpu/isa.h, kernel_decl.h) and how the CPU is probed
// (cpu_features.cpp). NF_X86 and NF_ARM64 are 1 on their architecture and 0 elsewhere.
#pragma once

#if defined(__x86_64__) || defined(_M_X64)
#define NF_X86 1
#else
#define NF_X86 0
#endif

#if defined(__aarch64__) || defined(_M_ARM64)
#define NF_ARM64 1
#else
#define NF_ARM64 0
#endif

// NF_AMX_BUILD: this build has the AMX kernels (GCC for x86-64 Linux: the int8 products in
// native/cpu/gemm_int8.cpp's avx512 pass, the bf16 GEMM in gemm.cpp's avx512bf16 pass), so
// cpu_has_amx_int8/bf16 may report the CPU's AMX. The clang (zig) builds have none.
#if NF_X86 && defined(__linux__) && !defined(__clang__)
#define NF_AMX_BUILD 1
#else
#define NF_AMX_BUILD 0
#endif
