// Warp-level matrix instructions for tensor-core kernels (sm_80+): mma.sync, ldmatrix, cp.async,
// and the conversions that feed them. Under nvcc each function is the PTX instruction (inline asm);
// under the SIMT emulator (emulator/simt.h) it is the emulator's collective warp operation with the
// same fragment layouts, so a kernel written against this header is tested on the CPU like the rest.
//
// Fragments (PTX ISA 9.0, section 9.7.14.5 "Matrix Fragments for mma"; simt.h's mma_complete and
// ldmatrix_complete implement them and cite the sections), with g = lane >> 2 (groupID) and
// t = lane % 4 (threadID_in_group):
//   m16n8k16 .bf16/.f16   A 16x16 row-major, 4 registers of 2 elements (low half first):
//                           a[0] = A[g][2t..2t+1]      a[1] = A[g+8][2t..2t+1]
//                           a[2] = A[g][2t+8..2t+9]    a[3] = A[g+8][2t+8..2t+9]
//                         B 16x8 (K x N), 2 registers: b[0] = B[2t..2t+1][g]  b[1] = B[2t+8..2t+9][g]
//   m16n8k8 .tf32         A 16x8: a[0] = A[g][t]  a[1] = A[g+8][t]  a[2] = A[g][t+4]  a[3] = A[g+8][t+4]
//                         B 8x8:  b[0] = B[t][g]  b[1] = B[t+4][g]
//   C, D (.f32, both)     c[0..1] = C[g][2t..2t+1]  c[2..3] = C[g+8][2t..2t+1]
//   ldmatrix .x1/.x2/.x4  lanes 8i..8i+7 give the row addresses of matrix i (16-byte aligned rows of
//                         8 b16 in shared memory); r[i] = M_i[g][2t..2t+1], with .trans
//                         r[i] = (M_i[2t][g], M_i[2t+1][g]). So ldmatrix<4> of a 16x16 row-major tile
//                         with lane l pointing at row l % 16, column 8 (l / 16) gives an A fragment,
//                         and ldmatrix_trans<2> of a 16 x 8 (K x N) row-major tile with lane l at
//                         row l % 16 a B fragment (tests/mma_kernels.cu's GEMM does both).
// The emulator sums each D element in a fixed order (C, then k = 0..K-1, fmaf each step); the GPU's
// order is implementation-defined: compare with a tolerance.
//
// cp.async: under nvcc the asynchronous copy; in the emulator a deferred copy that lands at the
// wait_group completing its group (the destination reads as 0xFF poison until then), so a missing
// wait or barrier shows in the emulator's results.
#pragma once
#include <cstdint>
#include <cstring>

#include "runtime.h"

namespace nf::cuda {

// ---- Conversions ----------------------------------------------------------------------------------

// bf16 bits of x, rounded to nearest even (NaN stays NaN). Host and device: on the device one
// cvt.rn.bf16.f32 (the integer form below is about nine instructions an element, which bound the bf16
// stores of the memory-bound kernels); the same bits for every number, a NaN possibly another NaN
// (the host keeps its sign and payload, the device may give its canonical NaN).
__host__ __device__ __forceinline__ uint16_t bf16_bits(float x) {
#if defined(__CUDA_ARCH__)
  uint16_t r;
  asm("cvt.rn.bf16.f32 %0, %1;\n" : "=h"(r) : "f"(x));
  return r;
#else
  uint32_t u;
  memcpy(&u, &x, 4);
  if ((u & 0x7fffffffu) > 0x7f800000u) return uint16_t((u >> 16) | 0x40u);  // quiet NaN
  u += 0x7fffu + ((u >> 16) & 1u);
  return uint16_t(u >> 16);
#endif
}
__host__ __device__ __forceinline__ float bf16_value(uint16_t bits) {
  const uint32_t u = uint32_t(bits) << 16;
  float f;
  memcpy(&f, &u, 4);
  return f;
}

// (lo, hi) rounded to bf16 and packed into one register: lo in the low half (element 2r of a
// fragment register), hi in the high half.
__device__ __forceinline__ uint32_t pack_bf16x2(float lo, float hi) {
#if defined(__CUDACC__)
  uint32_t r;
  // cvt.rn.bf16x2.f32 d, a, b puts a in the upper half of d, b in the lower (PTX ISA, cvt).
  asm("cvt.rn.bf16x2.f32 %0, %1, %2;\n" : "=r"(r) : "f"(hi), "f"(lo));
  return r;
#else
  return uint32_t(bf16_bits(lo)) | uint32_t(bf16_bits(hi)) << 16;
#endif
}

// x as a .tf32 operand: cvt.rna.tf32.f32 (round to nearest, ties away from zero, to 10 mantissa
// bits; the low 13 bits of the result are zero). A raw fp32 register given to mma .tf32 is truncated
// instead (see simt.h's tf32_operand).
__device__ __forceinline__ uint32_t to_tf32(float x) {
#if defined(__CUDACC__)
  uint32_t r;
  asm("cvt.rna.tf32.f32 %0, %1;\n" : "=r"(r) : "f"(x));
  return r;
#else
  uint32_t u;
  memcpy(&u, &x, 4);
  if ((u & 0x7f800000u) == 0x7f800000u) return u;  // inf, NaN as they are
  return (u + 0x1000u) & 0xffffe000u;              // half an ulp on the magnitude, then truncate
#endif
}

// ---- mma.sync ------------------------------------------------------------------------------------

// d = a·b + c, m16n8k16, A row-major bf16, B column-major bf16, fp32 accumulators (d may be c).
__device__ __forceinline__ void mma_m16n8k16_bf16(float (&d)[4], const uint32_t (&a)[4], const uint32_t (&b)[2],
                                                  const float (&c)[4]) {
#if defined(__CUDACC__)
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
      "{%10, %11, %12, %13};\n"
      : "=f"(d[0]), "=f"(d[1]), "=f"(d[2]), "=f"(d[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]), "f"(c[0]), "f"(c[1]), "f"(c[2]), "f"(c[3]));
#else
  ::nf::emu::mma_sync(::nf::emu::MmaKind::m16n8k16_bf16, d, a, b, c);
#endif
}

// As mma_m16n8k16_bf16 with f16 (IEEE binary16) inputs.
__device__ __forceinline__ void mma_m16n8k16_f16(float (&d)[4], const uint32_t (&a)[4], const uint32_t (&b)[2],
                                                 const float (&c)[4]) {
#if defined(__CUDACC__)
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
      "{%10, %11, %12, %13};\n"
      : "=f"(d[0]), "=f"(d[1]), "=f"(d[2]), "=f"(d[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]), "f"(c[0]), "f"(c[1]), "f"(c[2]), "f"(c[3]));
#else
  ::nf::emu::mma_sync(::nf::emu::MmaKind::m16n8k16_f16, d, a, b, c);
#endif
}

// d = a·b + c, m16n8k8, A row-major tf32, B column-major tf32 (registers from to_tf32, or raw fp32
// bits, which the tensor cores truncate), fp32 accumulators (d may be c).
__device__ __forceinline__ void mma_m16n8k8_tf32(float (&d)[4], const uint32_t (&a)[4], const uint32_t (&b)[2],
                                                 const float (&c)[4]) {
#if defined(__CUDACC__)
  asm volatile(
      "mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
      "{%10, %11, %12, %13};\n"
      : "=f"(d[0]), "=f"(d[1]), "=f"(d[2]), "=f"(d[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]), "f"(c[0]), "f"(c[1]), "f"(c[2]), "f"(c[3]));
#else
  ::nf::emu::mma_sync(::nf::emu::MmaKind::m16n8k8_tf32, d, a, b, c);
#endif
}

// ---- ldmatrix ------------------------------------------------------------------------------------

#if defined(__CUDACC__)
__device__ __forceinline__ unsigned shared_address(const void* p) {
  return static_cast<unsigned>(__cvta_generic_to_shared(p));
}
#endif

// ldmatrix.sync.aligned.m8n8.x{N}.shared.b16: N = 1, 2 or 4 matrices; `row` is the shared-memory row
// this lane provides (lanes 8i..8i+7: matrix i; lanes past 8N are not read).
template <int N>
__device__ __forceinline__ void ldmatrix(uint32_t (&r)[N], const void* row) {
  static_assert(N == 1 || N == 2 || N == 4, "ldmatrix loads 1, 2 or 4 matrices");
#if defined(__CUDACC__)
  const unsigned a = shared_address(row);
  if constexpr (N == 1)
    asm volatile("ldmatrix.sync.aligned.m8n8.x1.shared.b16 {%0}, [%1];\n" : "=r"(r[0]) : "r"(a));
  else if constexpr (N == 2)
    asm volatile("ldmatrix.sync.aligned.m8n8.x2.shared.b16 {%0, %1}, [%2];\n" : "=r"(r[0]), "=r"(r[1]) : "r"(a));
  else
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];\n"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                 : "r"(a));
#else
  ::nf::emu::ldmatrix_sync(N, false, row, r);
#endif
}

// ldmatrix ... .trans: each matrix read column-major (lane l gets column l/4, rows 2(l%4), 2(l%4)+1).
template <int N>
__device__ __forceinline__ void ldmatrix_trans(uint32_t (&r)[N], const void* row) {
  static_assert(N == 1 || N == 2 || N == 4, "ldmatrix loads 1, 2 or 4 matrices");
#if defined(__CUDACC__)
  const unsigned a = shared_address(row);
  if constexpr (N == 1)
    asm volatile("ldmatrix.sync.aligned.m8n8.x1.trans.shared.b16 {%0}, [%1];\n" : "=r"(r[0]) : "r"(a));
  else if constexpr (N == 2)
    asm volatile("ldmatrix.sync.aligned.m8n8.x2.trans.shared.b16 {%0, %1}, [%2];\n"
                 : "=r"(r[0]), "=r"(r[1])
                 : "r"(a));
  else
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [%4];\n"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                 : "r"(a));
#else
  ::nf::emu::ldmatrix_sync(N, true, row, r);
#endif
}

// ---- cp.async ------------------------------------------------------------------------------------

// cp.async.ca.shared.global: Bytes (4, 8 or 16) from global `src` to shared `dst`, both aligned to Bytes.
template <int Bytes>
__device__ __forceinline__ void cp_async_ca(void* dst, const void* src) {
  static_assert(Bytes == 4 || Bytes == 8 || Bytes == 16, "cp.async copies 4, 8 or 16 bytes");
#if defined(__CUDACC__)
  asm volatile("cp.async.ca.shared.global [%0], [%1], %2;\n" ::"r"(shared_address(dst)), "l"(src), "n"(Bytes));
#else
  ::nf::emu::cp_async(dst, src, Bytes, Bytes, false);
#endif
}

// cp.async.cg.shared.global: 16 bytes (cached in L2 only), both addresses 16-byte aligned.
__device__ __forceinline__ void cp_async_cg(void* dst, const void* src) {
#if defined(__CUDACC__)
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" ::"r"(shared_address(dst)), "l"(src));
#else
  ::nf::emu::cp_async(dst, src, 16, 16, true);
#endif
}

// cp.async.cg with src-size: the first src_bytes (0..16) bytes from `src`, the rest of the 16 zero
// (a tile edge: src_bytes = 0 reads nothing, though src must still be a valid aligned address).
__device__ __forceinline__ void cp_async_cg_zfill(void* dst, const void* src, unsigned src_bytes) {
#if defined(__CUDACC__)
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(shared_address(dst)), "l"(src), "r"(src_bytes));
#else
  ::nf::emu::cp_async(dst, src, 16, src_bytes, true);
#endif
}

// cp.async.commit_group: the copies this thread issued since its last commit form a group.
__device__ __forceinline__ void cp_async_commit() {
#if defined(__CUDACC__)
  asm volatile("cp.async.commit_group;\n" ::: "memory");
#else
  ::nf::emu::cp_async_commit_group();
#endif
}

// cp.async.wait_group N: waits until at most the N most recent committed groups of this thread are
// still in flight. Other threads see the data only after a barrier that follows their waits.
template <int N>
__device__ __forceinline__ void cp_async_wait() {
#if defined(__CUDACC__)
  asm volatile("cp.async.wait_group %0;\n" ::"n"(N) : "memory");
#else
  ::nf::emu::cp_async_wait_group(N);
#endif
}

}  // namespace nf::cuda
