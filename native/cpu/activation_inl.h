// Activation functions on vectors, shared by the GEMM epilogue and the feed-forward backward.
// Include inside `namespace nf::cpu::NF_ISA_NS` after simd.h (needs <type_traits>).
//   relu(x) = max(x, 0)                        relu'(x) = [x > 0]
//   gelu(x) = x Φ(x) = ½ x (1 + erf(x/√2))      gelu'(x) = Φ(x) + x φ(x), φ(x) = e^{-x²/2}/√(2π)
//   gelu_tanh(x) = ½ x (1 + tanh(u)), u = √(2/π) (x + 0.044715 x³)
//   gelu_tanh'(x) = ½ (1 + tanh u) + ½ x (1 − tanh² u) √(2/π) (1 + 3·0.044715 x²)
//   silu(x) = x σ(x), σ(x) = 1 / (1 + e^{-x})    silu'(x) = σ(x) (1 + x (1 − σ(x)))
//   tanh(x)                                     tanh'(x) = 1 − tanh² x
#pragma once


// reduced: GELU's Φ from vnormcdf_reduced (|error| < 1e-6, no tail accuracy), for the products of the
// reduced precisions (int8, bf16), whose own error is far larger; the other activations are the same.
inline vf act_forward(vf x, Act act, bool reduced = false) {
  switch (act) {
    case Act::relu: return vmax(x, vzero());
    case Act::gelu: return vmul(x, reduced ? vnormcdf_reduced(x) : vnormcdf(x));
    case Act::gelu_tanh: {
      vf x3 = vmul(vmul(x, x), x);
      vf u = vmul(vset1(0.79788456080286536f), vfma(vset1(0.044715f), x3, x));
      return vmul(vmul(vset1(0.5f), x), vadd(vset1(1.0f), vtanh(u)));
    }
    case Act::silu: return vdiv(x, vadd(vset1(1.0f), vexp(vsub(vzero(), x))));  // vexp saturates: x < -88 gives -0
    case Act::tanh: return vtanh(x);
    default: return x;
  }
}

// acc = A(acc) on every vector of a register tile, A known at compile time: the tile's R x V
// independent vectors let the activation's long dependency chains (GELU: a division and an
// exponential) overlap. kReduced: act_forward's `reduced`.
template <Act A, bool kReduced = false, int R, int V>
inline void act_tile(vf (&acc)[R][V]) {
#pragma GCC unroll 16
  for (int r = 0; r < R; ++r)
#pragma GCC unroll 8
    for (int v = 0; v < V; ++v) acc[r][v] = act_forward(acc[r][v], A, kReduced);
}

// f(std::integral_constant<Act, act>{}): code templated on the activation, chosen at run time.
template <class F>
inline void with_act(Act act, F&& f) {
  switch (act) {
    case Act::none: return f(std::integral_constant<Act, Act::none>{});
    case Act::relu: return f(std::integral_constant<Act, Act::relu>{});
    case Act::gelu: return f(std::integral_constant<Act, Act::gelu>{});
    case Act::gelu_tanh: return f(std::integral_constant<Act, Act::gelu_tanh>{});
    case Act::silu: return f(std::integral_constant<Act, Act::silu>{});
    case Act::tanh: return f(std::integral_constant<Act, Act::tanh>{});
  }
}

// act_tile with `act` known at run time (and `reduced` for GELU only: one more copy of its code).
template <int R, int V>
inline void act_tile(vf (&acc)[R][V], Act act, bool reduced = false) {
  with_act(act, [&](auto a) {
    constexpr Act A = decltype(a)::value;
    if (A == Act::gelu && reduced) act_tile<A, true>(acc);
    else act_tile<A>(acc);
  });
}

// d act(x) / dx
inline vf act_derivative(vf x, Act act) {
  switch (act) {
    case Act::relu: return vselect_pos(x, vset1(1.0f), vzero());
    case Act::gelu: {  // (φ from the exponential Φ's tail computed)
      vf e;
      vf cdf = vnormcdf_exp(x, e);
      return vfma(x, vmul(vset1(0.39894228040143268f), e), cdf);
    }
    case Act::gelu_tanh: {
      vf x2 = vmul(x, x);
      vf u = vmul(vset1(0.79788456080286536f), vmul(x, vfma(vset1(0.044715f), x2, vset1(1.0f))));
      vf t = vtanh(u);
      vf du = vmul(vset1(0.79788456080286536f), vfma(vset1(3.0f * 0.044715f), x2, vset1(1.0f)));
      vf sech2 = vfnma(t, t, vset1(1.0f));
      return vfma(vmul(vset1(0.5f), x), vmul(sech2, du), vmul(vset1(0.5f), vadd(vset1(1.0f), t)));
    }
    case Act::silu: {
      vf s = vdiv(vset1(1.0f), vadd(vset1(1.0f), vexp(vsub(vzero(), x))));  // σ(x)
      return vmul(s, vfma(x, vsub(vset1(1.0f), s), vset1(1.0f)));
    }
    case Act::tanh: {
      vf t = vtanh(x);
      return vfnma(t, t, vset1(1.0f));
    }
    default: return vset1(1.0f);
  }
}

// x = act'(x) on every vector of a register tile (act_tile's way: A known at compile time, the
// tile's vectors independent).
template <int R, int V>
inline void act_derivative_tile(vf (&x)[R][V], Act act) {
  with_act(act, [&](auto a) {
#pragma GCC unroll 16
    for (int r = 0; r < R; ++r)
#pragma GCC unroll 8
      for (int v = 0; v < V; ++v) x[r][v] = act_derivative(x[r][v], decltype(a)::value);
  });
}

// y[i] = act(x[i]) over n values (x and y may alias).
inline void act_forward_n(float* y, const float* x, int64_t n, Act act) {
  int64_t i = 0;
  for (; i + W <= n; i += W) vstore(y + i, act_forward(vload(x + i), act));
  if (i < n) vstore_n(y + i, act_forward(vload_n(x + i, int(n - i)), act), int(n - i));
}

// dx[i] = dy[i] * act'(x[i]) over n values (dx may alias dy).
inline void act_backward_n(float* dx, const float* dy, const float* x, int64_t n, Act act) {
  int64_t i = 0;
  for (; i + W <= n; i += W) vstore(dx + i, vmul(vload(dy + i), act_derivative(vload(x + i), act)));
  if (i < n) {
    int r = int(n - i);
    vstore_n(dx + i, vmul(vload_n(dy + i, r), act_derivative(vload_n(x + i, r), act)), r);
  }
}
