// Reference activations in double precision (torch's nn.GELU / GELU(approximate='tanh') / ReLU / SiLU).
#pragma once
#include <cmath>

#include "../../ops/activation.h"

namespace nf::ref {

using ops::Act;

inline double act_forward(double x, Act act) {
  switch (act) {
    case Act::relu: return x > 0 ? x : 0;
    case Act::gelu: return 0.5 * x * (1 + std::erf(x / std::sqrt(2.0)));
    case Act::gelu_tanh: return 0.5 * x * (1 + std::tanh(std::sqrt(2 / M_PI) * (x + 0.044715 * x * x * x)));
    case Act::silu: return x / (1 + std::exp(-x));
    default: return x;
  }
}

inline double act_derivative(double x, Act act) {
  switch (act) {
    case Act::relu: return x > 0 ? 1 : 0;
    case Act::gelu: return 0.5 * (1 + std::erf(x / std::sqrt(2.0))) + x * std::exp(-0.5 * x * x) / std::sqrt(2 * M_PI);
    case Act::gelu_tanh: {
      double k = std::sqrt(2 / M_PI), u = k * (x + 0.044715 * x * x * x), t = std::tanh(u);
      return 0.5 * (1 + t) + 0.5 * x * (1 - t * t) * k * (1 + 3 * 0.044715 * x * x);
    }
    case Act::silu: {
      const double s = 1 / (1 + std::exp(-x));
      return s * (1 + x * (1 - s));
    }
    default: return 1;
  }
}

}  // namespace nf::ref
