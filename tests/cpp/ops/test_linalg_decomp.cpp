// The C++ API of ops/linalg_decomp.h: the decompositions work without Python and raise
// LinAlgError (a Runtime kiln::Error) on singular input.
#include <gtest/gtest.h>

#include "core/error.h"
#include "ops/creation.h"
#include "ops/linalg.h"
#include "ops/linalg_decomp.h"

namespace kiln {

namespace {

Tensor matrix(int64_t n, std::initializer_list<double> v) {
  Tensor t = empty({n, static_cast<int64_t>(v.size()) / n}, DType::Float64);
  double* d = t.data<double>();
  for (double x : v) *d++ = x;
  return t;
}

}  // namespace

TEST(LinalgDecomp, InverseTimesMatrixIsIdentity) {
  Tensor a = matrix(2, {4.0, 7.0, 2.0, 6.0});
  Tensor p = matmul(linalg_inv(a), a);
  const double* d = p.data<double>();
  EXPECT_NEAR(d[0], 1.0, 1e-12);
  EXPECT_NEAR(d[1], 0.0, 1e-12);
  EXPECT_NEAR(d[2], 0.0, 1e-12);
  EXPECT_NEAR(d[3], 1.0, 1e-12);
  EXPECT_NEAR(linalg_det(a).data<double>()[0], 10.0, 1e-12);
}

TEST(LinalgDecomp, SingularInverseRaisesLinAlgError) {
  Tensor s = matrix(2, {1.0, 2.0, 2.0, 4.0});
  try {
    linalg_inv(s);
    FAIL() << "expected LinAlgError";
  } catch (const LinAlgError& e) {
    EXPECT_EQ(e.kind(), ErrorKind::Runtime);
    EXPECT_EQ(std::string(e.what()),
              "[linalg.inv] The diagonal element 2 is zero, the inversion could not be "
              "completed because the input matrix is singular.");
  }
  EXPECT_EQ(linalg_det(s).data<double>()[0], 0.0);
}

TEST(LinalgDecomp, CholeskyOfSpdMatrix) {
  Tensor l = linalg_cholesky(matrix(2, {4.0, 2.0, 2.0, 5.0}));
  const double* d = l.data<double>();
  EXPECT_NEAR(d[0], 2.0, 1e-12);
  EXPECT_EQ(d[1], 0.0);
  EXPECT_NEAR(d[2], 1.0, 1e-12);
  EXPECT_NEAR(d[3], 2.0, 1e-12);
  EXPECT_THROW(linalg_cholesky(matrix(2, {1.0, 2.0, 2.0, 1.0})), LinAlgError);
}

}  // namespace kiln
