#!/usr/bin/python3
"""Writes tensor/cpu/erf_coefficients.h: the constants of the CPU's float erf and exp
(tensor/cpu/erf_cpu.h), fitted here so that they can be checked and refitted. Run by hand,
with numpy (Debian's python3-numpy):

    /usr/bin/python3 tests/make_erf_coefficients.py > tensor/cpu/erf_coefficients.h

The approximations (erf_cpu.h says why this shape):
  - exp(r) = 1 + r + r^2 E(r) for |r| <= ln2 / 2, relative error;
  - erf(z) = z + z Q(z^2) for 0 <= z < ERF_SMALL_MAX, relative error;
  - erfc(z) = exp(-z^2) R(z - ERF_SMALL_MAX) for ERF_SMALL_MAX <= z < ERF_ONE_FROM,
    absolute error (erf = 1 - erfc is what is wanted there, and its ulp is 2^-24);
  - ERF_ONE_FROM: the smallest float whose erf rounds to 1 in float.
Each polynomial is the minimax one on a dense grid (Lawson's iteratively reweighted least
squares), its coefficients rounded to float one at a time from the constant term up, the
others refitted after each rounding so that they absorb its error. The reference is
Python's double erf, erfc and exp: their error (an ulp or so of double) is 2^-29 of a float
ulp. The header's comment gives the fitted error of each polynomial with float
coefficients (its evaluation in float rounds on top of that; tests/test_erf.c measures the
whole).
"""
import math

import numpy as np

# Where erf's polynomial hands over to 1 - erfc: erfc(0.875) = 0.22, so erf >= 0.78 above,
# in the binade whose ulp is 2^-24.
ERF_SMALL_MAX = 0.875
# The lowest degrees whose fitted error is well below half an ulp (see the header's comment).
EXP_DEGREE = 6    # of exp's polynomial: E has degree 4
SMALL_DEGREE = 6  # of Q
TAIL_DEGREE = 8   # of R
LAWSON_STEPS = 400
GRID = 4000
FLOAT_ULP_AT_1 = 2.0**-24  # the ulp of floats in [0.5, 1)


def to_float(value):
    return float(np.float32(value))


def chebyshev_grid(lo, hi):
    """GRID points on [lo, hi], denser at the ends where the minimax error peaks."""
    angles = np.linspace(0, math.pi, GRID)
    return (lo + hi) / 2 - (hi - lo) / 2 * np.cos(angles)


def minimax(target, basis, weight):
    """Coefficients c minimising max |weight * (basis @ c - target)| on the grid."""
    mass = np.full(len(target), 1.0 / len(target))
    for _ in range(LAWSON_STEPS):
        root = np.sqrt(mass) * weight
        coefficients = np.linalg.lstsq(basis * root[:, None], target * root, rcond=None)[0]
        residual = np.abs(weight * (basis @ coefficients - target))
        mass = mass * residual
        mass /= mass.sum()
    return coefficients


def fit_float_polynomial(variable, target, weight, degree):
    """sum c_i variable^i ~ target with float c_i, rounded from c_0 up."""
    basis = np.vander(variable, degree + 1, increasing=True)
    fixed = []
    for i in range(degree + 1):
        rest = target - basis[:, :i] @ np.array(fixed, dtype=float)
        fixed.append(to_float(minimax(rest, basis[:, i:], weight)[0]))
    error = np.max(np.abs(weight * (basis @ np.array(fixed) - target)))
    return fixed, error


def fit_exp():
    half_ln2 = math.log(2) / 2 * 1.001  # the float reduction can land just outside ln2 / 2
    r = chebyshev_grid(-half_ln2, half_ln2)
    r = r[np.abs(r) > 1e-6]  # (e^r - 1 - r) / r^2 cancels at 0; its limit 1/2 is fitted anyway
    exp_r = np.exp(r)
    target = (exp_r - 1 - r) / r**2
    return fit_float_polynomial(r, target, r**2 / exp_r / FLOAT_ULP_AT_1, EXP_DEGREE - 2)


def fit_small():
    z = chebyshev_grid(1e-4, ERF_SMALL_MAX)
    erf_z = np.array([math.erf(v) for v in z])
    return fit_float_polynomial(z * z, erf_z / z - 1, z / erf_z / FLOAT_ULP_AT_1, SMALL_DEGREE)


def erf_one_from():
    """The smallest positive float z with fl(erf(z)) = 1: erfc(z) <= 2^-25, half the gap
    below 1 (a tie rounds to 1, whose last bit is even)."""
    lo = np.float32(3).view(np.uint32)
    hi = np.float32(4).view(np.uint32)
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if math.erfc(float(np.uint32(mid).view(np.float32))) <= 2.0**-25:
            hi = mid
        else:
            lo = mid
    return float(np.uint32(hi).view(np.float32))


def fit_tail(one_from):
    z = chebyshev_grid(ERF_SMALL_MAX, one_from)
    erfc_z = np.array([math.erfc(v) for v in z])
    gauss = np.exp(-z * z)
    return fit_float_polynomial(z - ERF_SMALL_MAX, erfc_z / gauss, gauss / FLOAT_ULP_AT_1, TAIL_DEGREE)


def ln2_parts():
    """ln2 as LN2_HI + LN2_LO, LN2_HI with its last 12 bits zero so that k * LN2_HI is exact
    for any |k| < 2^12 (exp needs |k| <= 150)."""
    bits = np.float32(math.log(2)).view(np.uint32) & np.uint32(0xFFFFF000)
    high = float(np.uint32(bits).view(np.float32))
    return high, to_float(math.log(2) - high)


def literal(value):
    """A C float literal that is the value exactly."""
    mantissa, exponent = float.hex(value).split("p")
    return "{}p{}f".format(mantissa.rstrip("0").rstrip("."), exponent)


def define(name, value, comment=""):
    line = "#define {} {}".format(name, literal(value))
    return line + (" /* {} */".format(comment) if comment else "")


def main():
    exp_coefficients, exp_error = fit_exp()
    small_coefficients, small_error = fit_small()
    one_from = erf_one_from()
    tail_coefficients, tail_error = fit_tail(one_from)
    ln2_high, ln2_low = ln2_parts()
    lines = [
        "/* Generated by tests/make_erf_coefficients.py: do not edit. The constants of erf_cpu.h,",
        " * with the fitted error of each polynomial (float coefficients, exact arithmetic):",
        " *   exp: E, degree {}: {:.3f} float ulps (2^-24) relative on |r| <= ln2 / 2".format(
            EXP_DEGREE - 2, exp_error),
        " *   erf below ERF_SMALL_MAX: Q, degree {}: {:.3f} ulps (2^-24) relative".format(
            SMALL_DEGREE, small_error),
        " *   erfc up to ERF_ONE_FROM: R, degree {}: {:.3f} x 2^-24 absolute */".format(TAIL_DEGREE, tail_error),
        "#ifndef GC_TENSOR_ERF_COEFFICIENTS_H",
        "#define GC_TENSOR_ERF_COEFFICIENTS_H",
        "",
        define("GC_LN2_HI", ln2_high),
        define("GC_LN2_LO", ln2_low),
        define("GC_LOG2_E", to_float(1 / math.log(2))),
    ]
    lines += [define("GC_EXP_E{}".format(i), c) for i, c in enumerate(exp_coefficients)]
    lines += [
        "",
        define("GC_ERF_SMALL_MAX", ERF_SMALL_MAX),
        define("GC_ERF_ONE_FROM", one_from, "{!r}".format(one_from)),
    ]
    lines += [define("GC_ERF_Q{}".format(i), c) for i, c in enumerate(small_coefficients)]
    lines += [define("GC_ERFC_R{}".format(i), c) for i, c in enumerate(tail_coefficients)]
    lines += ["", "#endif"]
    print("\n".join(lines))


if __name__ == "__main__":
    main()
