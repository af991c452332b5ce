/// \file
/// Definitions of the functions declared in volt/callbacks/learning_rate_monitor.hpp: compiled in every translation unit
/// (header-only), or once with VOLT_IMPLEMENTATION (see volt/core/linkage.hpp).
#pragma once

namespace volt::detail {

VOLT_INLINE std::string optimizer_name(const torch::optim::Optimizer& optimizer) {
  std::string name = typeid(optimizer).name();
#if __has_include(<cxxabi.h>)
  int status = 0;
  if (char* demangled = abi::__cxa_demangle(name.c_str(), nullptr, nullptr, &status); status == 0) {
    name = demangled;
    std::free(demangled);
  }
#endif
  if (const auto colon = name.rfind("::"); colon != std::string::npos) name = name.substr(colon + 2);
  return name;
}

namespace lr_monitor {

// LibTorch's option classes stand for the keys of PyTorch's `optimizer.defaults` and param group dicts.
VOLT_INLINE bool has_betas(const torch::optim::OptimizerOptions& options) {
  return dynamic_cast<const torch::optim::AdamOptions*>(&options) != nullptr ||
         dynamic_cast<const torch::optim::AdamWOptions*>(&options) != nullptr;
}

VOLT_INLINE bool has_momentum(const torch::optim::OptimizerOptions& options) {
  return dynamic_cast<const torch::optim::SGDOptions*>(&options) != nullptr ||
         dynamic_cast<const torch::optim::RMSpropOptions*>(&options) != nullptr;
}

// betas[0] when the optimizer has betas, else the group's momentum, else 0 (Lightning's
// param_group.get("momentum", 0)).
VOLT_INLINE double momentum(const torch::optim::Optimizer& optimizer, const torch::optim::OptimizerOptions& group) {
  if (has_betas(optimizer.defaults())) {
    if (const auto* adam = dynamic_cast<const torch::optim::AdamOptions*>(&group)) return std::get<0>(adam->betas());
    if (const auto* adamw = dynamic_cast<const torch::optim::AdamWOptions*>(&group)) return std::get<0>(adamw->betas());
    return 0.0;
  }
  if (const auto* sgd = dynamic_cast<const torch::optim::SGDOptions*>(&group)) return sgd->momentum();
  if (const auto* rmsprop = dynamic_cast<const torch::optim::RMSpropOptions*>(&group)) return rmsprop->momentum();
  return 0.0;
}

// The group's weight_decay; nullopt for the option classes without one (LBFGS).
VOLT_INLINE std::optional<double> weight_decay(const torch::optim::OptimizerOptions& group) {
  if (const auto* o = dynamic_cast<const torch::optim::AdamOptions*>(&group)) return o->weight_decay();
  if (const auto* o = dynamic_cast<const torch::optim::AdamWOptions*>(&group)) return o->weight_decay();
  if (const auto* o = dynamic_cast<const torch::optim::SGDOptions*>(&group)) return o->weight_decay();
  if (const auto* o = dynamic_cast<const torch::optim::RMSpropOptions*>(&group)) return o->weight_decay();
  if (const auto* o = dynamic_cast<const torch::optim::AdagradOptions*>(&group)) return o->weight_decay();
  return std::nullopt;
}

// Lightning's naming state while it walks the schedulers, then the optimizers without one: the optimizers named
// so far, and per optimizer class the number of unnamed entries ("-N" goes on every later name of a class counted
// twice or more, named ones included).
struct Names {
  std::vector<const torch::optim::Optimizer*> seen;
  std::map<std::type_index, int> unnamed_per_class;

  std::vector<std::string> keys(const torch::optim::Optimizer& optimizer, std::string base, bool named) {
    seen.push_back(&optimizer);
    const std::type_index type(typeid(optimizer));
    if (!named) ++unnamed_per_class[type];
    if (const auto it = unnamed_per_class.find(type); it != unnamed_per_class.end() && it->second > 1) {
      base += "-" + std::to_string(it->second - 1);
    }
    const std::size_t groups = optimizer.param_groups().size();
    if (groups == 1) return {base};
    std::vector<std::string> out;
    for (std::size_t g = 0; g < groups; ++g) out.push_back(base + "/pg" + std::to_string(g + 1));
    return out;
  }
};

VOLT_INLINE void add_stats(std::map<std::string, double>& out, const torch::optim::Optimizer& optimizer,
                           const std::vector<std::string>& keys, bool log_momentum, bool log_weight_decay) {
  const auto& groups = optimizer.param_groups();
  for (std::size_t g = 0; g < groups.size() && g < keys.size(); ++g) {
    const auto& options = groups[g].options();
    out[keys[g]] = options.get_lr();
    if (log_momentum) out[keys[g] + "-momentum"] = momentum(optimizer, options);
    if (log_weight_decay) {
      if (const auto value = weight_decay(options)) out[keys[g] + "-weight_decay"] = *value;
    }
  }
}

}  // namespace lr_monitor

VOLT_INLINE bool lacks_momentum(const std::vector<torch::optim::Optimizer*>& optimizers,
                                const std::vector<MonitoredScheduler>& schedulers) {
  const auto some_lack = [&](bool (*has)(const torch::optim::OptimizerOptions&)) {
    if (!schedulers.empty()) {
      for (const auto& scheduler : schedulers) {
        if (!has(scheduler.optimizer->defaults())) return true;
      }
      return false;
    }
    for (const auto* optimizer : optimizers) {
      if (!has(optimizer->defaults())) return true;
    }
    return false;
  };
  return some_lack(&lr_monitor::has_momentum) && some_lack(&lr_monitor::has_betas);
}

VOLT_INLINE std::map<std::string, double> learning_rate_stats(const std::vector<torch::optim::Optimizer*>& optimizers,
                                                              const std::vector<MonitoredScheduler>& schedulers,
                                                              MonitoredInterval interval, bool log_momentum,
                                                              bool log_weight_decay, const std::string& key_prefix) {
  std::map<std::string, double> out;
  lr_monitor::Names names;
  std::vector<std::vector<std::string>> scheduler_keys;
  for (const auto& scheduler : schedulers) {
    const bool named = !scheduler.name.empty();
    scheduler_keys.push_back(
        names.keys(*scheduler.optimizer, named ? scheduler.name : key_prefix + optimizer_name(*scheduler.optimizer), named));
  }
  for (std::size_t i = 0; i < schedulers.size(); ++i) {
    const bool steps_per_batch = schedulers[i].steps_per_batch;
    if (interval == MonitoredInterval::any || (interval == MonitoredInterval::step) == steps_per_batch) {
      lr_monitor::add_stats(out, *schedulers[i].optimizer, scheduler_keys[i], log_momentum, log_weight_decay);
    }
  }
  for (const auto* optimizer : optimizers) {
    if (std::find(names.seen.begin(), names.seen.end(), optimizer) != names.seen.end()) continue;
    lr_monitor::add_stats(out, *optimizer, names.keys(*optimizer, key_prefix + optimizer_name(*optimizer), false),
                          log_momentum, log_weight_decay);
  }
  return out;
}

VOLT_INLINE void record_learning_rates(std::map<std::string, std::vector<double>>& lrs,
                                       const std::map<std::string, double>& all,
                                       const std::map<std::string, double>& logged) {
  constexpr std::string_view first_group = "/pg1";
  for (const auto& entry : all) {
    const std::string& key = entry.first;
    std::string old_key = key;
    for (auto at = old_key.find(first_group); at != std::string::npos; at = old_key.find(first_group, at)) {
      old_key.erase(at, first_group.size());
    }
    if (old_key != key && lrs.count(old_key) != 0) {
      lrs[key] = std::move(lrs[old_key]);
      lrs.erase(old_key);
    } else {
      lrs[key];
    }
  }
  for (const auto& [key, value] : logged) lrs[key].push_back(value);
}

}  // namespace volt::detail

namespace volt {

VOLT_INLINE LearningRateMonitor::LearningRateMonitor(LearningRateMonitorOptions options)
    : options_(std::move(options)) {
  if (!options_.logging_interval.empty() && options_.logging_interval != "step" &&
      options_.logging_interval != "epoch") {
    throw MisconfigurationError("logging_interval should be `step` or `epoch` or `None`.");
  }
}

}  // namespace volt
