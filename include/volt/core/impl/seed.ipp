/// \file
/// Definitions of the functions declared in volt/core/seed.hpp: compiled in every translation unit
/// (header-only), or once with VOLT_IMPLEMENTATION (see volt/core/linkage.hpp).
#pragma once

namespace volt::detail {

VOLT_INLINE std::optional<int> rank_if_known() {
  if (const int rank = log::detail::rank_override().load(); rank >= 0) return rank;
  for (const char* name : {"RANK", "LOCAL_RANK", "SLURM_PROCID", "JSM_NAMESPACE_RANK"}) {
    if (const char* value = std::getenv(name); value != nullptr && *value != '\0') return std::atoi(value);
  }
  return std::nullopt;
}

VOLT_INLINE std::optional<std::int64_t> parse_seed_text(std::string_view text) {
  while (!text.empty() && (text.front() == ' ' || text.front() == '\t')) text.remove_prefix(1);
  while (!text.empty() && (text.back() == ' ' || text.back() == '\t' || text.back() == '\n')) text.remove_suffix(1);
  if (!text.empty() && text.front() == '+') text.remove_prefix(1);
  std::int64_t value = 0;
  const auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (text.empty() || error != std::errc{} || end != text.data() + text.size()) return std::nullopt;
  return value;
}

VOLT_INLINE void set_environment(const char* name, const std::string& value) {
#ifdef _WIN32
  _putenv_s(name, value.c_str());
#else
  setenv(name, value.c_str(), /*overwrite=*/1);
#endif
}
}  // namespace volt::detail

namespace volt {

VOLT_INLINE std::int64_t seed_everything(std::optional<std::int64_t> seed, bool workers,
                                         bool verbose) {
  if (!seed) {
    const char* text = std::getenv("PL_GLOBAL_SEED");
    if (text == nullptr) {
      seed = 0;
      if (verbose) log::warn_rank_zero("No seed found, seed set to 0");
    } else {
      seed = detail::parse_seed_text(text);
      if (!seed) {
        std::string quoted = "'";
        for (const char c : std::string_view(text)) {
          if (c == '\'' || c == '\\') quoted += '\\';
          quoted += c;
        }
        throw std::invalid_argument("Invalid seed specified via PL_GLOBAL_SEED: " + quoted + "'");
      }
    }
  }
  if (*seed < min_seed_value || *seed > max_seed_value) {
    throw std::invalid_argument(std::to_string(*seed) + " is not in bounds, numpy accepts from " +
                                std::to_string(min_seed_value) + " to " + std::to_string(max_seed_value));
  }
  if (verbose) {
    const auto rank = detail::rank_if_known();
    log::info((rank ? "[rank: " + std::to_string(*rank) + "] " : std::string()) + "Seed set to " +
              std::to_string(*seed));
  }
  detail::set_environment("PL_GLOBAL_SEED", std::to_string(*seed));
  std::srand(static_cast<unsigned>(*seed));
  torch::manual_seed(static_cast<std::uint64_t>(*seed));
  detail::set_environment("PL_SEED_WORKERS", workers ? "1" : "0");
  return *seed;
}

}  // namespace volt
