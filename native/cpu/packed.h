// Prepacked weights on the CPU: the packWeights op, which writes a Linear weight in the GEMM's
// micro-panel layout of the active ISA variant at a precision (native/ops/packed.h defines the
// layout), and the check every kernel that takes such a buffer runs on its header before reading
// the panels.
#pragma once
#include <cstdint>

#include "../core/cpu_features.h"
#include "../ops/packed.h"
#include "gemm.h"

namespace nf::cpu {

// The panel geometry of variant `isa`: the micro-kernel's width NR and the largest k block KC.
struct PanelShape {
  int nr = 0;
  int64_t kc_max = 0;
};
PanelShape panel_shape(Isa isa);

// The packWeights op: the header and the panels of W [N, K] for the active variant.
Status run(const ops::PackWeights<float>& p);

// The panels of `buffer`, a packWeights buffer that field `field` of op `op` gives for a weight
// [N, K], checked against the header: *out stays empty when buffer is null; a buffer packed for
// another variant than `isa` (the one the op dispatches to), another precision than the op's (bf16
// against fp32 or tf32), or of other dims, is an error (ERR_NF_INVALID_ARG naming the field), never
// a silently wrong product. At precision 'int8', *out asks for the int8 product (PackedB::int8), from
// `buffer` when it is an int8 packing of [N, K].
Status packed_weight(PackedB* out, const float* buffer, int64_t N, int64_t K, Isa isa, ops::Precision precision,
                     const char* op, const char* field);

}  // namespace nf::cpu
