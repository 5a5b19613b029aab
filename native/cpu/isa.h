// Selects the instruction set for the rest of this translation unit. Include it in a kernel .cpp
// AFTER every other header (standard headers and project headers keep the default target, so
// inline functions the linker may merge across variants never contain AVX-512 instructions),
// then open `namespace nf::cpu::NF_ISA_NS { ... }`, then include simd.h inside it; end the file by
// including isa_end.h.
//   NF_ISA 0: scalar (baseline x86-64 or AArch64 / any CPU)  namespace scalar
//   NF_ISA 1: AVX2 + FMA (Haswell, Zen 1+)                    namespace avx2        x86-64 only
//   NF_ISA 2: AVX-512 F/DQ/BW/VL (Skylake-X, Zen 4)           namespace avx512      x86-64 only
//   NF_ISA 3: NEON / Advanced SIMD (every AArch64 CPU)        namespace neon        AArch64 only
//   NF_ISA 4: AVX-512 as 2, and AVX512_BF16                   namespace avx512bf16  x86-64 only
//             (Cooper Lake, Sapphire Rapids, Zen 4): the same code as avx512 but where a kernel
//             uses the BF16 instructions (NF_BF16_DOT: the GEMM at precision 'bf16')
// The build compiles the variants of its target architecture (nf::kCompiledIsas,
// native/core/cpu_features.h); NEON is baseline AArch64, so its variant needs no target pragma.
//
// Why one binary (a prebuild made on any machine) never runs AVX-512 code on a CPU without it:
// - Every object is compiled with the baseline x86-64 flags (binding.gyp, CMakeLists.txt: no
//   -march, no -mavx*); only the code after this header's `#pragma GCC target` in an NF_ISA 2 or 4
//   translation unit, all inside namespace nf::cpu::avx512 or nf::cpu::avx512bf16, may use AVX-512
//   instructions, and only nf::cpu::avx512bf16 the BF16 ones. The
//   headers included before the pragma keep the baseline target, so inline and template code the
//   linker merges across variants is baseline code (test/loader.test.ts disassembles the addon and
//   checks that every EVEX/zmm/mask-register instruction lies in a function of nf::cpu::avx512 or
//   avx512bf16, and every BF16 instruction in one of nf::cpu::avx512bf16).
// - The avx512 functions are reached only through NF_DISPATCH / NF_DISPATCH_TO (kernel_decl.h) or
//   an explicit switch on active_isa(), and active_isa() can only hold a variant that
//   detected_isa() allows: CPUID must report AVX-512 F, DQ, BW and VL (and AVX2, FMA, F16C, BMI1
//   and BMI2, which the pragmas below enable too), and XGETBV must show the OS saves the opmask
//   and ZMM state (native/core/cpu_features.cpp), and avx512bf16 AVX512_BF16 besides; NF_ISA and
//   setIsa() can only lower it.
//   NF_DISPATCH_TO's callers (the load-time self-check, the simd_probe test hook) check
//   detected_isa() themselves. A variant that fails the self-check is not selected either.
// So the AVX-512 kernels ship in every build and simply stay unused on AVX2 or older CPUs.
#include <cmath>
#include <cstdint>
#include <cstring>  // std::memcpy, for the bit casts of simd.h

#include "../core/arch.h"

#ifndef NF_ISA
#error "NF_ISA must be defined by the build (0 scalar, 1 avx2, 2 avx512, 3 neon, 4 avx512bf16)"
#endif
#if (NF_ISA == 1 || NF_ISA == 2 || NF_ISA == 4) && !NF_X86
#error "the avx2, avx512 and avx512bf16 variants (NF_ISA 1, 2, 4) are x86-64 only"
#endif
#if NF_ISA == 3 && !NF_ARM64
#error "the neon variant (NF_ISA 3) is AArch64 only"
#endif

#if NF_X86
#include <immintrin.h>
#elif NF_ARM64
#include <arm_neon.h>
#endif

// NF_AVX512: this variant runs AVX-512 (avx512 and avx512bf16). NF_BF16_DOT: it also has the BF16
// conversions and dot products (vcvtne2ps2bf16, vdpbf16ps). Not under clang: clang 17 (zig 0.12-dev,
// the musl and macOS builds) aborts compiling the vdpbf16ps GEMM kernel at -O1 and above, so there the
// avx512bf16 variant runs the emulated bf16 path of the other variants (the same rounding with fp32
// FMA: the same results up to fp32 summation order, without the bf16 speed-up).
#define NF_AVX512 (NF_ISA == 2 || NF_ISA == 4)
#if NF_ISA == 4 && !defined(__clang__)
#define NF_BF16_DOT 1
#else
#define NF_BF16_DOT 0
#endif

#if NF_AVX512
#if NF_ISA == 2
#define NF_ISA_NS avx512
#define NF_ISA_TARGET "avx512f,avx512dq,avx512bw,avx512vl,avx2,fma,f16c,bmi,bmi2"
#else
#define NF_ISA_NS avx512bf16
#define NF_ISA_TARGET "avx512f,avx512dq,avx512bw,avx512vl,avx512bf16,avx2,fma,f16c,bmi,bmi2"
#endif
#ifndef __clang__
#if NF_ISA == 2
#pragma GCC target("avx512f,avx512dq,avx512bw,avx512vl,avx2,fma,f16c,bmi,bmi2")
#else
#pragma GCC target("avx512f,avx512dq,avx512bw,avx512vl,avx512bf16,avx2,fma,f16c,bmi,bmi2")
#endif
// GCC 12's own _mm512_extract*/_mm256_undefined_* trip -Wmaybe-uninitialized (GCC PR 105593).
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"
#endif
#elif NF_ISA == 1
#define NF_ISA_NS avx2
#define NF_ISA_TARGET "avx2,fma,f16c,bmi,bmi2"
#ifndef __clang__
#pragma GCC target("avx2,fma,f16c,bmi,bmi2")
#endif
#elif NF_ISA == 3
#define NF_ISA_NS neon
#else
#define NF_ISA_NS scalar
#define NF_ISA_PRIMARY 1  // this pass also compiles the public, dispatching entry points
#endif
// Clang (zig c++: the musl and macOS builds) ignores `#pragma GCC target`, and takes the same
// target as an attribute of every function declared from here to isa_end.h, which each file that
// includes this one includes last.
// A file that needs more (gemm_int8.cpp: VNNI) defines NF_ISA_TARGET_EXTRA (",feature") first.
#if defined(__clang__) && defined(NF_ISA_TARGET)
#ifndef NF_ISA_TARGET_EXTRA
#define NF_ISA_TARGET_EXTRA ""
#endif
#pragma clang attribute push(__attribute__((target(NF_ISA_TARGET NF_ISA_TARGET_EXTRA))), apply_to = function)
#endif
