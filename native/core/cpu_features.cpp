#include "cpu_features.h"

#include <atomic>
#include <cstdlib>
#include <iterator>
#include <string>

#if NF_X86
#include <cpuid.h>
#endif
#if NF_AMX_BUILD
#include <sys/syscall.h>
#include <unistd.h>
#endif

namespace nf {
namespace {

#if NF_X86
uint64_t xgetbv0() {
  uint32_t eax, edx;
  __asm__ volatile("xgetbv" : "=a"(eax), "=d"(edx) : "c"(0));
  return (static_cast<uint64_t>(edx) << 32) | eax;
}
#endif

Isa probe() {
#if NF_ARM64
  return Isa::neon;  // Advanced SIMD is mandatory in AArch64: no feature bit to check
#elif NF_X86
  unsigned a, b, c, d;
  if (!__get_cpuid(1, &a, &b, &c, &d)) return Isa::scalar;
  bool osxsave = c & (1u << 27), fma = c & (1u << 12), avx = c & (1u << 28), f16c = c & (1u << 29);
  if (!osxsave || !avx) return Isa::scalar;
  uint64_t xcr0 = xgetbv0();
  bool ymm_os = (xcr0 & 0x6) == 0x6, zmm_os = (xcr0 & 0xe6) == 0xe6;
  if (!__get_cpuid_count(7, 0, &a, &b, &c, &d)) return Isa::scalar;
  bool avx2 = b & (1u << 5);
  bool avx512 = (b & (1u << 16)) && (b & (1u << 17)) && (b & (1u << 30)) && (b & (1u << 31));  // F DQ BW VL
  // isa.h's target pragmas also enable F16C, BMI1 and BMI2 (GCC emits shlx and tzcnt in the kernels).
  bool extras = f16c && (b & (1u << 3)) && (b & (1u << 8));
  if (avx512 && avx2 && fma && extras && zmm_os) {
    // AVX512_BF16 (vcvtne2ps2bf16, vdpbf16ps): CPUID.(EAX=7, ECX=1):EAX bit 5, where leaf 7 has a
    // sub-leaf 1 (CPUID.(EAX=7, ECX=0):EAX is the last sub-leaf).
    unsigned last_subleaf = a;
    if (last_subleaf >= 1 && __get_cpuid_count(7, 1, &a, &b, &c, &d) && (a & (1u << 5))) return Isa::avx512bf16;
    return Isa::avx512;
  }
  if (avx2 && fma && extras && ymm_os) return Isa::avx2;
#endif
  return Isa::scalar;
}

}  // namespace

bool cpu_has_avx512_vnni() {
#if NF_X86
  unsigned a, b, c, d;
  return __get_cpuid_count(7, 0, &a, &b, &c, &d) && (c & (1u << 11));
#else
  return false;
#endif
}

namespace {

// Whether the AMX unit with CPUID.(7, 0):EDX bit `feature` (22 AMX-BF16, 25 AMX-INT8) may run: that
// bit and AMX-TILE (bit 24), the OS saving the tile state (XCR0 bits 17 XTILECFG and 18 XTILEDATA),
// the environment not setting NF_AMX=0, and Linux granting this process the tile data (arch_prctl
// ARCH_REQ_XCOMP_PERM for XFEATURE_XTILEDATA, asked once: without it the first tile instruction faults).
bool amx_usable(int feature) {
#if NF_AMX_BUILD
  // CPUID.(7, 0):EDX where all of that holds, else 0.
  static const unsigned features = [] {
    const char* env = std::getenv("NF_AMX");
    if (env && std::string(env) == "0") return 0u;
    unsigned a, b, c, d;
    if (!__get_cpuid(1, &a, &b, &c, &d) || !(c & (1u << 27))) return 0u;  // OSXSAVE: xgetbv is there
    if (!__get_cpuid_count(7, 0, &a, &b, &c, &d) || !(d & (1u << 24))) return 0u;
    if ((xgetbv0() & (3ull << 17)) != (3ull << 17)) return 0u;
    constexpr long kReqXcompPerm = 0x1023, kXfeatureXtiledata = 18;
    return syscall(SYS_arch_prctl, kReqXcompPerm, kXfeatureXtiledata) == 0 ? d : 0u;
  }();
  return features & (1u << feature);
#else
  (void)feature;
  return false;  // (no AMX kernels in this build)
#endif
}

}  // namespace

bool cpu_has_amx_int8() {
  static const bool amx = amx_usable(25);
  return amx;
}

bool cpu_has_amx_bf16() {
  static const bool amx = amx_usable(22);
  return amx;
}

namespace {

// The best usable variant no higher than `cap`, a compiled one (scalar always is usable).
Isa best_usable(Isa cap) {
  for (int r = isa_rank(cap); r > 0; --r)
    if (isa_usable(kCompiledIsas[r])) return kCompiledIsas[r];
  return Isa::scalar;
}

// The variant chosen at load: the best the CPU runs that passed the self-check, or the best such
// one at or below NF_ISA (a name above what the CPU runs, or not a name, is ignored); avx512 rather
// than avx512bf16 where the BF16 dot product loses to the FMA (bf16_dot_pays) and no AMX-BF16 tiles
// run the bf16 GEMM instead, unless NF_ISA names it.
Isa initial_isa() {
  Isa cap = detected_isa();
  const char* env = std::getenv("NF_ISA");
  Isa forced = cap;
  const bool named = env && *env && parse_isa(env, &forced) && isa_rank(forced) >= 0;
  if (named && isa_rank(forced) < isa_rank(cap)) cap = forced;
  if (cap == Isa::avx512bf16 && !(named && forced == Isa::avx512bf16) && !bf16_dot_pays() && !cpu_has_amx_bf16())
    cap = Isa::avx512;
  return best_usable(cap);
}

std::atomic<int>& active() {
  static std::atomic<int> isa{static_cast<int>(initial_isa())};
  return isa;
}

}  // namespace

const char* isa_name(Isa isa) {
  switch (isa) {
    case Isa::scalar: return "scalar";
    case Isa::avx2: return "avx2";
    case Isa::avx512: return "avx512";
    case Isa::neon: return "neon";
    case Isa::avx512bf16: return "avx512bf16";
  }
  return "unknown";
}

bool parse_isa(const std::string& name, Isa* out) {
  for (Isa i : {Isa::scalar, Isa::avx2, Isa::avx512, Isa::neon, Isa::avx512bf16}) {
    if (name == isa_name(i)) {
      *out = i;
      return true;
    }
  }
  return false;
}

int isa_rank(Isa isa) {
  for (int r = 0; r < static_cast<int>(std::size(kCompiledIsas)); ++r)
    if (kCompiledIsas[r] == isa) return r;
  return -1;
}

Isa detected_isa() {
  static const Isa isa = probe();
  return isa;
}

Isa active_isa() { return static_cast<Isa>(active().load(std::memory_order_relaxed)); }

const IsaSelfCheck& isa_selfcheck() {
  static const IsaSelfCheck check = run_isa_selfcheck(detected_isa());
  return check;
}

bool isa_runs(Isa isa) { return isa_rank(isa) >= 0 && isa_rank(isa) <= isa_rank(detected_isa()); }

bool isa_usable(Isa isa) {
  if (!isa_runs(isa)) return false;
  for (const IsaRejection& r : isa_selfcheck().rejected)
    if (r.isa == isa) return false;
  return true;
}

Status set_active_isa(Isa isa) {
  NF_CHECK(isa_runs(isa), "set_isa",
           std::string("this CPU cannot run the ") + isa_name(isa) + " kernels (best available: " +
               isa_name(detected_isa()) + ")");
  for (const IsaRejection& r : isa_selfcheck().rejected)
    NF_CHECK(r.isa != isa, "set_isa",
             std::string("the ") + isa_name(isa) + " kernels failed the load-time self-check and are disabled (" +
                 r.reason + ")");
  active().store(static_cast<int>(isa), std::memory_order_relaxed);
  return Status::Ok();
}

}  // namespace nf
