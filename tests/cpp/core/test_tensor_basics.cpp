#include <gtest/gtest.h>

#include "core/promotion.h"
#include "core/shape.h"
#include "core/tensor.h"
#include "ops/creation.h"
#include "ops/view.h"

namespace kiln {

TEST(Tensor, ContiguousStrides) {
  Tensor t = zeros({2, 3, 4});
  EXPECT_EQ(t.strides(), (Shape{12, 4, 1}));
  EXPECT_TRUE(t.is_contiguous());
  EXPECT_EQ(t.numel(), 24);
}

}  // namespace kiln
