// The activation functions of GEMM epilogues, the Linear layer and the feed-forward network, by
// name. Each backend implements every one (native/cpu/activation_inl.h for the vector kernels,
// native/cpu/ref/activation.h in float64, native/cuda/activation.cuh on the device):
//   relu(x) = max(x, 0)
//   gelu(x) = x Φ(x) = ½ x (1 + erf(x/√2))                 (torch's nn.GELU())
//   gelu_tanh(x) = ½ x (1 + tanh(√(2/π) (x + 0.044715 x³))) (nn.GELU(approximate='tanh'))
//   silu(x) = x σ(x) = x / (1 + e^{-x})                   (nn.SiLU(), "swish")
//   tanh(x)                                               (nn.Tanh(): the BERT / ViT pooler)
// The activation ops apply one elementwise (layout: flat arrays of n values): y = act(x), and
// backward dx = dy · act'(x) from the forward's input x.
#pragma once
#include <cstdint>

#include "schema.h"

namespace nf::ops {

enum class Act : int { none = 0, relu = 1, gelu = 2, gelu_tanh = 3, silu = 4, tanh = 5 };

// How many activations there are (Act values 0 .. kActCount - 1).
constexpr int kActCount = 6;

// An activation fused into a GEMM epilogue or a Linear layer ('none': the identity).
inline constexpr Choice<Act> kActivationList[] = {
    {"none", Act::none}, {"relu", Act::relu}, {"gelu", Act::gelu}, {"gelu_tanh", Act::gelu_tanh}, {"silu", Act::silu},
    {"tanh", Act::tanh}};
inline constexpr Choices<Act> kActivations{"Activation", kActivationList};

// The feed-forward network's activation (no identity: the network would be linear).
inline constexpr Choice<Act> kFeedForwardActivationList[] = {
    {"gelu", Act::gelu}, {"gelu_tanh", Act::gelu_tanh}, {"relu", Act::relu}, {"silu", Act::silu}};
inline constexpr Choices<Act> kFeedForwardActivations{"FeedForwardActivation", kFeedForwardActivationList};

template <class T>
struct ActivationForward {
  static constexpr const char* name = "activationForward";
  static constexpr const char* summary =
      "y = act(x) elementwise over n values (any GEMM-epilogue activation, e.g. the pooler's tanh; 'none' copies); "
      "y may be x.";
  int64_t n = 0;
  Act act = Act::none;
  T* y = nullptr;
  const T* x = nullptr;

  template <class R>
  static void fields(R& r, ActivationForward& p) {
    r.dim(p.n, "n", 0);
    r.choice(p.act, "act", kActivations, Act::none);
    r.out(p.y, "y", NF_SHAPE(p.n));
    r.in(p.x, "x", NF_SHAPE(p.n));
  }
};

template <class T>
struct ActivationBackward {
  static constexpr const char* name = "activationBackward";
  static constexpr const char* summary =
      "dx = dy · act'(x) elementwise over n values, x the forward's input (same act); dx may be dy.";
  int64_t n = 0;
  Act act = Act::none;
  T* dx = nullptr;
  const T* dy = nullptr;
  const T* x = nullptr;

  template <class R>
  static void fields(R& r, ActivationBackward& p) {
    r.dim(p.n, "n", 0);
    r.choice(p.act, "act", kActivations, Act::none);
    r.out(p.dx, "dx", NF_SHAPE(p.n), grad_of("x"));
    r.in(p.dy, "dy", NF_SHAPE(p.n), grad_of("y"));
    r.in(p.x, "x", NF_SHAPE(p.n));
  }
};

}  // namespace nf::ops
