// The op table: every op of the addons, as its params struct (native/ops/<family>.h). The CPU
// binding registers each one (native/cpu/napi/bind_ops.cpp), the CUDA binding those with a CUDA
// kernel (native/cuda/napi/bind_ops.cpp), the recorder writes their schema, and the parity suite
// walks it. Adding an op: its params struct in its family's header, one entry here, its kernels
// (`run` overloads in each backend that has it) and its tests.
#pragma once

#include "activation.h"
#include "attention.h"
#include "elementwise.h"
#include "embedding.h"
#include "feedforward.h"
#include "finite.h"
#include "layernorm.h"
#include "linear.h"
#include "logits.h"
#include "loss.h"
#include "optim.h"
#include "packed.h"
#include "patch_embed.h"
#include "peak.h"

namespace nf::ops {

template <template <class> class... Ops>
struct OpList {
  // Calls f.template operator()<Op>() for every op, in order.
  template <class F>
  static void each(F&& f) {
    (f.template operator()<Ops>(), ...);
  }
};

using AllOps = OpList<LayerNormForward, LayerNormBackward, Gemm, PackWeights, LinearForward, LinearBackward,
                      FeedForwardForward, FeedForwardBackward, AttentionForward, AttentionBackward,
                      AttentionDecode, PatchEmbedForward, PatchEmbedBackward, EmbeddingForward, EmbeddingBackward,
                      SinusoidalEncoding, ClsPosForward, ClsPosBackward, TokenPosForward, TokenPosBackward, Add,
                      Accumulate, Zero, DropoutForward, DropoutBackward, CopyRows, CrossEntropy, Mse, AdamWStep, AdamWMultiStep,
                      SgdStep,
                      SumSquares, Scale, ClipGradNorm, ClipCoefficient, ClipScale, FirstNonFinite, Softmax, LogSoftmax, Argmax, Topk, FmaPeak,
                      ActivationForward, ActivationBackward, ChannelScaleForward, ChannelScaleBackward>;

}  // namespace nf::ops
