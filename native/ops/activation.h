// The activation functions of GEMM epilogues, the Linear layer and the feed-forward network, by
// name. Each backend implements every one (native/cpu/activation_inl.h for the vector kernels,
// native/cpu/ref/activation.h in float64, native/cuda/activation.cuh on the device):
//   relu(x) = max(x, 0)
//   gelu(x) = x Φ(x) = ½ x (1 + erf(x/√2))                 (torch's nn.GELU())
//   gelu_tanh(x) = ½ x (1 + tanh(√(2/π) (x + 0.044715 x³))) (nn.GELU(approximate='tanh'))
//   silu(x) = x σ(x) = x / (1 + e^{-x})                   (nn.SiLU(), "swish")
#pragma once
#include "schema.h"

namespace nf::ops {

enum class Act : int { none = 0, relu = 1, gelu = 2, gelu_tanh = 3, silu = 4 };

// How many activations there are (Act values 0 .. kActCount - 1).
constexpr int kActCount = 5;

// An activation fused into a GEMM epilogue or a Linear layer ('none': the identity).
inline constexpr Choice<Act> kActivationList[] = {
    {"none", Act::none}, {"relu", Act::relu}, {"gelu", Act::gelu}, {"gelu_tanh", Act::gelu_tanh}, {"silu", Act::silu}};
inline constexpr Choices<Act> kActivations{"Activation", kActivationList};

// The feed-forward network's activation (no identity: the network would be linear).
inline constexpr Choice<Act> kFeedForwardActivationList[] = {
    {"gelu", Act::gelu}, {"gelu_tanh", Act::gelu_tanh}, {"relu", Act::relu}, {"silu", Act::silu}};
inline constexpr Choices<Act> kFeedForwardActivations{"FeedForwardActivation", kFeedForwardActivationList};

}  // namespace nf::ops
