// Which instruction-set variant of the CPU kernels runs. Each kernel file is compiled once per
// variant of the target architecture into namespaces nf::cpu::<variant>: on x86-64 scalar, AVX2+FMA,
// AVX-512 and AVX-512 with BF16 (scalar / avx2 / avx512 / avx512bf16; the last differs from avx512
// only where a kernel uses the BF16 dot-product instructions: the GEMM at precision 'bf16',
// native/cpu/gemm.cpp), on AArch64 scalar and NEON (scalar / neon). At load, a
// known-answer self-check runs every kernel family on a tiny fixed input under each variant the
// CPU and OS support and under the scalar one, and rejects a variant that disagrees; the best
// variant left is picked (avx512 before avx512bf16 where the BF16 dot product measures slower than
// the FMA, bf16_dot_pays, and no AMX-BF16 tiles run the bf16 GEMM), NF_ISA=<variant> forces a lower one, and set_active_isa switches at run
// time (tests use it to run every variant). A variant the CPU lacks, or one the self-check
// rejected, is never selected.
#pragma once
#include <string>
#include <vector>

#include "arch.h"
#include "status.h"

namespace nf {

// Each variant's number is fixed across architectures (a packWeights header records it, and
// NF_ISA=<number> in native/cpu/isa.h selects it for a compilation).
enum class Isa : int { scalar = 0, avx2 = 1, avx512 = 2, neon = 3, avx512bf16 = 4 };

// The variants this build compiles, slowest first: NF_ISA and set_active_isa lower along this list.
// NEON (ASIMD) is part of every AArch64 CPU, so an arm64 build always detects it.
#if NF_X86
inline constexpr Isa kCompiledIsas[] = {Isa::scalar, Isa::avx2, Isa::avx512, Isa::avx512bf16};
#elif NF_ARM64
inline constexpr Isa kCompiledIsas[] = {Isa::scalar, Isa::neon};
#else
inline constexpr Isa kCompiledIsas[] = {Isa::scalar};
#endif

const char* isa_name(Isa isa);
bool parse_isa(const std::string& name, Isa* out);  // any variant's name, compiled here or not

// The BF16 dot product's (vdpbf16ps, the avx512bf16 variant's products at precision 'bf16') FLOP
// rate over the fp32 FMA's on this CPU, measured once on the first call (native/cpu/peak.cpp, about
// a millisecond); 0 where the CPU lacks the variant. Zen 4 runs it at about twice the FMA's rate, an
// Intel Xeon measured half. Where it is below 1 (bf16_dot_pays false) and no AMX-BF16 tiles run the
// bf16 GEMM (cpu_has_amx_bf16) the avx512 variant is chosen at load (its 'bf16' is the same rounding
// with fp32 FMAs: the same function) unless NF_ISA names avx512bf16; the attention core's bf16
// products take vdpbf16ps only where it pays.
double bf16_dot_ratio();
bool bf16_dot_pays();

// The variant's place in kCompiledIsas (0 for scalar), or -1 when this build does not compile it.
int isa_rank(Isa isa);

Isa detected_isa();  // the best variant this CPU and OS can run
// Whether CPUID reports AVX-512 VNNI (vpdpbusd; the int8 kernels' own variant, native/cpu/gemm_int8.cpp,
// which runs where this holds and the avx512 variant is usable).
bool cpu_has_avx512_vnni();
// Whether the kernels may use AMX tiles (Intel Sapphire Rapids on): AMX-INT8 (tdpbusd: the avx512
// variants' int8 products, native/cpu/gemm_int8.cpp) and AMX-BF16 (tdpbf16ps: the avx512bf16 variant's
// bf16 GEMM, native/cpu/gemm.cpp). True where CPUID reports AMX-TILE and the unit, the OS saves the
// tile state, the environment does not set NF_AMX=0, and (Linux, the only OS where they are used) the
// kernel granted this process the tile data, which the first call requests. False elsewhere, and in
// a build without the AMX kernels (NF_AMX_BUILD 0: the clang builds).
bool cpu_has_amx_int8();
bool cpu_has_amx_bf16();
Isa active_isa();    // the variant kernels dispatch to now
bool isa_runs(Isa isa);  // compiled here, and this CPU runs it (whatever the self-check said)
Status set_active_isa(Isa isa);  // refuses a variant the CPU lacks or the self-check rejected

// The self-check's verdict.
struct IsaRejection {
  Isa isa;
  std::string reason;  // which outputs disagreed with the scalar variant, and by how much
};
struct IsaChecked {
  Isa isa;
  double max_error;  // the largest relative error of its outputs against the scalar variant (NaN: a NaN output)
};
struct IsaSelfCheck {
  std::vector<IsaChecked> checked;     // every variant checked, best first
  std::vector<IsaRejection> rejected;  // those over the tolerance
  double tolerance = 0;
  double ms = 0;  // how long the whole check took
};

// The verdict for this process: the check runs once, on the first call of this or of any function
// above that needs it (the binding calls active_isa() when the addon loads).
const IsaSelfCheck& isa_selfcheck();

// Whether variant `isa` may be selected: the CPU runs it and the self-check did not reject it.
bool isa_usable(Isa isa);

// Runs the check of every compiled variant above scalar up to `best` (defined with the CPU kernels, in
// native/cpu/selfcheck.cpp, which knows their entry points).
IsaSelfCheck run_isa_selfcheck(Isa best);

}  // namespace nf
