// A tensor saved for backward, with the version it had when saved, so an
// in-place change before backward is reported instead of giving wrong grads.
#pragma once

#include "core/tensor.h"

namespace kiln {

class Node;

class SavedTensor {
 public:
  SavedTensor() = default;
  // Saves an input of the op.
  explicit SavedTensor(const Tensor& t);
  // Saves output number `output_nr` of the op. Keeping the output itself would
  // make a cycle (output -> node -> output), so only its data is kept and
  // unpack() re-attaches the owning node.
  static SavedTensor output(const Tensor& t, uint32_t output_nr);

  bool defined() const { return data_.defined(); }
  // The saved tensor; `owner` is the node unpacking it (needed for outputs).
  Tensor unpack(Node& owner) const;
  Tensor unpack() const;

 private:
  Tensor data_;
  uint32_t version_ = 0;
  bool is_output_ = false;
  bool output_requires_grad_ = false;
  uint32_t output_nr_ = 0;
};

}  // namespace kiln
