#include <gtest/gtest.h>

#include <string>

#include "core/error.h"
#include "ops/conv.h"
#include "ops/copy.h"
#include "ops/random.h"

namespace kiln {

// The C++ front end alone (no Python): a strided, padded, grouped conv2d
// against a direct sum over the kernel.
TEST(Conv, Conv2dMatchesDirectSum) {
  Tensor x = contiguous(randn({1, 4, 5, 6}, DType::Float64));
  Tensor w = contiguous(randn({2, 2, 3, 2}, DType::Float64));
  const Dims stride = {2, 1}, pad = {1, 0}, dil = {1, 2};
  Tensor y = contiguous(conv_nd(x, w, std::nullopt, stride, pad, dil, 2, "conv2d"));
  ASSERT_EQ(y.sizes(), (Shape{1, 2, 3, 4}));
  const double* xp = x.data<double>();
  const double* wp = w.data<double>();
  for (int64_t o = 0; o < 2; ++o) {
    for (int64_t i = 0; i < 3; ++i) {
      for (int64_t j = 0; j < 4; ++j) {
        double want = 0;
        for (int64_t c = 0; c < 2; ++c) {
          for (int64_t a = 0; a < 3; ++a) {
            for (int64_t b = 0; b < 2; ++b) {
              int64_t r = i * stride[0] - pad[0] + a * dil[0], q = j * stride[1] + b * dil[1];
              if (r < 0 || r >= 5 || q >= 6) continue;
              want += xp[((o * 2 + c) * 5 + r) * 6 + q] * wp[((o * 2 + c) * 3 + a) * 2 + b];
            }
          }
        }
        EXPECT_NEAR(y.data<double>()[(o * 3 + i) * 4 + j], want, 1e-12);
      }
    }
  }
}

TEST(Conv, ChannelMismatchNamesShapes) {
  try {
    conv_nd(randn({2, 4, 5, 5}), randn({8, 3, 3, 3}), std::nullopt, {1, 1}, Dims{0, 0}, {1, 1}, 1,
            "conv2d");
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("[conv2d] Given groups=1, weight of size [8, 3, 3, 3], "
                                         "expected input[2, 4, 5, 5] to have 3 channels"),
              std::string::npos)
        << e.what();
  }
}

}  // namespace kiln
