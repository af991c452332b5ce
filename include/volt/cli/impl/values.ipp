/// \file
/// Definitions of the functions declared in volt/cli/values.hpp: compiled in every translation unit
/// (header-only), or once with VOLT_IMPLEMENTATION (see volt/core/linkage.hpp).
#pragma once

namespace volt::cli::detail {

VOLT_INLINE std::string quoted(std::string_view text) {
  // Built by appending: GCC 12 warns falsely (-Wrestrict) on "'" + std::string at -O3.
  std::string out(1, '\'');
  out.append(text);
  out += '\'';
  return out;
}

VOLT_INLINE double parse_real(std::string_view flag, std::string_view text) {
  try {
    std::size_t used = 0;
    const double value = std::stod(std::string(text), &used);
    if (used == text.size()) return value;
  } catch (const std::logic_error&) {
  }
  throw UsageError("argument " + std::string(flag) + ": expected a number, got " + quoted(text));
}
}  // namespace volt::cli::detail

namespace volt::cli {

VOLT_INLINE std::string normalize_precision(std::string_view value) {
  if (detail::one_of(value, precision_choices)) return std::string(value);
  for (const auto& [alias, canonical] : precision_aliases) {
    if (alias != value) continue;
    if (alias == "16" || alias == "bf16") {
      log::warn_rank_zero("`precision=" + std::string(alias) +
                          "` is supported for historical reasons but its usage is discouraged. Please set your "
                          "precision to " + std::string(canonical) + " instead!");
    }
    return std::string(canonical);
  }
  std::string aliases;
  for (const auto& [alias, canonical] : precision_aliases) aliases += ", " + std::string(alias);
  throw UsageError("argument --precision: Precision " + detail::quoted(value) +
                   " is invalid. Allowed precision values: " + detail::join(precision_choices) + aliases);
}

}  // namespace volt::cli
