// Test kernels of the warp-level matrix instructions (../mma.cuh), built into the CUDA test
// executables (the emulator's and the GPU's): each runs one instruction with its operands placed in
// registers by the PTX ISA's fragment layouts and writes the results back in matrix order, so the
// same test checks the emulator on the CPU and, on a GPU, that the emulator's layouts are the
// hardware's. All pointers are device memory; each call queues on the backend stream.
// Public: no CUDA types.
#pragma once
#include <cstdint>

#include "../../core/status.h"

namespace nf::cuda::mma_test {

// D = A·B + C by one mma.sync.m16n8k16 (f32 accumulators): A 16x16 row-major, B 16x8 row-major
// (K x N), both bf16 bits (f16 bits when `f16`); C, D 16x8 row-major fp32.
Status mma_m16n8k16(bool f16, const uint16_t* A, const uint16_t* B, const float* C, float* D);

// D = A·B + C by one mma.sync.m16n8k8 .tf32: A 16x8, B 8x8 (K x N), C, D 16x8, all row-major fp32
// bits. round_inputs: the lanes convert A and B with cvt.rna.tf32.f32 first (else the raw fp32
// registers go in, which the tensor cores truncate).
Status mma_m16n8k8_tf32(bool round_inputs, const uint32_t* A, const uint32_t* B, const float* C, float* D);

// ldmatrix .x`num` (1, 2, 4) {.trans} .b16 by one warp. src: 33 rows of 8 16-bit values, rows 8i..8i+7
// the rows of matrix i, row 32 a decoy; row j is staged in shared-memory slot slot[j] (a permutation
// of 0..32, so row addresses are not in matrix order). Lanes below 8·num give their row's address,
// the others the decoy's (which ldmatrix must not read). out[lane * num + i] = register i of lane.
Status ldmatrix(int num, bool trans, const uint16_t* src, const int* slot, uint32_t* out);

// One warp copies src (kCpAsyncFloats floats) into shared memory through every cp.async form, in
// three commit groups waited for one by one, then writes shared memory back to out (same size):
//   floats [0, 32)     cp.async.ca 4 bytes per lane      (group 0)
//   floats [32, 96)    cp.async.ca 8 bytes per lane      (group 0)
//   floats [96, 224)   cp.async.ca 16 bytes per lane     (group 1)
//   floats [224, 352)  cp.async.cg 16 bytes per lane     (group 1)
//   floats [352, 480)  cp.async.cg 16 bytes, src-size (lane % 17) bytes, the rest zero (group 2)
constexpr int kCpAsyncFloats = 480;
Status cp_async_copy(const float* src, float* out);

// The conversions that feed the instructions, for i < n (n even): packed[i / 2] =
// pack_bf16x2(x[i], x[i + 1]) for even i (cvt.rn.bf16x2.f32), tf32[i] = to_tf32(x[i])
// (cvt.rna.tf32.f32).
Status convert(const float* x, int n, uint32_t* packed, uint32_t* tf32);

// C = A·B, A [M, K] and B [K, N] row-major bf16 bits, C [M, N] fp32: 64x64 tiles of 4 warps, k-tiles
// of 16 through cp.async double buffering, ldmatrix (.x4 for A, .x4.trans for B), mma m16n8k16.
// M, N multiples of 64, K of 16.
Status gemm_bf16(const uint16_t* A, const uint16_t* B, float* C, int M, int N, int K);

}  // namespace nf::cuda::mma_test
