// The packWeights op and the check of a prepacked weight's header (native/cpu/packed.h).
// Layout (native/ops/packed.h): 16 header words (int32 bit patterns: magic, ISA variant, NR, KC,
// N, K, precision, zeros), then op(B) = Wᵀ in the GEMM's panels, written by the variant's
// pack_weights (native/cpu/gemm.cpp) with the packer its GEMM uses on every call at that precision.
// Dimension key: N output features, K input features of the weight W [N, K].
#include "packed.h"

#include <cstring>
#include <string>

#include "isa.h"

#ifdef NF_ISA_PRIMARY
namespace nf::cpu {

PanelShape panel_shape(Isa isa) {
  PanelShape s;
  NF_DISPATCH_TO(isa, gemm_panel_shape, &s.nr, &s.kc_max);
  return s;
}

namespace {

// The panels' precision: what the GEMM reads at precision p (tf32 computes fp32 on the CPU).
ops::Precision panel_precision(ops::Precision p) { return p == ops::Precision::bf16 ? p : ops::Precision::fp32; }

// The header of a packing of [N, K] for `isa` at precision p.
void header_words(int32_t (&w)[ops::kPackedHeader], Isa isa, int64_t N, int64_t K, ops::Precision p) {
  const PanelShape s = panel_shape(isa);
  std::memset(w, 0, sizeof w);
  w[ops::kWordMagic] = ops::kPackedMagic;
  w[ops::kWordIsa] = static_cast<int32_t>(isa);
  w[ops::kWordNR] = s.nr;
  w[ops::kWordKC] = static_cast<int32_t>(s.kc_max);
  w[ops::kWordN] = static_cast<int32_t>(N);
  w[ops::kWordK] = static_cast<int32_t>(K);
  w[ops::kWordPrecision] = static_cast<int32_t>(panel_precision(p));
}

const char* precision_name(int32_t word) {
  for (const ops::Choice<ops::Precision>& c : ops::kPrecisionList)
    if (static_cast<int32_t>(c.value) == word) return c.name;
  return "unknown";
}

}  // namespace

Status run(const ops::PackWeights<float>& p) {
  if (p.precision == ops::Precision::int8) {
    NF_CHECK(p.K <= kMaxInt8K, "pack_weights", "precision 'int8' takes at most " + std::to_string(kMaxInt8K) + " input features (K)");
    quantize_weights(p.packed, p.W, p.N, p.K);
    return Status::Ok();
  }
  const Isa isa = active_isa();
  int32_t w[ops::kPackedHeader];
  header_words(w, isa, p.N, p.K, p.precision);
  std::memcpy(p.packed, w, sizeof w);
  NF_DISPATCH_TO(isa, pack_weights, p.packed + ops::kPackedHeader, p.W, p.N, p.K, p.precision);
  return Status::Ok();
}

// The int8 packing of field `field` (or none: W is then quantized per call).
static Status packed_int8(PackedB* out, const float* buffer, int64_t N, int64_t K, const char* op, const char* field) {
  NF_CHECK(K <= kMaxInt8K, op, "precision 'int8' takes at most " + std::to_string(kMaxInt8K) + " input features");
  out->int8 = true;
  if (!buffer) return Status::Ok();
  int32_t got[ops::kPackedHeader];
  std::memcpy(got, buffer, sizeof got);
  const std::string expected = std::string("expected ") + field + " packed by packWeights with precision 'int8'";
  if (got[ops::kWordMagic] != ops::kPackedInt8Magic)
    return Status::InvalidArg(op, expected + " but its header is not one of an int8 packing");
  if (got[ops::kWordN] != N || got[ops::kWordK] != K)
    return Status::InvalidArg(op, expected + " of a weight [" + std::to_string(N) + ", " + std::to_string(K) +
                                      "] but received one of [" + std::to_string(got[ops::kWordN]) + ", " +
                                      std::to_string(got[ops::kWordK]) + "]");
  out->q = int8_weights(buffer, N, K);
  return Status::Ok();
}

Status packed_weight(PackedB* out, const float* buffer, int64_t N, int64_t K, Isa isa, ops::Precision precision,
                     const char* op, const char* field) {
  *out = {};
  if (precision == ops::Precision::int8) return packed_int8(out, buffer, N, K, op, field);
  if (!buffer) return Status::Ok();
  int32_t want[ops::kPackedHeader], got[ops::kPackedHeader];
  header_words(want, isa, N, K, precision);
  std::memcpy(got, buffer, sizeof got);
  // "avx2 (NR 16, KC 256)": a variant and its panel shape, as header words give them.
  const auto variant = [](const int32_t (&w)[ops::kPackedHeader]) {
    const int32_t i = w[ops::kWordIsa];
    const std::string name = i >= 0 && isa_rank(static_cast<Isa>(i)) >= 0 ? isa_name(static_cast<Isa>(i))
                                                                         : "variant " + std::to_string(i);
    return name + " (NR " + std::to_string(w[ops::kWordNR]) + ", KC " + std::to_string(w[ops::kWordKC]) + ")";
  };
  const std::string expected = std::string("expected ") + field + " packed by packWeights";
  if (got[ops::kWordMagic] != ops::kPackedMagic)
    return Status::InvalidArg(op, expected + " but its header is not a packWeights header");
  if (got[ops::kWordIsa] != want[ops::kWordIsa] || got[ops::kWordNR] != want[ops::kWordNR] ||
      got[ops::kWordKC] != want[ops::kWordKC])
    return Status::InvalidArg(op, expected + " for the active kernels, " + variant(want) + ", but received one packed for " +
                                      variant(got) + ": repack it after setIsa");
  if (got[ops::kWordPrecision] != want[ops::kWordPrecision])
    return Status::InvalidArg(op, expected + " at precision '" + precision_name(want[ops::kWordPrecision]) +
                                      "' but received one packed at '" + precision_name(got[ops::kWordPrecision]) +
                                      "': repack it with the op's precision");
  if (got[ops::kWordN] != N || got[ops::kWordK] != K)
    return Status::InvalidArg(op, expected + " of a weight [" + std::to_string(N) + ", " + std::to_string(K) +
                                      "] but received one of [" + std::to_string(got[ops::kWordN]) + ", " +
                                      std::to_string(got[ops::kWordK]) + "]");
  out->panels = buffer + ops::kPackedHeader;
  out->ld = ops::packed_width(N);
  out->nr = want[ops::kWordNR];
  return Status::Ok();
}

}  // namespace nf::cpu
#endif
#include "isa_end.h"
