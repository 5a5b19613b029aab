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
