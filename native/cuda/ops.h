// The CUDA backend's kernels of the op table (native/ops/ops.h): every `Status run(const
// ops::X<float>&)` overload, one header per op family. The CUDA binding registers exactly the ops
// declared here, and that is the CUDA addon's list of supported ops (lib/core/device.ts supports()).
#pragma once

#include "activation.h"
#include "attention.h"
#include "attention_decode.h"
#include "elementwise.h"
#include "embedding.h"
#include "feedforward.h"
#include "finite.h"
#include "gemm.h"
#include "grad_norm.h"
#include "layernorm.h"
#include "linear.h"
#include "logits.h"
#include "loss.h"
#include "mse.h"
#include "optim.h"
#include "patch_embed.h"
#include "sgd.h"
