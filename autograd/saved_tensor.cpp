#include "autograd/saved_tensor.h"

#include "autograd/node.h"
#include "core/error.h"
#include "ops/copy.h"

namespace kiln {

SavedTensor::SavedTensor(const Tensor& t) : data_(t), version_(t.defined() ? t.version() : 0) {}

SavedTensor SavedTensor::output(const Tensor& t, uint32_t output_nr) {
  SavedTensor s;
  s.data_ = detach(t);
  s.version_ = t.version();
  s.is_output_ = true;
  s.output_requires_grad_ = true;
  s.output_nr_ = output_nr;
  return s;
}

Tensor SavedTensor::unpack() const {
  if (!data_.defined()) return data_;
  KILN_CHECK(data_.version() == version_, Runtime,
             "[autograd] one of the variables needed for gradient computation has been modified "
             "by an inplace operation: [",
             data_.dtype(), " ", data_.sizes(), "] is at version ", data_.version(),
             "; expected version ", version_,
             " instead. Clone the tensor before modifying it in place.");
  return data_;
}

Tensor SavedTensor::unpack(Node& owner) const {
  Tensor t = unpack();
  if (!is_output_ || !t.defined()) return t;
  // Re-attach the owner so create_graph sees the output's real history.
  Tensor alias = detach(t);
  AutogradMeta& meta = alias.impl()->autograd();
  meta.grad_fn = owner.shared_from_this();
  meta.output_nr = output_nr_;
  return alias;
}

}  // namespace kiln
