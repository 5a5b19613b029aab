// Helpers of the parity tests: seeded float32-representable random data (held as double, so the
// float64 reference and the float32 kernels see equal inputs), device buffers, and the relative
// error ‖got − ref‖ / ‖ref‖ checked against a tolerance and logged (largest per label, printed at
// the end). The tolerances are the CPU kernels': 1e-5 forward, 1e-4 gradients.
#pragma once
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "../device.h"
#include "harness.h"

namespace nf::test {

constexpr double kFwdTol = 1e-5;
constexpr double kBwdTol = 1e-4;

using Vec = std::vector<double>;

inline std::mt19937_64& rng() {
  static std::mt19937_64 r(20240531);
  return r;
}

// n normal samples times scale, rounded to float32.
inline Vec randn(size_t n, double scale = 1.0) {
  std::normal_distribution<double> dist(0.0, scale);
  Vec v(n);
  for (double& x : v) x = double(float(dist(rng())));
  return v;
}

inline std::vector<float> to_float(const Vec& v) { return std::vector<float>(v.begin(), v.end()); }

// A device array of T, filled from and read back to host vectors.
template <class T>
class Device {
 public:
  explicit Device(size_t n) : n_(n) {
    void* p = nullptr;
    const Status st = cuda::device_alloc(&p, n * sizeof(T) + 1);  // +1: a valid pointer for n = 0
    if (!st.ok()) {
      fail(__FILE__, __LINE__, "device_alloc: " + st.message);
      throw AssertFailed{};
    }
    p_ = static_cast<T*>(p);
  }
  template <class U>
  explicit Device(const std::vector<U>& host) : Device(host.size()) {
    upload(host);
  }
  ~Device() { (void)cuda::device_free(p_); }
  Device(const Device&) = delete;
  Device& operator=(const Device&) = delete;

  T* get() const { return p_; }
  operator T*() const { return p_; }
  size_t size() const { return n_; }

  template <class U>
  void upload(const std::vector<U>& host) {
    std::vector<T> h(host.begin(), host.end());
    check(cuda::copy_to_device(p_, h.data(), n_ * sizeof(T)));
  }
  std::vector<T> download() const {
    std::vector<T> h(n_);
    check(cuda::copy_to_host(h.data(), p_, n_ * sizeof(T)));
    return h;
  }
  Vec download_double() const {
    std::vector<T> h = download();
    return Vec(h.begin(), h.end());
  }

 private:
  static void check(const Status& st) {
    if (!st.ok()) {
      fail(__FILE__, __LINE__, st.op + ": " + st.message);
      throw AssertFailed{};
    }
  }
  T* p_ = nullptr;
  size_t n_ = 0;
};
using DeviceF = Device<float>;

inline double rel_err(const std::vector<float>& got, const Vec& ref) {
  double num = 0, den = 0;
  for (size_t i = 0; i < ref.size(); ++i) {
    const double d = double(got[i]) - ref[i];
    num += d * d;
    den += ref[i] * ref[i];
  }
  if (!std::isfinite(num)) return INFINITY;
  return den == 0 ? std::sqrt(num) : std::sqrt(num / den);
}

inline std::map<std::string, double>& error_log() {
  static std::map<std::string, double> log;
  static bool registered = [] {
    at_end().push_back([] {
      std::printf("largest relative errors:\n");
      for (const auto& [label, e] : error_log()) std::printf("  %-32s %.3g\n", label.c_str(), e);
    });
    return true;
  }();
  (void)registered;
  return log;
}

// Expects rel_err(got, ref) < tol; logs it under `label`, the case name in the failure message.
inline void check_close(const std::string& label, const std::string& name, const std::vector<float>& got,
                        const Vec& ref, double tol) {
  double e = got.size() == ref.size() ? rel_err(got, ref) : INFINITY;
  if (!quiet()) {
    double& worst = error_log()[label];
    if (!(e <= worst)) worst = e;
  }
  if (!(e < tol)) {
    char buf[64];
    std::snprintf(buf, sizeof buf, "%.3g", e);
    fail(__FILE__, __LINE__, label + " " + name + ": relative error " + buf);
  }
}

inline std::string dims(std::initializer_list<std::pair<const char*, int64_t>> kv) {
  std::string s;
  for (const auto& [k, v] : kv) s += std::string(s.empty() ? "" : " ") + k + "=" + std::to_string(v);
  return s;
}

}  // namespace nf::test

