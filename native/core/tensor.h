// TensorView: a non-owning view of a dense tensor (pointer, shape, strides in elements, dtype).
// Kernels take raw pointers and dims structs; views are what the binding and the op table pass
// around before that.
#pragma once
#include <cstddef>
#include <cstdint>

namespace nf {

enum class DType : uint8_t { f32, f64, i32, u8 };

inline size_t dtype_size(DType t) {
  switch (t) {
    case DType::f32: return 4;
    case DType::f64: return 8;
    case DType::i32: return 4;
    case DType::u8: return 1;
  }
  return 0;
}

const char* dtype_name(DType t);

constexpr int kMaxDims = 6;

struct TensorView {
  void* data = nullptr;
  DType dtype = DType::f32;
  int ndim = 0;
  int64_t shape[kMaxDims] = {};
  int64_t strides[kMaxDims] = {};  // in elements

  int64_t numel() const {
    int64_t n = 1;
    for (int i = 0; i < ndim; ++i) n *= shape[i];
    return n;
  }
  bool contiguous() const {
    int64_t s = 1;
    for (int i = ndim - 1; i >= 0; --i) {
      if (shape[i] != 1 && strides[i] != s) return false;
      s *= shape[i];
    }
    return true;
  }
  // A contiguous row-major view over `data` with the given shape.
  static TensorView dense(void* data, DType dtype, int ndim, const int64_t* shape);
};

}  // namespace nf
