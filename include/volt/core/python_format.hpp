/// \file
/// Numbers in messages as Lightning prints them: Python's repr() of a float ("1.0", "0.25",
/// "0.3333333333333333", "1e-05", "inf", "nan"), so an error message reads as Lightning's and gives a value
/// that can be pasted back. Implementation detail of volt's messages; includes nothing of LibTorch.
#pragma once

#include <volt/core/linkage.hpp>
#include <charconv>
#include <cmath>
#include <cstdlib>
#include <string>
#include <system_error>

namespace volt::detail {

/// Python's repr(float(value)): the shortest digits that read back as `value`, in fixed notation when the
/// decimal exponent is in [-5, 16) (with ".0" for a whole number), otherwise as "<digits>e<sign><two or more
/// digits>" ("1e-05", "1.5e+16").
VOLT_INLINE std::string python_float(double value);

}  // namespace volt::detail

#if VOLT_DETAIL_HEADER_BODIES
#include <volt/core/impl/python_format.ipp>
#endif
