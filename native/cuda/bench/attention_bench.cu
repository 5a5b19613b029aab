// GPU benchmark of the attention core (issue 23's attention table): attention_core_forward and
// attention_core_backward (its Di pass included) at each precision, timed with CUDA events on the
// backend's stream after warm-up calls; one JSON line per (precision, shape, pass) on stdout, the
// backward's twice: dQ by the recompute pass and by atomic adds ("dq"; flash_attention.h; fp32
// storage at tf32 and fp32 with Dh 128, and attention dropout, run the recompute pass in both). The
// peer is bench/gpu/attention_torch.py (PyTorch's scaled_dot_product_attention on the same shapes);
// bench/gpu/attention_table.py joins the two files into the table (FLOPs, TFLOP/s, ratio).
//   nf_cuda_attention_bench [--precisions bf16,tf32,fp32] [--storage fp32|bf16] [--T 65,197,1024,4096] [--reps N]
//                           [--warmup N] [--tiny]
// Shapes: T in {65, 197, 1024, 4096} x head width Dh in {64, 128} x causal {false, true}, with
// B = max(1, 16384 / T) sequences and H = 2048 / Dh heads (16K tokens of width 2048 per call, as
// FlashAttention-2's benchmark). Q, K, V, O, dO and the gradients are separate [B, T, H, Dh] float32
// tensors (the precision rounds them inside the kernels); with --storage bf16, bfloat16 tensors (the
// attention layer's storage under precision 'bf16', PyTorch's bf16 SDPA's): precision bf16 only, each
// line says "storage" (keep the two storages' lines in separate files: the table keys on precision).
// --tiny: T 65, Dh 64, B 1, H 1, one rep, no warm-up (the emulator build, nf_cuda_emu_attention_bench,
// runs it as a smoke test).
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "../attention.h"
#include "../common.cuh"
#include "../device.h"
#include "../flash_attention.h"

namespace {

using nf::Status;
using nf::ops::Precision;

// The backward is timed both ways of forming dQ (flash_attention.h), each line saying which ("dq").
const std::pair<nf::cuda::AttentionDq, const char*> kDqModes[] = {{nf::cuda::AttentionDq::recompute, "recompute"},
                                                                  {nf::cuda::AttentionDq::atomic, "atomic"}};

struct Shape {
  int64_t B, H, T, Dh;
  bool causal;
};

void check(const Status& st, const char* what) {
  if (st.ok()) return;
  std::fprintf(stderr, "nf_cuda_attention_bench: %s: %s: %s\n", what, st.op.c_str(), st.message.c_str());
  std::exit(1);
}
void check(cudaError_t e, const char* what) {
  if (e == cudaSuccess) return;
  std::fprintf(stderr, "nf_cuda_attention_bench: %s: %s\n", what, cudaGetErrorString(e));
  std::exit(1);
}

using nf::ops::bf16;

// v as bfloat16, rounded to nearest even (finite values).
bf16 to_bf16(float v) {
  uint32_t u;
  std::memcpy(&u, &v, 4);
  return bf16{uint16_t((u + 0x7fffu + ((u >> 16) & 1u)) >> 16)};
}

// A device array of n standard-normal-ish values (sum of 4 uniforms, centred and scaled) stored as S
// (float, or bf16 rounded).
template <class S = float>
S* random_device(size_t n, uint64_t seed) {
  std::vector<float> h(n);
  uint64_t s = seed * 0x9E3779B97F4A7C15ull + 1;
  for (float& x : h) {
    float u = 0;
    for (int i = 0; i < 4; ++i) {
      s ^= s << 13, s ^= s >> 7, s ^= s << 17;
      u += float(s >> 40) * (1.0f / 16777216.0f);
    }
    x = (u - 2.0f) * 1.7320508f;
  }
  std::vector<S> stored(n);
  for (size_t i = 0; i < n; ++i) {
    if constexpr (std::is_same_v<S, bf16>) stored[i] = to_bf16(h[i]);
    else stored[i] = h[i];
  }
  void* p = nullptr;
  check(nf::cuda::device_alloc(&p, n * sizeof(S)), "device_alloc");
  check(nf::cuda::copy_to_device(p, stored.data(), n * sizeof(S)), "copy_to_device");
  return static_cast<S*>(p);
}

const char* precision_name(Precision p) { return p == Precision::bf16 ? "bf16" : p == Precision::tf32 ? "tf32" : "fp32"; }

std::string device_name() {
#if defined(__CUDACC__)
  cudaDeviceProp prop;
  int dev = 0;
  check(cudaGetDevice(&dev), "cudaGetDevice");
  check(cudaGetDeviceProperties(&prop, dev), "cudaGetDeviceProperties");
  return prop.name;
#else
  return "SIMT emulator";
#endif
}

// Milliseconds per call of f (warmup untimed calls, then reps timed between two events).
template <class F>
double time_ms(F f, int warmup, int reps) {
  cudaStream_t s;
  check(nf::cuda::backend_stream(&s), "backend_stream");
  for (int i = 0; i < warmup; ++i) check(f(), "warm-up");
  cudaEvent_t start, stop;
  check(cudaEventCreate(&start), "cudaEventCreate");
  check(cudaEventCreate(&stop), "cudaEventCreate");
  check(cudaEventRecord(start, s), "cudaEventRecord");
  for (int i = 0; i < reps; ++i) check(f(), "timed call");
  check(cudaEventRecord(stop, s), "cudaEventRecord");
  check(cudaEventSynchronize(stop), "cudaEventSynchronize");
  float ms = 0;
  check(cudaEventElapsedTime(&ms, start, stop), "cudaEventElapsedTime");
  check(cudaEventDestroy(start), "cudaEventDestroy");
  check(cudaEventDestroy(stop), "cudaEventDestroy");
  return double(ms) / reps;
}

// The nine device arrays of a shape (S: the storage of all but lse); every shape has B·T·H·Dh =
// 16384 · 2048 elements, so one set, filled once (host-side generation of 300M values per shape would
// dominate the run), serves all.
template <class S>
struct Buffers {
  S *q, *k, *v, *dout, *o, *dq, *dk, *dv;
  float* lse;
  explicit Buffers(size_t n, size_t rows)
      : q(random_device<S>(n, 1)), k(random_device<S>(n, 2)), v(random_device<S>(n, 3)), dout(random_device<S>(n, 4)),
        o(random_device<S>(n, 5)), dq(random_device<S>(n, 6)), dk(random_device<S>(n, 7)), dv(random_device<S>(n, 8)),
        lse(random_device(rows, 9)) {}
  ~Buffers() {
    for (S* ptr : {q, k, v, dout, o, dq, dk, dv}) check(nf::cuda::device_free(ptr), "device_free");
    check(nf::cuda::device_free(lse), "device_free");
  }
};

template <class S>
void run_shape(const Shape& sh, const Buffers<S>& buf, const std::vector<Precision>& precisions, int warmup, int reps,
               const std::string& device) {
  S *q = buf.q, *k = buf.k, *v = buf.v, *dout = buf.dout, *o = buf.o, *dq = buf.dq, *dk = buf.dk, *dv = buf.dv;
  float* lse = buf.lse;
  const char* storage = std::is_same_v<S, bf16> ? "bf16" : "fp32";
  nf::ops::AttentionCoreDims d;
  d.B = sh.B, d.H = sh.H, d.Tq = d.Tk = sh.T, d.Dh = sh.Dh;
  d.q = d.k = d.v = d.o = {sh.T * sh.H * sh.Dh, sh.H * sh.Dh, sh.Dh};
  d.scale = 1.0f / std::sqrt(float(sh.Dh));
  nf::ops::AttentionMasks m;
  m.causal = sh.causal;
  const auto line = [&](Precision p, const char* pass, const char* dq_mode, double ms) {
    std::printf(
        "{\"impl\": \"nodeformer\", \"device\": \"%s\", \"precision\": \"%s\", \"B\": %lld, \"H\": %lld, \"T\": %lld, "
        "\"Dh\": %lld, \"causal\": %s, \"pass\": \"%s\", \"storage\": \"%s\", \"dq\": \"%s\", \"ms\": %.6f}\n",
        device.c_str(), precision_name(p), (long long)sh.B, (long long)sh.H, (long long)sh.T, (long long)sh.Dh,
        sh.causal ? "true" : "false", pass, storage, dq_mode, ms);
    std::fflush(stdout);
  };
  for (Precision p : precisions) {
    const auto fwd = [&] { return nf::cuda::attention_core_forward(o, lse, nullptr, q, k, v, m, d, p); };
    const auto bwd = [&] { return nf::cuda::attention_core_backward(dq, dk, dv, dout, q, k, v, o, lse, m, d, p); };
    check(fwd(), "forward");  // o and lse for the backward
    line(p, "fwd", "", time_ms(fwd, warmup, reps));
    for (const auto& [mode, name] : kDqModes) {
      nf::cuda::set_attention_dq(mode);
      line(p, "bwd", name, time_ms(bwd, warmup, reps));
    }
  }
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<Precision> precisions = {Precision::bf16, Precision::tf32, Precision::fp32};
  int warmup = 3, reps = 10;
  bool tiny = false, bf16_storage = false;
  std::vector<int64_t> lengths = {65, 197, 1024, 4096};
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--tiny") {
      tiny = true;
    } else if (a == "--reps" && i + 1 < argc) {
      reps = std::atoi(argv[++i]);
    } else if (a == "--warmup" && i + 1 < argc) {
      warmup = std::atoi(argv[++i]);
    } else if (a == "--T" && i + 1 < argc) {
      lengths.clear();
      for (const char* at = argv[++i]; *at;) {
        char* end = nullptr;
        lengths.push_back(std::strtoll(at, &end, 10));
        if (end == at || lengths.back() < 1 || (*end && *end != ',') || lengths.back() > 16384)
          return std::fprintf(stderr, "nf_cuda_attention_bench: --T takes lengths like 65,197\n"), 2;
        at = *end ? end + 1 : end;
      }
    } else if (a == "--storage" && i + 1 < argc) {
      const std::string name = argv[++i];
      if (name != "fp32" && name != "bf16")
        return std::fprintf(stderr, "nf_cuda_attention_bench: --storage takes fp32 or bf16\n"), 2;
      bf16_storage = name == "bf16";
    } else if (a == "--precisions" && i + 1 < argc) {
      precisions.clear();
      const std::string list = argv[++i];
      for (size_t at = 0; at <= list.size();) {
        const size_t end = std::min(list.find(',', at), list.size());
        const std::string name = list.substr(at, end - at);
        if (name == "bf16") precisions.push_back(Precision::bf16);
        else if (name == "tf32") precisions.push_back(Precision::tf32);
        else if (name == "fp32") precisions.push_back(Precision::fp32);
        else return std::fprintf(stderr, "nf_cuda_attention_bench: unknown precision '%s'\n", name.c_str()), 2;
        at = end + 1;
      }
    } else {
      std::fprintf(stderr, "usage: nf_cuda_attention_bench [--precisions bf16,tf32,fp32] [--storage fp32|bf16] [--T 65,197,1024,4096] "
                   "[--reps N] [--warmup N] [--tiny]\n");
      return 2;
    }
  }
  if (reps < 1 || warmup < 0) return std::fprintf(stderr, "nf_cuda_attention_bench: --reps must be >= 1, --warmup >= 0\n"), 2;
  int devices = 0;
  check(nf::cuda::device_count(&devices), "device_count");
  if (devices == 0) return std::fprintf(stderr, "nf_cuda_attention_bench: no CUDA device\n"), 1;
  const std::string device = device_name();
  std::vector<Shape> shapes;
  if (tiny) {
    shapes = {{1, 1, 65, 64, false}, {1, 1, 65, 64, true}};
    warmup = 0, reps = 1;
  } else {
    for (int64_t T : lengths)
      for (int64_t Dh : {64, 128})
        for (bool causal : {false, true}) shapes.push_back({std::max<int64_t>(1, 16384 / T), 2048 / Dh, T, Dh, causal});
  }
  size_t n = 0, rows = 0;
  for (const Shape& sh : shapes)
    n = std::max(n, size_t(sh.B * sh.T * sh.H * sh.Dh)), rows = std::max(rows, size_t(sh.B * sh.H * sh.T));
  if (bf16_storage) {  // the bf16 tensor-core kernels only
    const Buffers<bf16> buf(n, rows);
    for (const Shape& sh : shapes) run_shape(sh, buf, {Precision::bf16}, warmup, reps, device);
  } else {
    const Buffers<float> buf(n, rows);
    for (const Shape& sh : shapes) run_shape(sh, buf, precisions, warmup, reps, device);
  }
  return 0;
}
