// Which instruction-set variant of the CPU kernels runs. Each kernel file is compiled four times
// (scalar, AVX2+FMA, AVX-512, AVX-512 with BF16) into namespaces nf::cpu::scalar / avx2 / avx512 /
// avx512bf16; the last differs from avx512 only where a kernel uses the BF16 dot-product
// instructions (the GEMM at precision 'bf16', native/cpu/gemm.cpp). At load, a
// known-answer self-check runs every kernel family on a tiny fixed input under each variant the
// CPU and OS support and under the scalar one, and rejects a variant that disagrees; the best
// variant left is picked, NF_ISA=scalar|avx2|avx512|avx512bf16 forces a lower one, and set_active_isa switches
// at run time (tests use it to run every variant). A variant the CPU lacks, or one the self-check
// rejected, is never selected.
#pragma once
#include <string>
#include <vector>

#include "status.h"

namespace nf {

enum class Isa : int { scalar = 0, avx2 = 1, avx512 = 2, avx512bf16 = 3 };
constexpr Isa kBestIsa = Isa::avx512bf16;  // the last of the list

const char* isa_name(Isa isa);
bool parse_isa(const std::string& name, Isa* out);

Isa detected_isa();  // the best variant this CPU and OS can run
Isa active_isa();    // the variant kernels dispatch to now
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

// Runs the check of every variant above scalar up to `best` (defined with the CPU kernels, in
// native/cpu/selfcheck.cpp, which knows their entry points).
IsaSelfCheck run_isa_selfcheck(Isa best);

}  // namespace nf
