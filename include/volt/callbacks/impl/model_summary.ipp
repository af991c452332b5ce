/// \file
/// Definitions of the functions declared in volt/callbacks/model_summary.hpp: compiled in every translation unit
/// (header-only), or once with VOLT_IMPLEMENTATION (see volt/core/linkage.hpp).
#pragma once

namespace volt {

VOLT_INLINE std::string human_readable_count(std::int64_t number) {
  static const char* labels[] = {" ", "K", "M", "B", "T"};
  const int digits = number > 0 ? static_cast<int>(std::floor(std::log10(static_cast<double>(number)))) + 1 : 1;
  int groups = (digits + 2) / 3;
  groups = std::min(groups, 5);
  const double scaled = static_cast<double>(number) * std::pow(10.0, -3.0 * (groups - 1));
  char buffer[48];
  if (groups - 1 < 1 || scaled >= 100) {
    std::snprintf(buffer, sizeof buffer, "%lld %s", static_cast<long long>(scaled), labels[groups - 1]);
  } else {
    std::snprintf(buffer, sizeof buffer, "%.1f %s", scaled, labels[groups - 1]);
  }
  return buffer;
}

VOLT_INLINE std::string module_type_name(const torch::nn::Module& module) {
  std::string name = module.name();
  if (const auto colon = name.rfind("::"); colon != std::string::npos) name = name.substr(colon + 2);
  if (name.size() > 4 && name.ends_with("Impl")) name.resize(name.size() - 4);
  return name;
}

VOLT_INLINE std::string ModelSummary::summarize(const torch::nn::Module& model) const {
  struct Row {
    std::string name, type, params, mode;
  };
  std::vector<Row> rows;
  if (max_depth_ != 0) {
    for (const auto& item : model.named_modules("", /*include_self=*/false)) {
      const auto depth = 1 + std::count(item.key().begin(), item.key().end(), '.');
      if (max_depth_ > 0 && depth > max_depth_) continue;
      std::int64_t count = 0;
      for (const auto& p : item.value()->parameters()) count += p.numel();
      rows.push_back({item.key(), module_type_name(*item.value()), human_readable_count(count),
                      item.value()->is_training() ? "train" : "eval"});
    }
  }
  std::int64_t trainable = 0, frozen = 0, bytes = 0;
  for (const auto& p : model.parameters()) {
    (p.requires_grad() ? trainable : frozen) += p.numel();
    bytes += p.numel() * static_cast<std::int64_t>(p.element_size());
  }
  std::size_t w_index = std::to_string(rows.size()).size(), w_name = 4, w_type = 4, w_params = 6, w_mode = 5;
  for (const auto& row : rows) {
    w_name = std::max(w_name, row.name.size());
    w_type = std::max(w_type, row.type.size());
    w_params = std::max(w_params, row.params.size());
  }
  std::ostringstream out;
  auto cell = [&out](const std::string& text, std::size_t width) { out << text << std::string(width - text.size(), ' '); };
  if (!rows.empty()) {
    out << std::string(w_index, ' ') << " | ";
    cell("Name", w_name), out << " | ", cell("Type", w_type), out << " | ", cell("Params", w_params),
        out << " | ", cell("Mode", w_mode), out << '\n';
    const std::size_t width = w_index + w_name + w_type + w_params + w_mode + 12;
    out << std::string(width, '-') << '\n';
    for (std::size_t i = 0; i < rows.size(); ++i) {
      cell(std::to_string(i), w_index), out << " | ", cell(rows[i].name, w_name), out << " | ",
          cell(rows[i].type, w_type), out << " | ", cell(rows[i].params, w_params), out << " | ",
          cell(rows[i].mode, w_mode), out << '\n';
    }
    out << std::string(width, '-') << '\n';
  }
  char size[32];
  std::snprintf(size, sizeof size, "%.3f", static_cast<double>(bytes) / 1e6);
  auto total_line = [&out](const std::string& value, const char* label) {
    out << value << std::string(value.size() < 10 ? 10 - value.size() : 1, ' ') << label << '\n';
  };
  total_line(human_readable_count(trainable), "Trainable params");
  total_line(human_readable_count(frozen), "Non-trainable params");
  total_line(human_readable_count(trainable + frozen), "Total params");
  total_line(size, "Total estimated model params size (MB)");
  std::string text = out.str();
  text.pop_back();
  return text;
}

}  // namespace volt
