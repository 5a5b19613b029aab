#include "tensor.h"

namespace nf {

const char* dtype_name(DType t) {
  switch (t) {
    case DType::f32: return "float32";
    case DType::f64: return "float64";
    case DType::i32: return "int32";
    case DType::u8: return "bool";
  }
  return "unknown";
}

TensorView TensorView::dense(void* data, DType dtype, int ndim, const int64_t* shape) {
  TensorView v;
  v.data = data;
  v.dtype = dtype;
  v.ndim = ndim;
  int64_t s = 1;
  for (int i = ndim - 1; i >= 0; --i) {
    v.shape[i] = shape[i];
    v.strides[i] = s;
    s *= shape[i];
  }
  return v;
}

}  // namespace nf
