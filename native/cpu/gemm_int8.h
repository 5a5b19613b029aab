// Dynamic int8 quantization of a Linear-style product (precision 'int8', onnxruntime's and PyTorch's
// quantize_dynamic): y[M, N] = act(x[M, K] Wᵀ + b) with W [N, K] quantized once per output channel
// (symmetric int8, the int8 packing of native/ops/packed.h) and x quantized per row at run time
// (asymmetric u8: a scale a_m and a zero point z_m per row), int32 sums, dequantized in the epilogue:
//   y[m, n] = act(a_m · s_n · (Σ_k xq[m, k] q[n, k] − z_m · Σ_k q[n, k]) + b[n]).
// The kernels (gemm_int8.cpp): vpdpbusd (u8 × s8, four products summed into int32 without
// saturation) where the CPU has AVX-512 VNNI; elsewhere exact int16 products (both operands widened
// once per call, then vpmaddwd) on AVX2 and plain int32 arithmetic on the scalar variant; every
// variant computes the same int32 sums.
// Dimension key: M rows, N output features, K input features, K4 = 4·⌈K / 4⌉.
#pragma once
#include <cstdint>

#include "../core/cpu_features.h"
#include "../core/status.h"
#include "../ops/activation.h"

namespace nf::cpu {

// The parts of an int8 packing (native/ops/packed.h), from one of its 32-column panels on.
struct Int8Weights {
  const float* scale = nullptr;     // s_n
  const int32_t* colsum = nullptr;  // Σ_k q[n, k]
  const int8_t* q = nullptr;        // the panels (null: no packing)
  int64_t K4 = 0;

  explicit operator bool() const { return q != nullptr; }
  // Columns from `c` on: empty (W is then quantized per call) unless `c` starts a panel.
  Int8Weights from_column(int64_t c) const {
    if (!q || c % 32 != 0) return {};
    return {scale + c, colsum + c, q + c * K4, K4};
  }
};

// The bytes of one k group (4 k) of a 32-column panel of the int8 packing.
constexpr int64_t kInt8GroupBytes = 128;

// The largest K whose int32 sums cannot overflow (255 · 127 · K < 2³¹).
constexpr int64_t kMaxInt8K = 65536;

// Writes the int8 packing of W [N, K] (header included) into `packed` (packed_int8_floats(N, K) floats).
void quantize_weights(float* packed, const float* W, int64_t N, int64_t K);
// The parts of the int8 packing `packed` of a weight [N, K] (its header already checked).
Int8Weights int8_weights(const float* packed, int64_t N, int64_t K);

// y = act(x Wᵀ + b) as above (preact, optional, receives the value before act), x rows lda apart,
// y and preact rows ldc apart; with `w` empty, quantizes W [N, K] for this call. `isa` is the caller's
// variant (avx512 runs the VNNI kernels where the CPU has them, the AVX2 ones otherwise). Returns
// false, computing nothing, when the buffers cannot be allocated (the caller then runs it in fp32).
// round_out: y rounded to bfloat16 as it is stored (gemm's round_out).
bool gemm_int8(Isa isa, float* y, float* preact, const float* x, const float* W, const Int8Weights& w,
               const float* b, int64_t M, int64_t N, int64_t K, int64_t lda, int64_t ldc, ops::Act act,
               bool round_out = false);

// Which int8 kernels variant `isa` runs on this CPU: on x86 the avx512 variants the VNNI ones where
// CPUID reports AVX-512 VNNI, and those hand the products to the AMX tiles (tdpbusd) where
// cpu_has_amx_int8() holds (not with NF_AMX=0); otherwise the avx2
// ones (avx2 and avx512 variants), else the scalar ones. All compute the same int32 sums.
enum class Int8Kernels { scalar, avx2, vnni, amx };
Int8Kernels int8_kernels(Isa isa);
const char* int8_kernels_name(Int8Kernels kernels);  // "scalar", "avx2", "vnni", "amx"

// The per-variant tile loops (gemm_int8.cpp): xq [Mp, ldq] u8 rows (Mp a multiple of every MR, or of
// 16 for AMX; ldq K4, or K4 rounded up to 64 for AMX, zeros past K; the avx2 kernels store the values
// as int16) with row scales a and zero points z, y = epilogue(xq qᵀ) for the 32-column panels [p0, p1)
// of w. wide: the avx2 kernels' copy of w's panels as int16, each
// [K4 / 2][32][2] (k pairs; avx2::int8_widen), else null.
struct Int8Call {
  const void* xq;
  int64_t ldq;
  const float* a;
  const int32_t* z;
  Int8Weights w;
  const int16_t* wide;
  const float* b;
  float* y;
  float* preact;
  int64_t M, N, ldc;
  ops::Act act;
  bool round;  // y rounded to bf16 as stored
  bool amx;    // the avx512_vnni tiles run on AMX (Int8Kernels::amx)
};
// And the per-variant activation quantization: rows [r0, r1) of x (lda apart) into xq (rows K4 long,
// zeros past K), a, z.
#define NF_INT8_VARIANT                                                                                          \
  void int8_tiles(const Int8Call& c, int64_t m0, int64_t m1, int64_t p0, int64_t p1);                            \
  void int8_quantize(const float* x, int64_t lda, int64_t K, int64_t K4, int64_t r0, int64_t r1, void* xq,      \
                     float* a, int32_t* z);
struct SimdProbe;  // (simd_probe.h)
// And the lane test's hook (simd_probe.cpp, test/simd.test.ts): "int8_dot_tile" and "int8_quantize".
#define NF_INT8_PROBE void int8_probe(const SimdProbe& p, Status* status);
namespace scalar { NF_INT8_VARIANT NF_INT8_PROBE }
namespace avx2 {
NF_INT8_VARIANT NF_INT8_PROBE
// Panels [p0, p1) of w as int16 pairs along k into wide (Int8Call::wide's layout).
void int8_widen(const Int8Weights& w, int64_t p0, int64_t p1, int16_t* wide);
}  // namespace avx2
namespace avx512_vnni { NF_INT8_VARIANT NF_INT8_PROBE }
#undef NF_INT8_PROBE
#undef NF_INT8_VARIANT

}  // namespace nf::cpu
