// A Python-style number: bool, int64 or double, remembering which.
#pragma once

#include <cstdint>

#include "core/dtype.h"

namespace kiln {

class Scalar {
 public:
  Scalar() : Scalar(int64_t(0)) {}
  Scalar(bool v) : kind_(DType::Bool), i_(v), d_(v) {}
  Scalar(int v) : Scalar(int64_t(v)) {}
  Scalar(int64_t v) : kind_(DType::Int64), i_(v), d_(static_cast<double>(v)) {}
  Scalar(float v) : Scalar(double(v)) {}
  Scalar(double v) : kind_(DType::Float64), i_(truncate(v)), d_(v) {}

  // Bool, Int64 or Float64: the dtype a Python number of this kind has.
  DType kind() const { return kind_; }
  bool is_floating() const { return kind_ == DType::Float64; }
  bool is_integral() const { return kind_ == DType::Int64; }
  bool is_bool() const { return kind_ == DType::Bool; }
  int64_t to_int() const { return i_; }
  double to_double() const { return d_; }

  template <typename T>
  T to() const {
    if (kind_ == DType::Float64) return static_cast<T>(d_);
    return static_cast<T>(i_);
  }

 private:
  // v toward zero, saturated to int64's range (NaN gives 0): a plain cast of an
  // out-of-range double is undefined behaviour.
  static int64_t truncate(double v) {
    if (!(v == v)) return 0;
    if (v >= 9223372036854775808.0) return INT64_MAX;
    if (v < -9223372036854775808.0) return INT64_MIN;
    return static_cast<int64_t>(v);
  }

  DType kind_;
  int64_t i_;
  double d_;
};

// Whether `value` converts to `dtype` without overflow, by PyTorch's rules for
// Python numbers: integer dtypes take numbers in their range (unsigned ones also
// negative integers down to -max, which wrap: -1 is 255 in uint8), but never NaN
// or infinities; floating dtypes take NaN, infinities and numbers within their
// largest finite value; bool takes anything.
bool scalar_fits(Scalar value, DType dtype);
// RuntimeError "[op] value cannot be converted to type <dtype> without overflow"
// unless scalar_fits.
void check_scalar_fits(Scalar value, DType dtype, const char* op);

}  // namespace kiln
