// Finite scan on the GPU: the position of the first NaN or ±Inf of a float array.
// Math: a float is non-finite exactly when its 8 exponent bits are all ones (bits & 0x7f800000 ==
//   0x7f800000), whatever its sign and mantissa: an integer compare, as the CPU kernel's, unaffected
//   by fast-math or denormal modes. index = min{i : x[i] non-finite}, or −1 when there is none.
// Layout: x a flat [n] float array; index [1] double (positions can pass 2^31, as on the CPU).
// Dimension key: n elements.
// Two deterministic stages, as sum_squares: a fixed grid of at most kMaxBlocks blocks in which each
//   thread walks a grid-stride slice (coalesced) and stops at its first hit, the block taking the
//   min of its threads' first positions (block min-reduction) into a partial (workspace slot 0);
//   then one block takes the min of the partials and writes index[0].
#include "finite.h"

#include "common.cuh"

namespace nf::cuda {

namespace {

constexpr int kThreads = 256;
constexpr int kReduceThreads = 1024;
constexpr int64_t kMaxBlocks = 1024;
constexpr unsigned kExponent = 0x7f800000u;

// partial[block] = the smallest i of the block's slices with x[i] non-finite, or n.
__global__ void __launch_bounds__(kThreads) first_nonfinite_partial_kernel(long long* partial, const float* x, int64_t n) {
  NF_SHARED(long long[kWarp], scratch);
  long long first = n;
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += int64_t(gridDim.x) * blockDim.x)
    if ((__float_as_uint(x[i]) & kExponent) == kExponent) {
      first = i;  // a thread's positions only grow: its first hit is its smallest
      break;
    }
  first = block_reduce(first, MinOp{}, (long long)n, scratch);
  if (threadIdx.x == 0) partial[blockIdx.x] = first;
}

// index[0] = min of the partials, or −1 when it is n (every value finite).
__global__ void __launch_bounds__(kReduceThreads)
    first_nonfinite_index_kernel(double* index, const long long* partial, int blocks, int64_t n) {
  NF_SHARED(long long[kWarp], scratch);
  long long first = n;
  for (int i = int(threadIdx.x); i < blocks; i += int(blockDim.x)) first = partial[i] < first ? partial[i] : first;
  first = block_reduce(first, MinOp{}, (long long)n, scratch);
  if (threadIdx.x == 0) index[0] = first == n ? -1.0 : double(first);
}

}  // namespace

Status first_nonfinite(double* index, const float* x, int64_t n) {
  const char* op = "first_nonfinite";
  NF_CHECK(n >= 0, op, "n must be non-negative");
  cudaStream_t s;
  NF_TRY(backend_stream(&s));
  const int64_t blocks = reduction_blocks(n, kThreads, kMaxBlocks);
  long long* partial = nullptr;
  NF_TRY(workspace_array(0, blocks, &partial));
  NF_CUDA_TRY(op, launch(first_nonfinite_partial_kernel, dim3(unsigned(blocks)), dim3(kThreads), 0, s, partial, x, n));
  NF_CUDA_TRY(op, launch(first_nonfinite_index_kernel, dim3(1), dim3(kReduceThreads), 0, s, index,
                         static_cast<const long long*>(partial), int(blocks), n));
  return Status::Ok();
}

Status run(const ops::FirstNonFinite<float>& p) { return first_nonfinite(p.index, p.x, p.n); }

}  // namespace nf::cuda
