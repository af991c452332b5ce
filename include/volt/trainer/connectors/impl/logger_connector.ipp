/// \file
/// Definitions of the functions declared in volt/trainer/connectors/logger_connector.hpp: compiled in every translation unit
/// (header-only), or once with VOLT_IMPLEMENTATION (see volt/core/linkage.hpp).
#pragma once

namespace volt::detail {

VOLT_INLINE void MetricStore::replay(const std::vector<RecordedLog>& calls) {
  for (const auto& call : calls) log(call.name, call.value, call.options, call.phase);
}

VOLT_INLINE void MetricStore::log(std::string_view name, const torch::Tensor& value, const LogOptions& options,
                                  MetricPhase phase) {
  if (recording_ != nullptr) {
    TORCH_CHECK(value.numel() == 1, "volt: the logged value `", name,
                "` must hold a single element, but it has shape ", value.sizes());
    recording_->push_back(RecordedLog{std::string(name), value.detach(), options, phase});
    return;
  }
  const bool training = phase == MetricPhase::train;
  bool default_on_step = training;
  bool default_on_epoch = !training;
  if (!epoch_hook_.empty()) {
    // Lightning's _FxValidator: in the epoch-level hooks a value is an epoch value only.
    const auto refuse = [&](const char* option, bool given, const char* allowed) {
      throw MisconfigurationError("You can't `self.log(" + std::string(option) + "=" + (given ? "True" : "False") +
                                  ")` inside `" + std::string(epoch_hook_) + "`, must be one of " + allowed + ".");
    };
    if (options.on_step.value_or(false)) refuse("on_step", true, "(False,)");
    if (!options.on_epoch.value_or(true)) refuse("on_epoch", false, "(True,)");
    default_on_step = false;
    default_on_epoch = true;
  }
  MetricEntry* entry = find(name, phase);
  if (entry == nullptr) {
    entries_.push_back(MetricEntry{std::string(name), phase, options.prog_bar,
                                   options.on_step.value_or(default_on_step),
                                   options.on_epoch.value_or(default_on_epoch), options.logger, options.reduce, {},
                                   {}, 0, false});
    entry = &entries_.back();
  }
  TORCH_CHECK(value.numel() == 1, "volt: the logged value `", name, "` must hold a single element, but it has shape ",
              value.sizes());
  torch::Tensor detached = value.detach();
  if (entry->on_step) {
    entry->last = detached;
    entry->logged_since_flush = true;
  }
  if (entry->on_epoch) {
    torch::Tensor as_float = detached.to(torch::kFloat).reshape({});
    if (entry->count == 0) {
      entry->aggregate = as_float.clone();
    } else {
      switch (entry->reduce) {
        case Reduce::mean:
        case Reduce::sum: entry->aggregate.add_(as_float); break;
        case Reduce::max: entry->aggregate = torch::maximum(entry->aggregate, as_float); break;
        case Reduce::min: entry->aggregate = torch::minimum(entry->aggregate, as_float); break;
      }
    }
    ++entry->count;
  }
}

VOLT_INLINE void MetricStore::log(std::string_view name, double value, const LogOptions& options, MetricPhase phase) {
  log(name, torch::tensor(value, torch::kDouble), options, phase);
}

VOLT_INLINE auto MetricStore::take_step_values_for_logger() -> std::map<std::string, double> {
  std::map<std::string, double> out;
  for (auto& entry : entries_) {
    if (!entry.logged_since_flush) continue;
    entry.logged_since_flush = false;
    if (!entry.to_logger) continue;
    const double value = entry.last.item<double>();
    out[entry.on_epoch ? entry.name + "_step" : entry.name] = value;
    if (entry.on_epoch) callback_metrics_[entry.name + "_step"] = value;
    callback_metrics_[entry.name] = value;
  }
  return out;
}

VOLT_INLINE bool MetricStore::has_epoch_values(MetricPhase phase) const {
  for (const auto& entry : entries_) {
    if (entry.phase == phase && entry.on_epoch && entry.count > 0) return true;
  }
  return false;
}

VOLT_INLINE auto MetricStore::callback_metrics() -> const std::map<std::string, double, std::less<>>& {
  for (auto& entry : entries_) publish_step_value(entry);
  return callback_metrics_;
}

VOLT_INLINE auto MetricStore::metric(std::string_view key) -> std::optional<double> {
  const auto& all = callback_metrics();
  if (auto it = all.find(key); it != all.end()) return it->second;
  return std::nullopt;
}

VOLT_INLINE auto MetricStore::progress_bar_values() -> std::vector<std::pair<std::string, double>> {
  std::vector<std::pair<std::string, double>> out;
  for (auto& entry : entries_) {
    if (!entry.prog_bar) continue;
    if (entry.on_step && entry.last.defined()) {
      out.emplace_back(entry.on_epoch ? entry.name + "_step" : entry.name, entry.last.item<double>());
    }
    if (entry.on_epoch) {
      const auto key = entry.on_step ? entry.name + "_epoch" : entry.name;
      if (auto it = callback_metrics_.find(key); it != callback_metrics_.end()) out.emplace_back(key, it->second);
    }
  }
  return out;
}

VOLT_INLINE void MetricStore::restore_callback_metrics(const std::map<std::string, double, std::less<>>& metrics) {
  for (const auto& [name, value] : metrics) callback_metrics_.try_emplace(name, value);
}

VOLT_INLINE void MetricStore::update_callback_metrics(const std::map<std::string, double>& values) {
  for (const auto& [name, value] : values) callback_metrics_[name] = value;
}

VOLT_INLINE void MetricStore::discard(MetricPhase phase) {
  std::erase_if(entries_, [phase](const MetricEntry& entry) { return entry.phase == phase; });
  callback_metrics_.clear();
}

VOLT_INLINE void MetricStore::clear() {
  entries_.clear();
  callback_metrics_.clear();
}

VOLT_INLINE void MetricStore::publish_step_value(const MetricEntry& entry) {
  if (!entry.on_step || !entry.last.defined()) return;
  callback_metrics_[entry.on_epoch ? entry.name + "_step" : entry.name] = entry.last.item<double>();
}

VOLT_INLINE auto MetricStore::find(std::string_view name, MetricPhase phase) -> MetricEntry* {
  for (auto& entry : entries_) {
    if (entry.phase == phase && entry.name == name) return &entry;
  }
  return nullptr;
}

VOLT_INLINE EpochHookScope::EpochHookScope(MetricStore* store, std::string_view hook) noexcept
    : store_(store) {
  if (store_ == nullptr) return;
  previous_ = store_->epoch_hook();
  store_->set_epoch_hook(hook);
}

VOLT_INLINE EpochHookScope::~EpochHookScope() {
  if (store_ != nullptr) store_->set_epoch_hook(previous_);
}

VOLT_INLINE void LoggerConnector::add_list(const std::vector<std::shared_ptr<Logger>>& list) {
  for (std::size_t i = 0; i < list.size(); ++i) {
    if (!list[i]) {
      throw MisconfigurationError("The logger list passed to the Trainer has a null entry at index " +
                                  std::to_string(i) + " (of " + std::to_string(list.size()) +
                                  "): every entry must point to a volt::Logger.");
    }
  }
  list_given_ = true;
  for (const auto& entry : list) {
    entry->set_default_save_dir(default_root_dir_);
    loggers_.push_back(entry);
  }
}

VOLT_INLINE void LoggerConnector::configure(bool enabled, bool fast_dev_run) {
  if (enabled && !fast_dev_run && loggers_.empty() && !list_given_) {
    auto csv = std::make_shared<CSVLogger>();
    csv->set_default_save_dir(default_root_dir_);
    loggers_.push_back(std::move(csv));
  }
  if (!enabled || fast_dev_run) loggers_.clear();
}

VOLT_INLINE auto LoggerConnector::pointers() const -> std::vector<Logger*> {
  std::vector<Logger*> out;
  for (const auto& logger : loggers_) out.push_back(logger.get());
  return out;
}

VOLT_INLINE void LoggerConnector::log_hyperparams(const std::map<std::string, std::string>& params) {
  if (!is_global_zero_) return;
  for (const auto& logger : loggers_) logger->log_hyperparams(params);
}

VOLT_INLINE void LoggerConnector::log_metrics(std::map<std::string, double> values, std::int64_t step,
                                              std::int64_t epoch) {
  if (values.empty() || !is_global_zero_) return;
  values["epoch"] = static_cast<double>(epoch);
  for (const auto& logger : loggers_) logger->log_metrics(values, step);
}

VOLT_INLINE void LoggerConnector::save() {
  for (const auto& logger : loggers_) logger->save();
}

VOLT_INLINE void LoggerConnector::finalize(const std::string& status) {
  if (!is_global_zero_) return;
  for (const auto& logger : loggers_) logger->finalize(status);
}

}  // namespace volt::detail

namespace volt::detail {

VOLT_INLINE auto MetricStore::end_epoch(MetricPhase phase,
                                        const std::function<void(std::vector<double>&, Reduce)>& across_ranks) -> std::map<std::string, double> {
  std::map<std::string, double> for_logger;
  std::vector<double> epoch_values(entries_.size(), 0.0);
  for (std::size_t i = 0; i < entries_.size(); ++i) {
    auto& entry = entries_[i];
    if (entry.phase != phase || !entry.on_epoch || entry.count == 0) continue;
    epoch_values[i] = entry.aggregate.item<double>();
    if (entry.reduce == Reduce::mean) epoch_values[i] /= static_cast<double>(entry.count);
  }
  if (across_ranks) {
    for (Reduce kind : {Reduce::mean, Reduce::sum, Reduce::max, Reduce::min}) {
      std::vector<std::size_t> indices;
      std::vector<double> values;
      for (std::size_t i = 0; i < entries_.size(); ++i) {
        const auto& entry = entries_[i];
        if (entry.phase != phase || !entry.on_epoch || entry.reduce != kind) continue;
        indices.push_back(i);
        values.push_back(entry.count > 0 ? epoch_values[i] : 0.0);
      }
      if (values.empty()) continue;
      across_ranks(values, kind);
      for (std::size_t j = 0; j < indices.size(); ++j) epoch_values[indices[j]] = values[j];
    }
  }
  for (std::size_t i = 0; i < entries_.size(); ++i) {
    auto& entry = entries_[i];
    if (entry.phase != phase) continue;
    publish_step_value(entry);
    if (entry.on_epoch && entry.count > 0) {
      const double value = epoch_values[i];
      callback_metrics_[entry.name] = value;
      if (entry.on_step) callback_metrics_[entry.name + "_epoch"] = value;
      if (entry.to_logger) for_logger[entry.on_step ? entry.name + "_epoch" : entry.name] = value;
    }
    entry.count = 0;
    entry.aggregate = torch::Tensor();
  }
  return for_logger;
}

}  // namespace volt::detail
