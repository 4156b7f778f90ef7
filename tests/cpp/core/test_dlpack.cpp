// core/dlpack.h: the exported struct's layout, who frees what and when
// (Note [DLPack ownership]), and imports of foreign layouts.
#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <vector>

#include "core/dlpack.h"
#include "core/error.h"
#include "ops/copy.h"
#include "ops/creation.h"
#include "ops/view.h"

namespace kiln::dlpack {
namespace {

Tensor iota(const Shape& shape) {
  Tensor t = empty(shape, DType::Float64);
  for (int64_t i = 0; i < t.numel(); ++i) t.data<double>()[i] = static_cast<double>(i);
  return t;
}

// A foreign producer: a DLManagedTensor over caller-owned memory that counts deleter calls.
struct Foreign {
  DLManagedTensor managed{};
  Shape shape, strides;
  int deletes = 0;

  Foreign(void* data, DLDataType dtype, Shape sizes, Shape strides_in)
      : shape(std::move(sizes)), strides(std::move(strides_in)) {
    managed.dl_tensor = {data,  {kDLCPU, 0},  static_cast<int32_t>(shape.size()),
                         dtype, shape.data(), strides.empty() ? nullptr : strides.data(),
                         0};
    managed.manager_ctx = this;
    managed.deleter = [](DLManagedTensor* self) {
      ++static_cast<Foreign*>(self->manager_ctx)->deletes;
    };
  }
};

TEST(DLPack, ExportDescribesTheView) {
  Tensor base = iota({4, 6});
  Tensor view = slice(transpose(base, 0, 1), 1, 1, 4, 2);  // [6, 2], strides [1, 12]
  DLManagedTensor* m = to_dlpack(view);
  const DLTensor& dl = m->dl_tensor;
  EXPECT_EQ(dl.data, view.data_ptr());
  EXPECT_EQ(dl.byte_offset, 0u);
  EXPECT_EQ(dl.device.device_type, kDLCPU);
  EXPECT_EQ(dl.ndim, 2);
  EXPECT_EQ(Shape(dl.shape, dl.shape + 2), (Shape{6, 2}));
  EXPECT_EQ(Shape(dl.strides, dl.strides + 2), (Shape{1, 12}));
  EXPECT_EQ(dl.dtype.code, kDLFloat);
  EXPECT_EQ(dl.dtype.bits, 64);
  EXPECT_EQ(dl.dtype.lanes, 1);
  m->deleter(m);
}

TEST(DLPack, ExportNormalizesStridesOfSizeOneDims) {
  Tensor row = slice(iota({4, 3}), 0, 1, 2);  // [1, 3], strides [3, 1]
  DLManagedTensor* m = to_dlpack(row);
  EXPECT_EQ(Shape(m->dl_tensor.strides, m->dl_tensor.strides + 2), (Shape{1, 1}));
  m->deleter(m);
}

TEST(DLPack, ExportKeepsStorageUntilDeleter) {
  Tensor t = iota({5});
  std::weak_ptr<StorageImpl> storage = t.storage();
  DLManagedTensorVersioned* m = to_dlpack_versioned(t, kFlagIsCopied);
  EXPECT_EQ(m->version.major, kMajorVersion);
  EXPECT_EQ(m->flags, kFlagIsCopied);
  t = Tensor();
  ASSERT_FALSE(storage.expired());
  EXPECT_EQ(static_cast<double*>(m->dl_tensor.data)[4], 4.0);
  m->deleter(m);
  EXPECT_TRUE(storage.expired());
}

TEST(DLPack, EveryDTypeRoundTrips) {
#define KILN_CHECK_DTYPE(ctype, name, pyname)                     \
  {                                                               \
    const DLDataType dl = to_dl_dtype(DType::name);               \
    EXPECT_EQ(dl.bits, sizeof(ctype) * 8) << #pyname;             \
    EXPECT_EQ(from_dl_dtype(dl, "test"), DType::name) << #pyname; \
  }
  KILN_FORALL_DTYPES(KILN_CHECK_DTYPE)
#undef KILN_CHECK_DTYPE
  EXPECT_EQ(to_dl_dtype(DType::Bool).code, kDLBool);
  EXPECT_EQ(to_dl_dtype(DType::BFloat16).code, kDLBfloat);
  EXPECT_EQ(to_dl_dtype(DType::UInt8).code, kDLUInt);
}

TEST(DLPack, KilnRoundTripReusesStorage) {
  Tensor base = iota({3, 4});
  Tensor view = slice(base, 0, 1, 3);
  Tensor back = from_dlpack(to_dlpack(view));
  EXPECT_EQ(back.storage(), base.storage());
  EXPECT_EQ(back.storage_offset(), 4);
  EXPECT_EQ(back.sizes(), view.sizes());
  EXPECT_EQ(back.strides(), view.strides());
}

TEST(DLPack, ImportCallsProducerDeleterOnceWithLastView) {
  double data[6] = {0, 1, 2, 3, 4, 5};
  Foreign f(data, {kDLFloat, 64, 1}, {2, 3}, {});
  Tensor t = from_dlpack(&f.managed);
  EXPECT_EQ(t.data_ptr(), data);
  EXPECT_EQ(t.strides(), (Shape{3, 1}));
  Tensor row = select(t, 0, 1);
  t = Tensor();
  EXPECT_EQ(f.deletes, 0);
  EXPECT_EQ(row.data<double>()[0], 3.0);
  row = Tensor();
  EXPECT_EQ(f.deletes, 1);
}

TEST(DLPack, ImportNegativeStridesKeepsOffsetNonNegative) {
  int32_t data[6] = {0, 1, 2, 3, 4, 5};  // [[0, 1, 2], [3, 4, 5]]
  // Rows reversed, every other column: [[3, 5], [0, 2]], element 0 at data[3].
  Foreign f(data + 3, {kDLInt, 32, 1}, {2, 2}, {-3, 2});
  Tensor t = from_dlpack(&f.managed);
  EXPECT_EQ(t.storage()->data.get(), static_cast<void*>(data));
  EXPECT_EQ(t.storage_offset(), 3);
  EXPECT_EQ(t.storage()->nbytes, 6 * sizeof(int32_t));
  Tensor c = contiguous(t);
  const int32_t* p = c.data<int32_t>();
  EXPECT_EQ(std::vector<int32_t>(p, p + 4), (std::vector<int32_t>{3, 5, 0, 2}));
}

TEST(DLPack, FailedImportLeavesOwnershipWithCaller) {
  float data[2] = {1, 2};
  Foreign complex(data, {kDLComplex, 64, 1}, {1}, {});
  EXPECT_THROW(from_dlpack(&complex.managed), Error);
  Foreign lanes(data, {kDLFloat, 32, 2}, {1}, {});
  EXPECT_THROW(from_dlpack(&lanes.managed), Error);
  Foreign rocm(data, {kDLFloat, 32, 1}, {2}, {});
  rocm.managed.dl_tensor.device = {kDLROCM, 0};
  EXPECT_THROW(from_dlpack(&rocm.managed), Error);
  EXPECT_EQ(complex.deletes + lanes.deletes + rocm.deletes, 0);

  DLManagedTensorVersioned* future = to_dlpack_versioned(iota({2}));
  future->version.major = kMajorVersion + 1;
  try {
    from_dlpack(future);
    ADD_FAILURE() << "a newer major version was accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("[from_dlpack] DLPack version 2.0"), std::string::npos);
  }
  future->deleter(future);
}

}  // namespace
}  // namespace kiln::dlpack
