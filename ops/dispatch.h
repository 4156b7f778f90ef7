// Dtype dispatch: calls f(type_tag<T>{}) for the C++ type of a runtime DType.
// Each kernel family names the set it supports; other dtypes raise
// NotImplementedError naming the op and the dtype.
#pragma once

#include "core/dtype.h"
#include "core/error.h"

namespace kiln {

template <typename T>
struct type_tag {
  using type = T;
};

#define KILN_DISPATCH_CASE(ctype, name) \
  case DType::name:                     \
    return f(type_tag<ctype>{});

#define KILN_DISPATCH_FAIL(dtype, op) \
  fail(ErrorKind::NotImplemented, "[", op, "] not implemented for dtype ", dtype)

// All ten dtypes.
template <typename F>
decltype(auto) dispatch_all(DType t, const char* op, F&& f) {
  switch (t) {
#define KILN_ALL_CASE(ctype, name, pyname) KILN_DISPATCH_CASE(ctype, name)
    KILN_FORALL_DTYPES(KILN_ALL_CASE)
#undef KILN_ALL_CASE
  }
  KILN_DISPATCH_FAIL(t, op);
}

// float32, float64, float16, bfloat16.
template <typename F>
decltype(auto) dispatch_floating(DType t, const char* op, F&& f) {
  switch (t) {
    KILN_DISPATCH_CASE(float, Float32)
    KILN_DISPATCH_CASE(double, Float64)
    KILN_DISPATCH_CASE(Eigen::half, Float16)
    KILN_DISPATCH_CASE(Eigen::bfloat16, BFloat16)
    default:
      break;
  }
  KILN_DISPATCH_FAIL(t, op);
}

// Integer types, optionally bool.
template <typename F>
decltype(auto) dispatch_integral(DType t, bool include_bool, const char* op, F&& f) {
  switch (t) {
    KILN_DISPATCH_CASE(uint8_t, UInt8)
    KILN_DISPATCH_CASE(int8_t, Int8)
    KILN_DISPATCH_CASE(int16_t, Int16)
    KILN_DISPATCH_CASE(int32_t, Int32)
    KILN_DISPATCH_CASE(int64_t, Int64)
    case DType::Bool:
      if (include_bool) return f(type_tag<bool>{});
      break;
    default:
      break;
  }
  KILN_DISPATCH_FAIL(t, op);
}

// Every dtype except bool.
template <typename F>
decltype(auto) dispatch_numeric(DType t, const char* op, F&& f) {
  if (t == DType::Bool) KILN_DISPATCH_FAIL(t, op);
  return dispatch_all(t, op, std::forward<F>(f));
}

}  // namespace kiln
