// Internal: bfloat16 storage in the kernels (precision 'bf16': activations in bf16, math in fp32).
//
// ## Design: precision 'bf16' on CUDA (issue 22, item 3)
// What torch.autocast(dtype=torch.bfloat16) does, with the activations themselves stored in bf16
// (llm.c's layout) so a training step keeps half the bytes for its backward:
// - Storage. A Tensor dtype 'bfloat16' (lib/core/tensor.ts: 2 bytes a value; its host array is the
//   bits, a Uint16Array; hostValues()/toArray() give float32; cast() converts, rounding to nearest
//   even). Its device buffer is tagged bf16 (napi/device_args.h), so no float32 field takes it.
// - Which arrays are bf16 is declared once, in the op schema (native/ops/schema.h): an op's params
//   struct instantiated at T = ops::bf16 keeps its activations (x, out, the saved sums, hidden
//   layers, their gradients) as T and everything declared Acc<T> in float: parameters and their
//   gradients (fp32 masters), LayerNorm mean/rstd, losses, the images. Acc<float> is float and
//   Acc<double> double, so the CPU and the float64 reference see exactly the structs they had. The
//   CUDA binding runs X<bf16> when a call's options hold a bf16 buffer (napi/bind_ops.cpp); an op
//   without a bf16 kernel refuses the buffer naming the field.
// - Kernels are templated on the storage S (float | bf16): load() gives float, store() rounds, all
//   arithmetic is float; LayerNorm, add, dropout and the conversions move 16-byte vectors (Pack
//   below). With S = float they compute what they did (fp32 stays bit for bit: a LayerNorm over
//   float keeps one column per step, the order of its sums). bf16 kernels: LayerNorm (+ residual),
//   bias + activation (GELU etc.), add/accumulate, dropout, copyRows, LayerScale, cross-entropy,
//   patch embedding, the ViT CLS + positions start, Scale, float↔bf16 conversion (bf16.cu).
// - Products: gemm.h's GemmCallOf<TA, TC>: bf16 A and B (activations and the weight's bf16 copy)
//   into bf16 C, or into a float weight gradient (beta = 1 over the fp32 master's gradient);
//   cuBLASLt with CUDA_R_16BF operands, CUBLAS_COMPUTE_32F and a bf16 bias in the epilogue (D's
//   type, BIAS_DATA_TYPE), its CPU stand-in the same; the own kernel converts on load. The bf16
//   weight copy is the Parameter's (Parameter.storageFor), and so is the bias's the epilogue adds
//   (the ops' <bias>Rounded inputs, ops/precision.h): AdamW writes them with the master
//   (adamwMultiStep, optim.cu), anything else that changes the parameter (a load, SGD) has them
//   cast again at their next read: 2 bytes a weight, as autocast's cast cache.
// - The optimizer, gradient norms and clipping run on the fp32 masters and gradients unchanged;
//   stateDict and checkpoints are fp32. The CPU keeps fp32 storage (a CPU layer given a bf16
//   tensor computes it as float32).
// - The attention layer (attention.cu, AttentionForward/Backward<bf16>): x, memory, qkv (or q, kv),
//   ctx, out and, in the backward, dout, dctx, the projections' gradient scratch and dx are bf16; the
//   tensor-core core reads bf16 Q, K, V (dO) straight into its operand tiles and writes O (dQ, dK,
//   dV) rounded to bf16 (flash_attention.cuh, S = O = uint16_t); lse, Di and the weights output fp32.
//   Heads padded by the TypeScript layer (numHeads·headDim ≠ dModel) still run at float32 storage.
// - Not yet bf16 (converted to float32 around today's kernels, in the layers): the gemm op (average
//   pooling, drop path), mse, embeddings, token positions, decoding.
//
// A kernel templated on its storage type S (float or ops::bf16) reads with load(p) (a float) and
// writes with store(p, v) (rounded to nearest even for bf16, a NaN stays NaN: mma.cuh bf16_bits); the
// same source serves both precisions, and with S = float it compiles to the plain loads and stores it had.
// Vectors of 16 bytes (kPack<S> elements: 4 floats, 8 bf16) move with Pack<S>: load_pack/store_pack
// at an element index that is a multiple of kPack<S> from a 16-byte aligned base (the caller checks
// both; the caching allocator's blocks are 256-byte aligned), the bulk of a memory-bound kernel, the
// tail element by element.
#pragma once
#include <cstdint>
#include <cstring>
#include <type_traits>

#include "../ops/schema.h"
#include "gemm.h"
#include "mma.cuh"
#include "runtime.h"

namespace nf::cuda {

using ops::bf16;

__host__ __device__ __forceinline__ float load(const float* p) { return *p; }
__host__ __device__ __forceinline__ float load(const bf16* p) { return bf16_value(p->bits); }

// float → bf16, round to nearest even (what __float2bfloat16_rn does; a NaN stays NaN).
__host__ __device__ __forceinline__ bf16 to_bf16(float v) { return bf16{bf16_bits(v)}; }

__host__ __device__ __forceinline__ void store(float* p, float v) { *p = v; }
__host__ __device__ __forceinline__ void store(bf16* p, float v) { *p = to_bf16(v); }

// v as store(p, v) would leave it in storage S (rounded to bf16, or v itself): what a later load reads.
template <class S>
__host__ __device__ __forceinline__ float as_stored(float v) {
  S t;
  store(&t, v);
  return load(&t);
}

// Elements of S per 16-byte vector.
template <class S>
inline constexpr int kPack = int(16 / sizeof(S));

template <class S>
struct __align__(16) Pack {
  S v[kPack<S>];
};

// p[i .. i + kPack) as floats (p + i 16-byte aligned).
template <class S>
__host__ __device__ __forceinline__ void load_pack(const S* p, int64_t i, float (&out)[kPack<S>]) {
#if defined(__CUDA_ARCH__)
  const Pack<S> k = *reinterpret_cast<const Pack<S>*>(p + i);
#else
  Pack<S> k;
  std::memcpy(&k, p + i, sizeof k);
#endif
  for (int j = 0; j < kPack<S>; ++j) out[j] = load(&k.v[j]);
}
template <class S>
__host__ __device__ __forceinline__ void store_pack(S* p, int64_t i, const float (&in)[kPack<S>]) {
#if defined(__CUDA_ARCH__)
  if constexpr (std::is_same_v<S, bf16>) {  // two values a conversion (cvt.rn.bf16x2.f32), same bits
    const uint4 w{pack_bf16x2(in[0], in[1]), pack_bf16x2(in[2], in[3]), pack_bf16x2(in[4], in[5]),
                  pack_bf16x2(in[6], in[7])};
    *reinterpret_cast<uint4*>(p + i) = w;
  } else {
    Pack<S> k;
    for (int j = 0; j < kPack<S>; ++j) store(&k.v[j], in[j]);
    *reinterpret_cast<Pack<S>*>(p + i) = k;
  }
#else
  Pack<S> k;
  for (int j = 0; j < kPack<S>; ++j) store(&k.v[j], in[j]);
  std::memcpy(p + i, &k, sizeof k);
#endif
}

// W consecutive elements p[c .. c + W) as floats, and back: W = 1 (one element) or kPack<S> (one
// 16-byte vector, p + c aligned). For kernels whose lanes own chunks of W columns of a row, W a
// template parameter chosen at launch (1 keeps a float kernel exactly what it was).
template <int W, class S>
__host__ __device__ __forceinline__ void load_cols(const S* p, int64_t c, float (&v)[W]) {
  if constexpr (W == 1) v[0] = load(p + c);
  else load_pack(p, c, v);
}
template <int W, class S>
__host__ __device__ __forceinline__ void store_cols(S* p, int64_t c, const float (&v)[W]) {
  if constexpr (W == 1) store(p + c, v[0]);
  else store_pack(p, c, v);
}

// W consecutive floats p[c .. c + W) (the γ, β or bias beside a chunk of W columns): 16-byte vectors
// when W is a multiple of 4 (p + c aligned), else one by one. A warp whose lanes own chunks of W
// columns reads them either way as 32 chunks W floats apart (8 cache lines a load at W = 8): W / 4
// such loads instead of W, a quarter of the L1 wavefronts; the same values.
template <int W>
__host__ __device__ __forceinline__ void load_floats(const float* p, int64_t c, float (&v)[W]) {
  if constexpr (W % kPack<float> == 0) {
    for (int q = 0; q < W; q += kPack<float>) {
      float t[kPack<float>];
      load_pack(p, c + q, t);
      for (int j = 0; j < kPack<float>; ++j) v[q + j] = t[j];
    }
  } else {
    for (int j = 0; j < W; ++j) v[j] = p[c + j];
  }
}

// Whether every pointer given is 16-byte aligned (null counts as aligned).
template <class... P>
__host__ __device__ __forceinline__ bool aligned16(const P*... p) {
  return ((reinterpret_cast<uintptr_t>(p) % 16 == 0) && ...);
}

}  // namespace nf::cuda
