// The warp-level matrix instructions of ../mma.cuh (mma.sync m16n8k16 bf16/f16 and m16n8k8 tf32,
// ldmatrix .x1/.x2/.x4 with and without .trans, cp.async, the cvt conversions) through the kernels
// of mma_kernels.cu, on the emulator and, built for a GPU, on the hardware: so a GPU run also checks
// the emulator's fragment layouts.
//  - Every element-to-lane mapping: probes whose results are single input elements (A times identity
//    columns, identity times B, zero times B plus C), with a distinct value per element, compared
//    exactly; for ldmatrix every register half of every lane, distinct 16-bit values, rows staged in
//    shuffled shared-memory slots with a decoy for the lanes whose addresses must not be read.
//  - Arithmetic: products of small dyadic values (exact in any summation order) compared exactly, and
//    bf16-rounded normal values within 1e-5 of the float64 sum of |terms|.
//  - A 64x64-tile GEMM (cp.async double buffering, ldmatrix, mma) against float64: ‖Δ‖/‖ref‖ < 1e-2
//    from the unrounded inputs (the bf16 tolerance), < 1e-5 from the bf16-rounded ones.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <numeric>
#include <random>

#include "mma_kernels.h"
#include "parity.h"

namespace {

using namespace nf::test;
namespace mt = nf::cuda::mma_test;

uint32_t float_bits(float x) {
  uint32_t u;
  std::memcpy(&u, &x, 4);
  return u;
}
float bits_float(uint32_t u) {
  float x;
  std::memcpy(&x, &u, 4);
  return x;
}
// bf16 bits of x rounded to nearest even (x finite).
uint16_t bf16(float x) {
  const uint32_t u = float_bits(x);
  return uint16_t((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
}
float bf16_float(uint16_t b) { return bits_float(uint32_t(b) << 16); }
// f16 bits of x, which must be exactly representable as a normal f16 or zero.
uint16_t f16(float x) {
  if (x == 0) return std::signbit(x) ? 0x8000 : 0;
  int e;
  const float m = std::frexp(std::fabs(x), &e);  // |x| = m 2^e, m in [0.5, 1)
  const uint32_t mant = uint32_t(std::ldexp(m, 11)) - 1024u;  // 10 bits below the leading one
  const uint16_t h = uint16_t((x < 0 ? 0x8000u : 0u) | uint32_t(e - 1 + 15) << 10 | mant);
  NF_ASSERT(e - 1 + 15 > 0 && e - 1 + 15 < 31 && std::ldexp(float(mant + 1024u), e - 11) == std::fabs(x),
            "not an exact f16: " + std::to_string(x));
  return h;
}

std::string at(const char* what, int r, int c) {
  return std::string(what) + "[" + std::to_string(r) + "][" + std::to_string(c) + "]";
}

// ---- mma.sync.m16n8k16 (bf16, f16) -----------------------------------------------------------------

// D = A·B + C on the device; A 16x16, B 16x8 (K x N), C 16x8, given as floats exact in the type.
std::vector<float> run_m16n8k16(bool f16_inputs, const std::vector<float>& A, const std::vector<float>& B,
                                const std::vector<float>& C) {
  std::vector<uint16_t> a(256), b(128);
  for (int i = 0; i < 256; ++i) a[size_t(i)] = f16_inputs ? f16(A[size_t(i)]) : bf16(A[size_t(i)]);
  for (int i = 0; i < 128; ++i) b[size_t(i)] = f16_inputs ? f16(B[size_t(i)]) : bf16(B[size_t(i)]);
  if (!f16_inputs) {
    for (int i = 0; i < 256; ++i) NF_ASSERT(bf16_float(a[size_t(i)]) == A[size_t(i)], "A must be exact in bf16");
    for (int i = 0; i < 128; ++i) NF_ASSERT(bf16_float(b[size_t(i)]) == B[size_t(i)], "B must be exact in bf16");
  }
  Device<uint16_t> da(a), db(b);
  Device<float> dc(C), dd(128);
  NF_ASSERT_OK(mt::mma_m16n8k16(f16_inputs, da, db, dc, dd));
  return dd.download();
}

// got == want element by element, naming the first few mismatches.
void expect_equal(const std::string& what, const std::vector<float>& got, const std::vector<double>& want, int cols) {
  int bad = 0;
  for (size_t i = 0; i < want.size(); ++i)
    if (!(double(got[i]) == want[i]) && ++bad <= 4)
      NF_EXPECT(false, what + ": " + at("D", int(i) / cols, int(i) % cols) + " = " + std::to_string(got[i]) +
                           ", want " + std::to_string(want[i]));
  NF_EXPECT(bad == 0, what + ": " + std::to_string(bad) + " wrong elements");
}

// Small dyadic values v/16, |v| <= 128: exact in bf16 and f16, and every product and partial sum of
// a 16-term dot product is exact in fp32, whatever the order.
std::vector<float> dyadic(size_t n, int range, float scale) {
  std::uniform_int_distribution<int> d(-range, range);
  std::vector<float> v(n);
  for (float& x : v) x = float(d(rng())) * scale;
  return v;
}

NF_TEST(cuda_mma_m16n8k16_fragments) {
  for (bool use_f16 : {false, true}) {
    const std::string type = use_f16 ? "f16" : "bf16";
    // A: 1..256, distinct and exact in both types.
    std::vector<float> A(256), B(128), C(128), zeroC(128, 0.0f), I16(256, 0.0f);
    std::iota(A.begin(), A.end(), 1.0f);
    std::iota(B.begin(), B.end(), 1.0f);
    for (int i = 0; i < 128; ++i) C[size_t(i)] = 1000.5f + float(i);
    for (int i = 0; i < 16; ++i) I16[size_t(i * 16 + i)] = 1.0f;
    // A times the identity on k 0..7, then on k 8..15: D = the columns of A.
    for (int half = 0; half < 2; ++half) {
      std::vector<float> E(128, 0.0f);
      for (int n = 0; n < 8; ++n) E[size_t((8 * half + n) * 8 + n)] = 1.0f;
      std::vector<double> want(128);
      for (int m = 0; m < 16; ++m)
        for (int n = 0; n < 8; ++n) want[size_t(m * 8 + n)] = A[size_t(m * 16 + 8 * half + n)];
      expect_equal(type + " A columns " + std::to_string(8 * half) + "+", run_m16n8k16(use_f16, A, E, zeroC), want, 8);
    }
    // Identity times B: D = B.
    expect_equal(type + " B", run_m16n8k16(use_f16, I16, B, zeroC), std::vector<double>(B.begin(), B.end()), 8);
    // Zero times B, plus C: D = C.
    expect_equal(type + " C", run_m16n8k16(use_f16, std::vector<float>(256, 0.0f), B, C),
                 std::vector<double>(C.begin(), C.end()), 8);
    // Dyadic products: exact.
    for (int rep = 0; rep < 3; ++rep) {
      const std::vector<float> a = dyadic(256, 128, 1.0f / 16), b = dyadic(128, 128, 1.0f / 16),
                               c = dyadic(128, 1000, 1.0f / 8);
      std::vector<double> want(128);
      for (int m = 0; m < 16; ++m)
        for (int n = 0; n < 8; ++n) {
          double s = c[size_t(m * 8 + n)];
          for (int k = 0; k < 16; ++k) s += double(a[size_t(m * 16 + k)]) * b[size_t(k * 8 + n)];
          want[size_t(m * 8 + n)] = s;
        }
      expect_equal(type + " dyadic product", run_m16n8k16(use_f16, a, b, c), want, 8);
    }
    if (use_f16) continue;
    // bf16-rounded normal values: within 1e-5 of the float64 sum of the magnitudes.
    std::vector<float> a(256), b(128), c(128);
    const Vec ra = randn(256), rb = randn(128), rc = randn(128);
    for (int i = 0; i < 256; ++i) a[size_t(i)] = bf16_float(bf16(float(ra[size_t(i)])));
    for (int i = 0; i < 128; ++i) {
      b[size_t(i)] = bf16_float(bf16(float(rb[size_t(i)])));
      c[size_t(i)] = float(rc[size_t(i)]);
    }
    const std::vector<float> got = run_m16n8k16(false, a, b, c);
    for (int m = 0; m < 16; ++m)
      for (int n = 0; n < 8; ++n) {
        double s = c[size_t(m * 8 + n)], mag = std::fabs(s);
        for (int k = 0; k < 16; ++k) {
          const double p = double(a[size_t(m * 16 + k)]) * b[size_t(k * 8 + n)];
          s += p, mag += std::fabs(p);
        }
        NF_EXPECT(std::fabs(got[size_t(m * 8 + n)] - s) <= 1e-5 * mag, "bf16 normal values: " + at("D", m, n));
      }
  }
}

// ---- mma.sync.m16n8k8 .tf32 ------------------------------------------------------------------------

std::vector<float> run_tf32(bool round_inputs, const std::vector<float>& A, const std::vector<float>& B,
                            const std::vector<float>& C) {
  std::vector<uint32_t> a(128), b(64);
  for (int i = 0; i < 128; ++i) a[size_t(i)] = float_bits(A[size_t(i)]);
  for (int i = 0; i < 64; ++i) b[size_t(i)] = float_bits(B[size_t(i)]);
  Device<uint32_t> da(a), db(b);
  Device<float> dc(C), dd(128);
  NF_ASSERT_OK(mt::mma_m16n8k8_tf32(round_inputs, da, db, dc, dd));
  return dd.download();
}

NF_TEST(cuda_mma_m16n8k8_tf32_fragments) {
  std::vector<float> A(128), B(64), C(128), zeroC(128, 0.0f), I8(64, 0.0f), I8x2(128, 0.0f);
  std::iota(A.begin(), A.end(), 1.0f);
  std::iota(B.begin(), B.end(), 1.0f);
  for (int i = 0; i < 128; ++i) C[size_t(i)] = 1000.5f + float(i);
  for (int i = 0; i < 8; ++i) {
    I8[size_t(i * 8 + i)] = 1.0f;
    I8x2[size_t(i * 8 + i)] = 1.0f, I8x2[size_t((i + 8) * 8 + i)] = 2.0f;
  }
  // A times the identity: D = A.
  expect_equal("tf32 A", run_tf32(false, A, I8, zeroC), std::vector<double>(A.begin(), A.end()), 8);
  // [I; 2I] times B: D = [B; 2B].
  std::vector<double> want(128);
  for (int m = 0; m < 16; ++m)
    for (int n = 0; n < 8; ++n) want[size_t(m * 8 + n)] = (m < 8 ? 1.0 : 2.0) * B[size_t((m % 8) * 8 + n)];
  expect_equal("tf32 B", run_tf32(false, I8x2, B, zeroC), want, 8);
  expect_equal("tf32 C", run_tf32(false, std::vector<float>(128, 0.0f), B, C), std::vector<double>(C.begin(), C.end()),
               8);
  // Dyadic values v/64, |v| <= 1024 (11 significant bits, exact in tf32): exact products and sums.
  for (int rep = 0; rep < 3; ++rep) {
    const std::vector<float> a = dyadic(128, 1024, 1.0f / 64), b = dyadic(64, 1024, 1.0f / 64),
                             c = dyadic(128, 1000, 1.0f / 8);
    for (int m = 0; m < 16; ++m)
      for (int n = 0; n < 8; ++n) {
        double s = c[size_t(m * 8 + n)];
        for (int k = 0; k < 8; ++k) s += double(a[size_t(m * 8 + k)]) * b[size_t(k * 8 + n)];
        want[size_t(m * 8 + n)] = s;
      }
    expect_equal("tf32 dyadic product", run_tf32(false, a, b, c), want, 8);
  }
  // fp32 bits below tf32's 10 mantissa bits: truncated as raw registers, rounded to nearest (ties
  // away from zero) by cvt.rna.tf32.f32. A times the identity shows the operand the mma used.
  const uint32_t tails[] = {0x1000u, 0x0fffu, 0x1001u, 0x1fffu, 0x0001u, 0x0800u};
  std::vector<float> T(128);
  std::vector<double> trunc(128), rna(128);
  for (int i = 0; i < 128; ++i) {
    const uint32_t base = float_bits(float(i % 16 + 1) * (i % 3 == 0 ? -1.0f : 1.0f)) + (uint32_t(i) << 13);
    const uint32_t u = (base & ~0x1fffu) | tails[i % 6];
    T[size_t(i)] = bits_float(u);
    trunc[size_t(i)] = bits_float(u & ~0x1fffu);
    rna[size_t(i)] = bits_float((u + 0x1000u) & ~0x1fffu);
  }
  expect_equal("tf32 raw fp32 operands (truncated)", run_tf32(false, T, I8, zeroC), trunc, 8);
  expect_equal("tf32 operands through cvt.rna.tf32.f32", run_tf32(true, T, I8, zeroC), rna, 8);
}

// ---- ldmatrix ---------------------------------------------------------------------------------------

NF_TEST(cuda_ldmatrix_fragments) {
  // 33 rows of 8 distinct values (row 32: the decoy), staged in shuffled slots.
  std::vector<uint16_t> src(33 * 8);
  for (int i = 0; i < 33 * 8; ++i) src[size_t(i)] = uint16_t(0x1000 + 0x10 * (i / 8) + i % 8);
  std::vector<int> slot(33);
  std::iota(slot.begin(), slot.end(), 0);
  std::shuffle(slot.begin(), slot.end(), rng());
  Device<uint16_t> dsrc(src);
  Device<int> dslot(slot);
  for (int num : {1, 2, 4})
    for (bool trans : {false, true}) {
      Device<uint32_t> dout(size_t(32 * num));
      NF_ASSERT_OK(mt::ldmatrix(num, trans, dsrc, dslot, dout));
      const std::vector<uint32_t> out = dout.download();
      auto M = [&](int i, int r, int c) { return uint32_t(src[size_t((8 * i + r) * 8 + c)]); };
      int bad = 0;
      for (int lane = 0; lane < 32; ++lane)
        for (int i = 0; i < num; ++i) {
          const int g = lane / 4, t = lane % 4;
          const uint32_t want =
              trans ? M(i, 2 * t, g) | M(i, 2 * t + 1, g) << 16 : M(i, g, 2 * t) | M(i, g, 2 * t + 1) << 16;
          const uint32_t got = out[size_t(lane * num + i)];
          if (got != want && ++bad <= 4) {
            char buf[160];
            std::snprintf(buf, sizeof buf, "ldmatrix.x%d%s lane %d r[%d] = 0x%08x, want 0x%08x", num,
                          trans ? ".trans" : "", lane, i, got, want);
            NF_EXPECT(false, buf);
          }
        }
      NF_EXPECT(bad == 0, std::to_string(bad) + " wrong registers");
    }
}

// ---- cp.async -----------------------------------------------------------------------------------------

NF_TEST(cuda_cp_async_copies) {
  std::vector<float> src(mt::kCpAsyncFloats);
  for (int i = 0; i < mt::kCpAsyncFloats; ++i) src[size_t(i)] = 0.25f + float(i);
  Device<float> dsrc(src), dout(size_t(mt::kCpAsyncFloats));
  NF_ASSERT_OK(mt::cp_async_copy(dsrc, dout));
  const std::vector<float> out = dout.download();
  for (int i = 0; i < 352; ++i) NF_EXPECT(out[size_t(i)] == src[size_t(i)], "float " + std::to_string(i));
  // The src-size form: lane l copies l % 17 bytes of its 16 and zero-fills the rest.
  for (int lane = 0; lane < 32; ++lane) {
    const unsigned char* got = reinterpret_cast<const unsigned char*>(&out[size_t(352 + 4 * lane)]);
    const unsigned char* from = reinterpret_cast<const unsigned char*>(&src[size_t(352 + 4 * lane)]);
    for (int byte = 0; byte < 16; ++byte)
      NF_EXPECT(got[byte] == (byte < lane % 17 ? from[byte] : 0),
                "zfill lane " + std::to_string(lane) + " byte " + std::to_string(byte));
  }
}

// ---- cvt ----------------------------------------------------------------------------------------------

NF_TEST(cuda_mma_conversions) {
  // Ties and near-ties of bf16 (ulp 2^-7 at 1) and tf32 (ulp 2^-10), both signs, NaN, inf, zero.
  std::vector<float> x;
  for (uint32_t tail : {0x0000u, 0x8000u, 0x18000u, 0x7fffu, 0x8001u, 0x1000u, 0x3000u, 0x0fffu, 0x1001u})
    for (float base : {1.0f, -1.5f, 3.0e-3f, 7.0e20f}) x.push_back(bits_float(float_bits(base) + tail));
  x.push_back(INFINITY), x.push_back(-INFINITY), x.push_back(0.0f), x.push_back(-0.0f);
  x.push_back(std::nanf("")), x.push_back(3.3895314e38f);  // (bf16 rounds the largest values to inf)
  if (x.size() % 2) x.push_back(1.0f);
  const int n = int(x.size());
  Device<float> dx(x);
  Device<uint32_t> dpacked{size_t(n / 2)}, dtf32{size_t(n)};
  NF_ASSERT_OK(mt::convert(dx, n, dpacked, dtf32));
  const std::vector<uint32_t> packed = dpacked.download(), tf32 = dtf32.download();
  auto want_bf16 = [](float v) -> uint32_t { return std::isnan(v) ? 0x7fc0u : bf16(v); };
  for (int i = 0; i < n; ++i) {
    const uint32_t u = float_bits(x[size_t(i)]);
    const bool special = (u & 0x7f800000u) == 0x7f800000u;
    const uint32_t want = special ? u : (u + 0x1000u) & 0xffffe000u;
    if (std::isnan(x[size_t(i)])) NF_EXPECT(std::isnan(bits_float(tf32[size_t(i)])), "tf32 NaN");
    else NF_EXPECT(tf32[size_t(i)] == want, "to_tf32 of value " + std::to_string(i));
    if (i % 2 == 0) {
      const uint32_t p = packed[size_t(i / 2)];
      const uint32_t lo = p & 0xffffu, hi = p >> 16;
      const bool lo_ok =
          std::isnan(x[size_t(i)]) ? std::isnan(bf16_float(uint16_t(lo))) : lo == want_bf16(x[size_t(i)]);
      const bool hi_ok =
          std::isnan(x[size_t(i + 1)]) ? std::isnan(bf16_float(uint16_t(hi))) : hi == want_bf16(x[size_t(i + 1)]);
      NF_EXPECT(lo_ok && hi_ok, "pack_bf16x2 of values " + std::to_string(i) + ", " + std::to_string(i + 1));
    }
  }
}

// ---- A tiled GEMM ---------------------------------------------------------------------------------

NF_TEST(cuda_mma_gemm_bf16) {
  struct Shape {
    int M, N, K;
  };
  for (const Shape& s : {Shape{64, 64, 64}, Shape{128, 192, 96}}) {
    const std::string name = dims({{"M", s.M}, {"N", s.N}, {"K", s.K}});
    const Vec A = randn(size_t(s.M) * size_t(s.K)), B = randn(size_t(s.K) * size_t(s.N));
    std::vector<uint16_t> a(A.size()), b(B.size());
    for (size_t i = 0; i < A.size(); ++i) a[i] = bf16(float(A[i]));
    for (size_t i = 0; i < B.size(); ++i) b[i] = bf16(float(B[i]));
    Vec ref(size_t(s.M) * size_t(s.N)), ref_rounded(ref.size());
    for (int m = 0; m < s.M; ++m)
      for (int n = 0; n < s.N; ++n) {
        double sum = 0, sum_rounded = 0;
        for (int k = 0; k < s.K; ++k) {
          sum += A[size_t(m) * size_t(s.K) + size_t(k)] * B[size_t(k) * size_t(s.N) + size_t(n)];
          sum_rounded += double(bf16_float(a[size_t(m) * size_t(s.K) + size_t(k)])) *
                         double(bf16_float(b[size_t(k) * size_t(s.N) + size_t(n)]));
        }
        ref[size_t(m) * size_t(s.N) + size_t(n)] = sum;
        ref_rounded[size_t(m) * size_t(s.N) + size_t(n)] = sum_rounded;
      }
    Device<uint16_t> da(a), db(b);
    Device<float> dc(ref.size());
    NF_ASSERT_OK(mt::gemm_bf16(da, db, dc, s.M, s.N, s.K));
    const std::vector<float> c = dc.download();
    check_close("mma gemm bf16 (vs fp32 inputs)", name, c, ref, 1e-2);
    check_close("mma gemm bf16 (vs bf16 inputs)", name, c, ref_rounded, 1e-5);
  }
  NF_EXPECT(!mt::gemm_bf16(nullptr, nullptr, nullptr, 64, 64, 8).ok(), "K not a multiple of 16");
}

}  // namespace
