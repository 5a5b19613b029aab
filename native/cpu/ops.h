// The CPU backend's kernels of the op table (native/ops/ops.h): every `Status run(const
// ops::X<float>&)` overload, one header per op family. The CPU binding includes this and nothing
// else of native/cpu.
#pragma once

#include "attention.h"
#include "elementwise.h"
#include "embedding.h"
#include "feedforward.h"
#include "finite.h"
#include "gemm.h"
#include "layernorm.h"
#include "linear.h"
#include "logits.h"
#include "loss.h"
#include "optim.h"
#include "packed.h"
#include "patch_embed.h"
#include "peak.h"
