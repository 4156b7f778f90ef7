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
  Scalar(double v) : kind_(DType::Float64), i_(static_cast<int64_t>(v)), d_(v) {}

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
  DType kind_;
  int64_t i_;
  double d_;
};

}  // namespace kiln
