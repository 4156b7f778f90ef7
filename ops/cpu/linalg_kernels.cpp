// Dense decompositions on Eigen, one matrix of the batch at a time. Every tensor here is
// contiguous [B, rows, cols] (vectors [B, k]) of one dtype, float32 or float64, so each
// matrix maps row-major without strides; the front ends (ops/linalg_decomp.cpp) prepare them.
#include <Eigen/Cholesky>
#include <Eigen/Core>
#include <Eigen/Eigenvalues>
#include <Eigen/LU>
#include <Eigen/QR>
#include <Eigen/SVD>
#include <cmath>

#include "ops/cpu/kernels.h"

namespace kiln::cpu {

namespace {

template <typename T>
using Mat = Eigen::Matrix<T, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
template <typename T>
using Vec = Eigen::Matrix<T, Eigen::Dynamic, 1>;

// Matrix b of a [B, r, c] tensor.
template <typename T>
Eigen::Map<Mat<T>> mat(const Tensor& t, int64_t b) {
  const int64_t r = t.size(1), c = t.size(2);
  return {t.data<T>() + b * r * c, r, c};
}

template <typename T>
Eigen::Map<Vec<T>> vec(const Tensor& t, int64_t b) {
  const int64_t k = t.size(1);
  return {t.data<T>() + b * k, k};
}

// LAPACK's getrf info: the 1-based index of the first exactly-zero pivot of U, 0 if none.
template <typename T>
int64_t zero_pivot(const Mat<T>& lu) {
  for (int64_t i = 0; i < lu.rows(); ++i)
    if (lu(i, i) == T(0)) return i + 1;
  return 0;
}

// The front ends admit float32 and float64 only.
template <typename F>
void floating(const Tensor& t, F&& f) {
  if (t.dtype() == DType::Float64)
    f(double{});
  else
    f(float{});
}

}  // namespace

void linalg_lu_kernel(const Tensor& lu, const Tensor& sign, const Tensor& info) {
  floating(lu, [&](auto tag) {
    using T = decltype(tag);
    for (int64_t b = 0; b < lu.size(0); ++b) {
      auto m = mat<T>(lu, b);
      Eigen::PartialPivLU<Mat<T>> f(m);
      m = f.matrixLU();
      sign.data<T>()[b] = T(f.permutationP().determinant());
      info.data<int64_t>()[b] = zero_pivot<T>(m);
    }
  });
}

void linalg_solve_kernel(const Tensor& x, const Tensor& a, const Tensor& info) {
  floating(a, [&](auto tag) {
    using T = decltype(tag);
    for (int64_t b = 0; b < a.size(0); ++b) {
      Eigen::PartialPivLU<Mat<T>> f(mat<T>(a, b));
      const int64_t bad = zero_pivot<T>(f.matrixLU());
      info.data<int64_t>()[b] = bad;
      if (bad == 0) mat<T>(x, b) = f.solve(Mat<T>(mat<T>(x, b)));
    }
  });
}

void linalg_cholesky_kernel(const Tensor& l, const Tensor& info) {
  floating(l, [&](auto tag) {
    using T = decltype(tag);
    for (int64_t b = 0; b < l.size(0); ++b) {
      auto m = mat<T>(l, b);
      const int64_t n = m.rows();
      // A hand-rolled lower Cholesky so a failure names the first leading minor that is
      // not positive-definite, as LAPACK's potrf does.
      int64_t bad = 0;
      for (int64_t j = 0; j < n && bad == 0; ++j) {
        T d = m(j, j) - m.row(j).head(j).squaredNorm();
        if (!(d > T(0))) {
          bad = j + 1;
          break;
        }
        d = std::sqrt(d);
        m(j, j) = d;
        for (int64_t i = j + 1; i < n; ++i)
          m(i, j) = (m(i, j) - m.row(i).head(j).dot(m.row(j).head(j))) / d;
      }
      info.data<int64_t>()[b] = bad;
      m.template triangularView<Eigen::StrictlyUpper>().setZero();
    }
  });
}

void linalg_qr_kernel(const Tensor& q, const Tensor& r, const Tensor& a) {
  floating(a, [&](auto tag) {
    using T = decltype(tag);
    for (int64_t b = 0; b < a.size(0); ++b) {
      Eigen::HouseholderQR<Mat<T>> f(mat<T>(a, b));
      auto rb = mat<T>(r, b);
      rb = f.matrixQR().topRows(rb.rows()).template triangularView<Eigen::Upper>();
      if (q.defined()) {
        auto qb = mat<T>(q, b);
        qb = f.householderQ() * Mat<T>::Identity(qb.rows(), qb.cols());
      }
    }
  });
}

void linalg_svd_kernel(const Tensor& u, const Tensor& s, const Tensor& vh, const Tensor& a,
                       bool full_matrices) {
  floating(a, [&](auto tag) {
    using T = decltype(tag);
    int options = 0;
    if (u.defined())
      options = full_matrices ? Eigen::ComputeFullU | Eigen::ComputeFullV
                              : Eigen::ComputeThinU | Eigen::ComputeThinV;
    for (int64_t b = 0; b < a.size(0); ++b) {
      // Eigen's SVD does not take empty matrices; their singular vectors are the identity.
      if (a.size(1) == 0 || a.size(2) == 0) {
        if (u.defined()) mat<T>(u, b).setIdentity(), mat<T>(vh, b).setIdentity();
        continue;
      }
      Eigen::BDCSVD<Mat<T>> f(mat<T>(a, b), options);
      vec<T>(s, b) = f.singularValues();
      if (u.defined()) {
        mat<T>(u, b) = f.matrixU();
        mat<T>(vh, b) = f.matrixV().transpose();
      }
    }
  });
}

void linalg_eigh_kernel(const Tensor& w, const Tensor& v, const Tensor& a, bool upper) {
  floating(a, [&](auto tag) {
    using T = decltype(tag);
    if (a.size(1) == 0) return;  // nothing to compute, and Eigen does not take 0 x 0
    for (int64_t b = 0; b < a.size(0); ++b) {
      // Eigen reads the lower triangle; the upper triangle of A is the lower one of A^T.
      Mat<T> m = upper ? Mat<T>(mat<T>(a, b).transpose()) : Mat<T>(mat<T>(a, b));
      Eigen::SelfAdjointEigenSolver<Mat<T>> f(
          m, v.defined() ? Eigen::ComputeEigenvectors : Eigen::EigenvaluesOnly);
      vec<T>(w, b) = f.eigenvalues();
      if (v.defined()) mat<T>(v, b) = f.eigenvectors();
    }
  });
}

void linalg_solve_triangular_kernel(const Tensor& x, const Tensor& a, bool upper,
                                    bool unitriangular) {
  floating(a, [&](auto tag) {
    using T = decltype(tag);
    for (int64_t b = 0; b < a.size(0); ++b) {
      auto ab = mat<T>(a, b);
      auto xb = mat<T>(x, b);
      if (upper && unitriangular)
        ab.template triangularView<Eigen::UnitUpper>().solveInPlace(xb);
      else if (upper)
        ab.template triangularView<Eigen::Upper>().solveInPlace(xb);
      else if (unitriangular)
        ab.template triangularView<Eigen::UnitLower>().solveInPlace(xb);
      else
        ab.template triangularView<Eigen::Lower>().solveInPlace(xb);
    }
  });
}

void linalg_lstsq_kernel(const Tensor& x, const Tensor& rank, const Tensor& sv, const Tensor& a,
                         const Tensor& rhs, double rcond, bool use_svd) {
  floating(a, [&](auto tag) {
    using T = decltype(tag);
    for (int64_t b = 0; b < a.size(0); ++b) {
      if (a.size(1) == 0 || a.size(2) == 0) {
        mat<T>(x, b).setZero();
        rank.data<int64_t>()[b] = 0;
      } else if (use_svd) {
        Eigen::BDCSVD<Mat<T>> f(mat<T>(a, b), Eigen::ComputeThinU | Eigen::ComputeThinV);
        const Vec<T> s = f.singularValues();
        const T tol = s.size() ? T(rcond) * s(0) : T(0);
        Vec<T> inv = Vec<T>::Zero(s.size());
        int64_t r = 0;
        for (int64_t i = 0; i < s.size(); ++i)
          if (s(i) > tol) inv(i) = T(1) / s(i), ++r;
        mat<T>(x, b) = f.matrixV() * inv.asDiagonal() * f.matrixU().transpose() * mat<T>(rhs, b);
        rank.data<int64_t>()[b] = r;
        vec<T>(sv, b) = s;
      } else {
        // A complete orthogonal decomposition with column pivoting, as LAPACK's gelsy.
        Eigen::CompleteOrthogonalDecomposition<Mat<T>> f;
        f.setThreshold(T(rcond));
        f.compute(mat<T>(a, b));
        mat<T>(x, b) = f.solve(mat<T>(rhs, b));
        rank.data<int64_t>()[b] = f.rank();
      }
    }
  });
}

}  // namespace kiln::cpu
