// Which instruction-set variant of the CPU kernels runs. Each kernel file is compiled three times
// (scalar, AVX2+FMA, AVX-512) into namespaces nf::cpu::scalar / avx2 / avx512; CPUID picks the
// best one the CPU and OS support at load, NF_ISA=scalar|avx2|avx512 forces a lower one, and
// set_active_isa switches at run time (tests use it to run every variant). A variant the CPU
// lacks is never selected.
#pragma once
#include <string>

#include "status.h"

namespace nf {

enum class Isa : int { scalar = 0, avx2 = 1, avx512 = 2 };

const char* isa_name(Isa isa);
bool parse_isa(const std::string& name, Isa* out);

Isa detected_isa();  // the best variant this CPU and OS can run
Isa active_isa();    // the variant kernels dispatch to now
Status set_active_isa(Isa isa);

}  // namespace nf
