// Test hook for the SIMD vocabulary (native/cpu/simd_probe.h; test/simd.test.ts):
// simdProbe { isa, fn, out, a, b, c, d, args } runs helper `fn` of variant `isa` (even one the
// load-time self-check rejected, so a test can look at what is wrong with it) and returns that
// variant's lane width W. a..d are Float32Arrays of one length (those past the helper's arity
// omitted), out a Float32Array, args an optional Int32Array of up to 4 integer parameters.
#include <algorithm>
#include <string>

#include "../simd_probe.h"
#include "../../napi/args.h"
#include "../../napi/registry.h"

namespace nf::napi {
namespace {

Napi::Value SimdProbeFn(const Napi::CallbackInfo& info) {
  Args a(info, "simdProbe");
  Isa isa;
  if (!parse_isa(a.text("isa", ""), &isa)) a.fail("expected 'scalar', 'avx2', 'avx512', 'avx512bf16' or 'neon' for isa");
  const std::string fn = a.text("fn", "");
  cpu::SimdProbe p;
  p.fn = fn.c_str();
  p.out_n = a.length("out");
  p.out = a.array<float>("out", p.out_n);
  p.n = std::max<int64_t>(0, a.length("a"));
  const char* names[4] = {"a", "b", "c", "d"};
  for (int k = 0; k < 4; ++k) p.in[k] = a.array<float>(names[k], p.n, true);
  const int64_t nargs = std::max<int64_t>(0, a.length("args"));
  if (nargs > 4) a.fail("expected at most 4 args");
  const int32_t* args = a.array<int32_t>("args", nargs, true);
  for (int64_t k = 0; k < nargs; ++k) p.arg[k] = args[k];
  int width = 0;
  check(a.env(), cpu::simd_probe(isa, p, &width));
  return Napi::Number::New(a.env(), width);
}

}  // namespace

NF_REGISTER_OPS(simd_probe) { exports.Set("simdProbe", Napi::Function::New(env, SimdProbeFn, "simdProbe")); }

}  // namespace nf::napi
