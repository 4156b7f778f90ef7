// Scalar special functions (digamma, polygamma, erfinv, i0, i1) shared by the CPU and
// CUDA unary kernels, so both devices compute the same series. A is the accumulation
// type: float for float/half types, double for double.
#pragma once

#include <cmath>
#include <limits>

#include "ops/math/host_device.h"

namespace kiln::special_math {

constexpr double kPi = 3.14159265358979323846;

// psi(x) for x > 0 (and the reflected value below 0): the recurrence
// psi(x) = psi(x + 1) - 1/x lifts x to >= 10, where the asymptotic series in 1/x^2
// has converged to double precision after seven terms.
template <typename A>
KILN_HD A digamma(A x) {
  using std::floor;
  using std::log;
  using std::signbit;
  using std::tan;
  const A inf = std::numeric_limits<A>::infinity();
  if (x == A(0)) return signbit(x) ? inf : -inf;
  A result = 0;
  if (x < A(0)) {
    if (x == floor(x)) return std::numeric_limits<A>::quiet_NaN();
    // Reflection: psi(1 - x) - psi(x) = pi cot(pi x).
    result = A(-kPi) / tan(A(kPi) * x);
    x = A(1) - x;
  }
  while (x < A(10)) {
    result -= A(1) / x;
    x += A(1);
  }
  // psi(x) ~ log x - 1/(2x) - sum_k B_2k / (2k x^2k); these are B_2k / 2k, k = 1..7.
  const double coef[7] = {1.0 / 12,  -1.0 / 120,     1.0 / 252, -1.0 / 240,
                          1.0 / 132, -691.0 / 32760, 1.0 / 12};
  const A r = A(1) / (x * x);
  A sum = 0, power = r;
  for (double c : coef) {
    sum += A(c) * power;
    power *= r;
  }
  return result + log(x) - A(0.5) / x - sum;
}

// psi^(n)(x) = (-1)^(n+1) n! zeta(n + 1, x) for n >= 1. The Hurwitz zeta sum
// sum_k (x + k)^-(n+1) is taken term by term until x >= n + 20, then closed by
// its Euler-Maclaurin tail, whose Bernoulli terms shrink by about
// ((n + 2k) / (2 pi x))^2 each, so eight of them reach double precision.
template <typename A>
KILN_HD A polygamma(int n, A x) {
  using std::floor;
  using std::pow;
  const A inf = std::numeric_limits<A>::infinity();
  const A sign = (n % 2 == 1) ? A(1) : A(-1);
  if (x <= A(0) && x == floor(x)) return sign * inf;
  const A s = A(n + 1);
  A zeta = 0;
  const A lift = A(n + 20);
  while (x < lift) {
    zeta += pow(x, -s);
    x += A(1);
  }
  const A xs = pow(x, -s);
  zeta += x * xs / (s - A(1)) + A(0.5) * xs;
  // B_2, B_4, ..., B_16.
  const double bernoulli[8] = {1.0 / 6,  -1.0 / 30,     1.0 / 42, -1.0 / 30,
                               5.0 / 66, -691.0 / 2730, 7.0 / 6,  -3617.0 / 510};
  // factor_k = s (s+1) ... (s+2k-2) / (2k)! * x^-(s+2k-1)
  A factor = s * xs / (A(2) * x);
  for (int k = 1; k <= 8; ++k) {
    zeta += A(bernoulli[k - 1]) * factor;
    factor *= (s + A(2 * k - 1)) * (s + A(2 * k)) / (A(2 * k + 1) * A(2 * k + 2) * x * x);
  }
  A factorial = 1;
  for (int k = 2; k <= n; ++k) factorial *= A(k);
  return sign * factorial * zeta;
}

// erf^-1(y): Giles' single-precision approximation in w = -log(1 - y^2), then Newton
// steps on erf(x) = y to the working precision of A.
template <typename A>
KILN_HD A erfinv(A y) {
  using std::erf;
  using std::erfc;
  using std::exp;
  using std::fabs;
  using std::isnan;
  using std::log;
  using std::sqrt;
  if (isnan(y) || y < A(-1) || y > A(1)) return std::numeric_limits<A>::quiet_NaN();
  if (y == A(1) || y == A(-1)) return y * std::numeric_limits<A>::infinity();
  A w = -log((A(1) - y) * (A(1) + y));
  A p;
  if (w < A(5)) {
    w -= A(2.5);
    p = A(2.81022636e-08);
    p = A(3.43273939e-07) + p * w;
    p = A(-3.5233877e-06) + p * w;
    p = A(-4.39150654e-06) + p * w;
    p = A(0.00021858087) + p * w;
    p = A(-0.00125372503) + p * w;
    p = A(-0.00417768164) + p * w;
    p = A(0.246640727) + p * w;
    p = A(1.50140941) + p * w;
  } else {
    w = sqrt(w) - A(3);
    p = A(-0.000200214257);
    p = A(0.000100950558) + p * w;
    p = A(0.00134934322) + p * w;
    p = A(-0.00367342844) + p * w;
    p = A(0.00573950773) + p * w;
    p = A(-0.0076224613) + p * w;
    p = A(0.00943887047) + p * w;
    p = A(1.00167406) + p * w;
    p = A(2.83297682) + p * w;
  }
  A x = p * y;
  const A two_over_sqrt_pi = A(1.12837916709551257390);
  // Giles' fit targets float32; in float64's far tails (|y| > 1 - 1e-7) it starts
  // further out, so Newton runs until its step stops mattering (at most 8 steps).
  for (int i = 0; i < 8; ++i) {
    const A slope = two_over_sqrt_pi * exp(-x * x);
    if (slope == A(0)) break;
    // erf(x) - y, through erfc in the tails, where erf(x) rounds to +-1 and would
    // leave the residual no significant digits.
    A residual;
    if (y > A(0.5))
      residual = (A(1) - y) - erfc(x);
    else if (y < A(-0.5))
      residual = erfc(-x) - (A(1) + y);
    else
      residual = erf(x) - y;
    const A step = residual / slope;
    x -= step;
    if (!(fabs(step) > fabs(x) * std::numeric_limits<A>::epsilon())) break;
  }
  return x;
}

// Modified Bessel functions of the first kind, orders 0 and 1, from their power
// series in q = x^2/4. All terms are positive, so the sum is stable; it stops when
// a term no longer changes it (about x/2 + a few sqrt(x) terms; the values
// overflow float64 before x reaches 720, where that is ~450 terms).
template <typename A>
KILN_HD A bessel_series(A x, int order) {
  const A q = x * x / A(4);
  A term = 1, sum = 1;
  for (int k = 1; k < 1000; ++k) {
    term *= q / (A(k) * A(k + order));
    const A next = sum + term;
    if (next == sum) break;
    sum = next;
  }
  return sum;
}

template <typename A>
KILN_HD A i0(A x) {
  using std::isnan;
  if (isnan(x)) return x;
  return bessel_series(x, 0);
}

template <typename A>
KILN_HD A i1(A x) {
  using std::isnan;
  if (isnan(x)) return x;
  return x / A(2) * bessel_series(x, 1);
}

}  // namespace kiln::special_math
