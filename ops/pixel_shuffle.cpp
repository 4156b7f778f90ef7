// pixel_shuffle / pixel_unshuffle: [*, C * r^2, H, W] <-> [*, C, H * r, W * r]
// as one reshape-permute-reshape, so autograd and every device come for free.
#include "core/error.h"
#include "ops/conv.h"
#include "ops/view.h"

namespace kiln {

namespace {

Tensor shuffle(const Tensor& x, int64_t r, bool up, const char* op) {
  KILN_CHECK(x.dim() >= 3, Runtime, "[", op,
             "] expects input to have at least 3 dimensions, "
             "but got input with ",
             x.dim(), " dimension(s): ", x.sizes());
  KILN_CHECK(r > 0, Runtime, "[", op, "] factor must be positive, but got ", r);
  const int64_t nd = x.dim();
  int64_t c = x.size(nd - 3), h = x.size(nd - 2), w = x.size(nd - 1);
  Shape batch(x.sizes().begin(), x.sizes().end() - 3);
  const int64_t b = static_cast<int64_t>(batch.size());
  Shape s = batch;
  std::vector<int64_t> perm;
  for (int64_t i = 0; i < b; ++i) perm.push_back(i);
  if (up) {
    KILN_CHECK(c % (r * r) == 0, Runtime, "[", op,
               "] expects its input's 'channel' dimension "
               "to be divisible by the square of upscale_factor, but input.size(-3)=",
               c, " is not divisible by ", r * r);
    s.insert(s.end(), {c / (r * r), r, r, h, w});
    for (int64_t i : {0, 3, 1, 4, 2}) perm.push_back(b + i);
    Shape o = batch;
    o.insert(o.end(), {c / (r * r), h * r, w * r});
    return reshape(permute(reshape(x, s), perm), o);
  }
  KILN_CHECK(h % r == 0 && w % r == 0, Runtime, "[", op, "] expects height and width ", h, ", ", w,
             " of input ", x.sizes(), " to be divisible by downscale_factor ", r);
  s.insert(s.end(), {c, h / r, r, w / r, r});
  for (int64_t i : {0, 2, 4, 1, 3}) perm.push_back(b + i);
  Shape o = batch;
  o.insert(o.end(), {c * r * r, h / r, w / r});
  return reshape(permute(reshape(x, s), perm), o);
}

}  // namespace

Tensor pixel_shuffle(const Tensor& input, int64_t upscale_factor) {
  return shuffle(input, upscale_factor, true, "pixel_shuffle");
}

Tensor pixel_unshuffle(const Tensor& input, int64_t downscale_factor) {
  return shuffle(input, downscale_factor, false, "pixel_unshuffle");
}

}  // namespace kiln
