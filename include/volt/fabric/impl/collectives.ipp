/// \file
/// Definitions of the functions declared in volt/fabric/collectives.hpp: compiled in every translation unit
/// (header-only), or once with VOLT_IMPLEMENTATION (see volt/core/linkage.hpp).
#pragma once

namespace volt::detail {

VOLT_INLINE ReduceOp fabric_reduce_op(const std::string& op) {
  static const std::set<std::string> ops = {"mean", "avg", "sum", "max", "min", "product"};
  if (ops.count(op) == 0) {
    throw std::invalid_argument("volt::Fabric::all_reduce: unsupported reduce op '" + op +
                                "'; use \"mean\", \"sum\", \"max\", \"min\" or \"product\"");
  }
  if (op == "sum") return ReduceOp::sum;
  if (op == "max") return ReduceOp::max;
  if (op == "min") return ReduceOp::min;
  if (op == "product") return ReduceOp::product;
  return ReduceOp::mean;
}

VOLT_INLINE NoBackwardSyncGuard::NoBackwardSyncGuard(bool* flag, bool enabled)
    : flag_(flag), previous_(*flag) {
  if (enabled) *flag_ = true;
}

}  // namespace volt::detail
