// The SIMD vocabulary's test hook (simd_probe.h): one named ISA-specific helper applied to float
// arrays with this variant's lane width W. For operands a, b, c, d (SimdProbe::in, n floats each):
//   lane-wise, n a multiple of W, out[i] = f(a[i], b[i], ...) computed W lanes at a time:
//     vzero (no operand); vload (vstore(out, vload(a)), the two moving every lane); vset1
//     (out[i] = lane i % W of vset1(a[i])); vabs vsqrt vround vpow2i vexp vnormcdf vnormcdf_exp (its e) vnormcdf_reduced vtanh vround_bf16 (a);
//     vadd vsub vmul vdiv vmax vmin vcopysign (a, b); vfma vfnma vselect_pos (a, b, c);
//     vselect_lt (a, b, c, d); act_forward, act_derivative (a; arg[0] = Act); act_tile and
//     act_derivative_tile (a; arg[0] = Act; the vectors in 2 x 2 tiles, the last n mod 4W in 1 x 1 tiles).
//   reductions, n a multiple of W: out[g] = f(a[gW .. gW + W)) for g < n / W: vsum, vhmax.
//   tails, n a multiple of W, for every group of W floats (arg[0] = t in [0, W]): vload_n (all W
//     lanes of vload_n(a, t) stored), vstore_n (vstore_n(out, vload(a), t); out past t keeps what
//     the caller put there). tail_mask is what both use on AVX2 and AVX-512. vload_w and vstore_w
//     likewise (the plain load and store when t = W).
//   rows of any length: vround_bf16_n (out[0:n] = vround_bf16(a[0:n]), arg[0] = n, out past n kept),
//   act_forward_n (out = act(a); arg[0] = Act), act_backward_n
//     (out = a ∘ act'(b); arg[0] = Act).
//   pack_k_major, pack_transposed (pack_inl.h): arg = {P, rows, kc, ld}, a the source, out the
//     panels; transpose_8x8 (the vector variants only): arg = {rows, lds, ldd}.
//   avx512bf16 only: vdot_bf16 (lane-wise: acc, a, b), pack_bf16_pair_rows: arg = {P, kc}, a an fp32
//     panel [kc][P], out its rows k, k + 1 paired, [⌈kc / 2⌉][P] (through pack_row_pairs);
//     pack_bf16_row: arg = {n, rows (0: 1)}, a the rows [rows][n], out each row's ⌈n / 2⌉ pairs of
//     neighbours (through pack_rows).
//   first_nonfinite_range (finite.h): arg = {begin, end}; out[0] = the index found, or -1.
//   int8_dot_tile, int8_quantize: the int8 kernels' (gemm_int8.cpp int8_probe; the avx512 variant's
//     are the VNNI ones, which need AVX-512 VNNI); int8_amx_tile: the AMX block's sums (avx512 on an
//     AMX-INT8 CPU only).
#include "simd_probe.h"

#include <algorithm>
#include <cstring>
#include <string>
#include <type_traits>

#include "finite.h"
#include "gemm.h"
#include "isa.h"

namespace nf::cpu::NF_ISA_NS {
#include "simd.h"
#include "activation_inl.h"
#include "pack_inl.h"

namespace {

constexpr const char* kOp = "simd_probe";

// How many operands p has (they are given in order).
int arity(const SimdProbe& p) {
  int k = 0;
  while (k < 4 && p.in[k]) ++k;
  return k;
}

// Checks that p has `k` operands, out is as long as they are, and (whole_vectors) n is a multiple
// of W.
Status shape(const SimdProbe& p, int k, bool whole_vectors) {
  const std::string fn = p.fn;
  NF_CHECK(arity(p) >= k, kOp, fn + " takes " + std::to_string(k) + " operands");
  NF_CHECK(!whole_vectors || p.n % W == 0, kOp, fn + " needs n a multiple of W = " + std::to_string(W));
  NF_CHECK(p.out_n >= p.n, kOp, fn + ": out is shorter than the operands");
  return Status::Ok();
}

// out[i] = f(in[0][i], ..., in[k - 1][i]), W lanes at a time.
template <int k, class F>
Status lanes(const SimdProbe& p, F f) {
  NF_TRY(shape(p, k, true));
  const float* const* in = p.in;
  for (int64_t i = 0; i < p.n; i += W) {
    if constexpr (k == 1) vstore(p.out + i, f(vload(in[0] + i)));
    if constexpr (k == 2) vstore(p.out + i, f(vload(in[0] + i), vload(in[1] + i)));
    if constexpr (k == 3) vstore(p.out + i, f(vload(in[0] + i), vload(in[1] + i), vload(in[2] + i)));
    if constexpr (k == 4)
      vstore(p.out + i, f(vload(in[0] + i), vload(in[1] + i), vload(in[2] + i), vload(in[3] + i)));
  }
  return Status::Ok();
}

// out[g] = f(in[0][gW .. gW + W)).
template <class F>
Status reduce(const SimdProbe& p, F f) {
  NF_TRY(shape(p, 1, true));
  for (int64_t g = 0; g < p.n / W; ++g) p.out[g] = f(vload(p.in[0] + g * W));
  return Status::Ok();
}

template <int P>
void pack(bool transposed, float* dst, const float* src, int64_t ld, int64_t rows, int64_t kc) {
  if (transposed)
    pack_transposed<P>(dst, src, ld, rows, kc);
  else
    pack_k_major<P>(dst, src, ld, rows, kc);
}

Status run_pack(const SimdProbe& p, bool transposed) {
  const int64_t P = p.arg[0], rows = p.arg[1], kc = p.arg[2], ld = p.arg[3];
  NF_CHECK(rows >= 0 && kc >= 0 && ld >= (transposed ? kc : rows), kOp, "pack: bad rows, kc or ld");
  const int64_t src_end = rows == 0 || kc == 0 ? 0 : transposed ? (rows - 1) * ld + kc : (kc - 1) * ld + rows;
  NF_CHECK(src_end <= p.n && (rows + P - 1) / std::max<int64_t>(P, 1) * P * kc <= p.out_n, kOp,
           "pack: the source or the panels are too short");
  switch (P) {  // the panel heights gemm.cpp uses: MR and NR of every variant
    case 4: pack<4>(transposed, p.out, p.in[0], ld, rows, kc); break;
    case 6: pack<6>(transposed, p.out, p.in[0], ld, rows, kc); break;
    case 12: pack<12>(transposed, p.out, p.in[0], ld, rows, kc); break;
    case 16: pack<16>(transposed, p.out, p.in[0], ld, rows, kc); break;
    case 32: pack<32>(transposed, p.out, p.in[0], ld, rows, kc); break;
    default: return Status::Error(kOp, "pack: P must be 4, 6, 12, 16 or 32");
  }
  return Status::Ok();
}

Status run_transpose(const SimdProbe& p) {
#if NF_HAS_TRANSPOSE_8X8
  const int64_t rows = p.arg[0], lds = p.arg[1], ldd = p.arg[2];
  NF_CHECK(rows == 4 || rows == 6 || rows == 8, kOp, "transpose_8x8: rows must be 4, 6 or 8");
  NF_CHECK(lds >= 8 && ldd >= rows && (rows - 1) * lds + 8 <= p.n && 7 * ldd + rows <= p.out_n, kOp,
           "transpose_8x8: bad strides, or the arrays are too short");
  transpose_8x8(p.out, ldd, p.in[0], lds, static_cast<int>(rows));
  return Status::Ok();
#else
  return Status::Error(kOp, "transpose_8x8 is not in this variant");
#endif
}

Status run_bf16(const SimdProbe& p, const std::string& fn) {
#if NF_BF16_DOT
  if (fn == "vdot_bf16") return lanes<3>(p, [&](vf acc, vf a, vf b) { return vdot_bf16(acc, a, b); });
  if (fn == "pack_bf16_row") {
    const int64_t n = p.arg[0], rows = p.arg[1] ? p.arg[1] : 1;
    NF_CHECK(arity(p) >= 1 && n >= 0 && rows >= 1 && rows * n <= p.n && rows * ((n + 1) / 2) <= p.out_n, kOp,
             "pack_bf16_row: takes 1 operand of at least rows·n floats and writes rows·⌈n / 2⌉");
    pack_rows(p.out, (n + 1) / 2, p.in[0], n, rows, n);
    return Status::Ok();
  }
  const int64_t P = p.arg[0], kc = p.arg[1];
  NF_CHECK(arity(p) >= 1 && P >= 1 && kc >= 0 && kc * P <= p.n && (kc + 1) / 2 * P <= p.out_n, kOp,
           "pack_bf16_pair_rows: takes 1 operand of kc·P floats and writes ⌈kc / 2⌉·P");
  pack_row_pairs(p.out, P, p.in[0], P, kc, P);
  return Status::Ok();
#else
  return Status::Error(kOp, fn + " is only in the avx512bf16 variant");
#endif
}

Status run_act(const SimdProbe& p, const std::string& fn) {
  NF_CHECK(p.arg[0] >= 0 && p.arg[0] < ops::kActCount, kOp,
           fn + ": arg[0] must be an Act (0 none, 1 relu, 2 gelu, 3 gelu_tanh, 4 silu, 5 tanh)");
  const Act act = static_cast<Act>(p.arg[0]);
  if (fn == "act_forward") return lanes<1>(p, [act](vf x) { return act_forward(x, act); });
  if (fn == "act_derivative") return lanes<1>(p, [act](vf x) { return act_derivative(x, act); });
  if (fn == "act_tile" || fn == "act_derivative_tile") {
    NF_TRY(shape(p, 1, true));
    const bool derivative = fn == "act_derivative_tile";
    const auto apply = [&](auto& t) { derivative ? act_derivative_tile(t, act) : act_tile(t, act); };
    int64_t i = 0;
    for (; i + 4 * W <= p.n; i += 4 * W) {
      vf t[2][2];
      for (int v = 0; v < 4; ++v) t[v / 2][v % 2] = vload(p.in[0] + i + v * W);
      apply(t);
      for (int v = 0; v < 4; ++v) vstore(p.out + i + v * W, t[v / 2][v % 2]);
    }
    for (; i < p.n; i += W) {
      vf t[1][1] = {{vload(p.in[0] + i)}};
      apply(t);
      vstore(p.out + i, t[0][0]);
    }
    return Status::Ok();
  }
  if (fn == "act_forward_n") {
    NF_TRY(shape(p, 1, false));
    act_forward_n(p.out, p.in[0], p.n, act);
  } else {
    NF_TRY(shape(p, 2, false));
    act_backward_n(p.out, p.in[0], p.in[1], p.n, act);
  }
  return Status::Ok();
}

Status run_tail(const SimdProbe& p, bool load) {
  NF_TRY(shape(p, 1, true));
  const int64_t t = p.arg[0];
  NF_CHECK(t >= 0 && t <= W, kOp, std::string(p.fn) + ": the tail length must lie in [0, W]");
  for (int64_t i = 0; i < p.n; i += W) {
    const bool whole = std::string(p.fn).back() == 'w';  // vload_w, vstore_w
    if (load)
      vstore(p.out + i, whole ? vload_w(p.in[0] + i, static_cast<int>(t)) : vload_n(p.in[0] + i, static_cast<int>(t)));
    else if (whole)
      vstore_w(p.out + i, vload(p.in[0] + i), static_cast<int>(t));
    else
      vstore_n(p.out + i, vload(p.in[0] + i), static_cast<int>(t));
  }
  return Status::Ok();
}

Status run_finite(const SimdProbe& p) {
  const int64_t begin = p.arg[0], end = p.arg[1];
  NF_CHECK(arity(p) >= 1 && p.out_n >= 1, kOp, "first_nonfinite_range takes 1 operand and writes out[0]");
  NF_CHECK(begin >= 0 && begin <= end && end <= p.n, kOp, "first_nonfinite_range: need 0 <= begin <= end <= n");
  p.out[0] = static_cast<float>(NF_ISA_NS::first_nonfinite_range(p.in[0], begin, end));
  return Status::Ok();
}

// The lambdas capture by reference ([&]) though they use nothing: a lambda without a capture also
// gets a conversion to a function pointer, whose thunk GCC compiles without the ISA's target.
Status run(const SimdProbe& p) {
  const std::string fn = p.fn;
  NF_CHECK(p.n >= 0 && p.out_n >= 0, kOp, "negative length");
  if (fn == "vzero" || fn == "vload") {
    NF_TRY(shape(p, fn == "vload", true));
    for (int64_t i = 0; i < p.n; i += W) vstore(p.out + i, fn == "vload" ? vload(p.in[0] + i) : vzero());
    return Status::Ok();
  }
  if (fn == "vabs") return lanes<1>(p, [&](vf a) { return vabs(a); });
  if (fn == "vsqrt") return lanes<1>(p, [&](vf a) { return vsqrt(a); });
  if (fn == "vround") return lanes<1>(p, [&](vf a) { return vround(a); });
  if (fn == "vpow2i") return lanes<1>(p, [&](vf a) { return vpow2i(a); });
  if (fn == "vexp") return lanes<1>(p, [&](vf a) { return vexp(a); });
  if (fn == "vnormcdf") return lanes<1>(p, [&](vf a) { return vnormcdf(a); });
  if (fn == "vnormcdf_exp") return lanes<1>(p, [&](vf a) { vf e; vnormcdf_exp(a, e); return e; });
  if (fn == "vnormcdf_reduced") return lanes<1>(p, [&](vf a) { return vnormcdf_reduced(a); });
  if (fn == "vtanh") return lanes<1>(p, [&](vf a) { return vtanh(a); });
  if (fn == "vround_bf16") return lanes<1>(p, [&](vf a) { return vround_bf16(a); });
  if (fn == "vadd") return lanes<2>(p, [&](vf a, vf b) { return vadd(a, b); });
  if (fn == "vsub") return lanes<2>(p, [&](vf a, vf b) { return vsub(a, b); });
  if (fn == "vmul") return lanes<2>(p, [&](vf a, vf b) { return vmul(a, b); });
  if (fn == "vdiv") return lanes<2>(p, [&](vf a, vf b) { return vdiv(a, b); });
  if (fn == "vmax") return lanes<2>(p, [&](vf a, vf b) { return vmax(a, b); });
  if (fn == "vmin") return lanes<2>(p, [&](vf a, vf b) { return vmin(a, b); });
  if (fn == "vcopysign") return lanes<2>(p, [&](vf a, vf b) { return vcopysign(a, b); });
  if (fn == "vfma") return lanes<3>(p, [&](vf a, vf b, vf c) { return vfma(a, b, c); });
  if (fn == "vfnma") return lanes<3>(p, [&](vf a, vf b, vf c) { return vfnma(a, b, c); });
  if (fn == "vselect_pos") return lanes<3>(p, [&](vf c, vf a, vf b) { return vselect_pos(c, a, b); });
  if (fn == "vselect_lt") return lanes<4>(p, [&](vf c, vf d, vf a, vf b) { return vselect_lt(c, d, a, b); });
  if (fn == "vsum") return reduce(p, [&](vf a) { return vsum(a); });
  if (fn == "vhmax") return reduce(p, [&](vf a) { return vhmax(a); });
  if (fn == "vset1") {
    NF_TRY(shape(p, 1, false));
    float lane[W];
    for (int64_t i = 0; i < p.n; ++i) {
      vstore(lane, vset1(p.in[0][i]));
      p.out[i] = lane[i % W];
    }
    return Status::Ok();
  }
  if (fn == "vload_n" || fn == "vstore_n" || fn == "vload_w" || fn == "vstore_w") return run_tail(p, fn[1] == 'l');
  if (fn == "vround_bf16_n") {  // rows of any length: out[0:n] = vround_bf16(a[0:n]), arg[0] = n
    NF_CHECK(arity(p) >= 1 && p.arg[0] >= 0 && p.arg[0] <= p.n && p.arg[0] <= p.out_n, kOp, "vround_bf16_n: needs 0 <= n <= the lengths");
    vround_bf16_n(p.out, p.in[0], p.arg[0]);
    return Status::Ok();
  }
  if (fn == "act_forward" || fn == "act_derivative" || fn == "act_tile" || fn == "act_derivative_tile" ||
      fn == "act_forward_n" || fn == "act_backward_n")
    return run_act(p, fn);
  if (fn == "pack_k_major" || fn == "pack_transposed") {
    NF_CHECK(arity(p) >= 1, kOp, fn + " takes 1 operand");
    return run_pack(p, fn == "pack_transposed");
  }
  if (fn == "transpose_8x8") {
    NF_CHECK(arity(p) >= 1, kOp, fn + " takes 1 operand");
    return run_transpose(p);
  }
  if (fn == "first_nonfinite_range") return run_finite(p);
  if (fn == "vdot_bf16" || fn == "pack_bf16_pair_rows" || fn == "pack_bf16_row") return run_bf16(p, fn);
  return Status::Error(kOp, "no helper named '" + fn + "'");
}

}  // namespace

void simd_probe(const SimdProbe& p, Status* status) { *status = run(p); }

void simd_width(int* width) { *width = W; }

}  // namespace nf::cpu::NF_ISA_NS

#ifdef NF_ISA_PRIMARY
namespace nf::cpu {

Status simd_probe(Isa isa, const SimdProbe& p, int* width) {
  NF_CHECK(isa_runs(isa), "simd_probe",
           std::string("this CPU cannot run the ") + isa_name(isa) + " variant");
  Status status;
  if (std::string(p.fn).rfind("int8_", 0) == 0) {  // the int8 kernels' own (gemm_int8.cpp): avx512 means VNNI
    const Int8Kernels kernels = int8_kernels(isa);
    const bool avx512 = NF_X86 && isa_rank(isa) >= isa_rank(Isa::avx512);  // avx512 or avx512bf16
    NF_CHECK(!avx512 || kernels == Int8Kernels::vnni || kernels == Int8Kernels::amx, "simd_probe",
             "this CPU has no AVX-512 VNNI: its avx512 variants run the avx2 int8 kernels");
    NF_CHECK(std::string(p.fn) != "int8_amx_tile" || kernels == Int8Kernels::amx, "simd_probe",
             "int8_amx_tile runs on the avx512 variants of a CPU with AMX-INT8 (Linux, NF_AMX not 0) only");
#if NF_X86
    if (avx512) avx512_vnni::int8_probe(p, &status);
    else if (isa == Isa::avx2) avx2::int8_probe(p, &status);
    else
#endif
      scalar::int8_probe(p, &status);
    NF_DISPATCH_TO(isa, simd_width, width);
    return status;
  }
  NF_DISPATCH_TO(isa, simd_probe, p, &status);
  NF_DISPATCH_TO(isa, simd_width, width);
  return status;
}

}  // namespace nf::cpu
#endif
#include "isa_end.h"
