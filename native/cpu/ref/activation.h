// Reference activations in double precision (torch's nn.GELU / GELU(approximate='tanh') / ReLU / SiLU /
// Tanh), and the activation ops (native/ops/activation.h): y = act(x); dx = dy · act'(x).
#pragma once
#include <cmath>
#include <cstdint>

#include "../../ops/activation.h"

namespace nf::ref {

using ops::Act;

inline double act_forward(double x, Act act) {
  switch (act) {
    case Act::relu: return x > 0 ? x : 0;
    case Act::gelu: return 0.5 * x * (1 + std::erf(x / std::sqrt(2.0)));
    case Act::gelu_tanh: return 0.5 * x * (1 + std::tanh(std::sqrt(2 / M_PI) * (x + 0.044715 * x * x * x)));
    case Act::silu: return x / (1 + std::exp(-x));
    case Act::tanh: return std::tanh(x);
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
    case Act::tanh: {
      const double t = std::tanh(x);
      return 1 - t * t;
    }
    default: return 1;
  }
}

template <class T>
void run(const ops::ActivationForward<T>& p) {
  for (int64_t i = 0; i < p.n; ++i) p.y[i] = static_cast<T>(act_forward(double(p.x[i]), p.act));
}
template <class T>
void run(const ops::ActivationBackward<T>& p) {
  for (int64_t i = 0; i < p.n; ++i) p.dx[i] = static_cast<T>(double(p.dy[i]) * act_derivative(double(p.x[i]), p.act));
}

}  // namespace nf::ref
