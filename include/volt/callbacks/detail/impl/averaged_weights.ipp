/// \file
/// Definitions of the functions declared in volt/callbacks/detail/averaged_weights.hpp: compiled in every translation unit
/// (header-only), or once with VOLT_IMPLEMENTATION (see volt/core/linkage.hpp).
#pragma once

namespace volt {

VOLT_INLINE AveragingFunction swa_average() {
  return [](const std::vector<torch::Tensor>& averaged, const std::vector<torch::Tensor>& current,
            std::int64_t num_averaged) {
    if (averaged.empty()) return;
    torch::NoGradGuard no_grad;
    const auto& first = averaged.front();
    if ((first.is_floating_point() || first.is_complex()) && first.is_cuda()) {
      compat::foreach_lerp_(averaged, current, 1.0 / static_cast<double>(num_averaged + 1));
      return;
    }
    for (std::size_t i = 0; i < averaged.size(); ++i) {
      averaged[i].copy_(averaged[i] + (current[i] - averaged[i]) / static_cast<double>(num_averaged + 1));
    }
  };
}

VOLT_INLINE AveragingFunction ema_average(double decay) {
  if (!(decay >= 0.0 && decay <= 1.0)) {
    throw std::invalid_argument("Invalid decay value " + detail::python_float(decay) +
                                " provided. Please provide a value in [0,1] range.");
  }
  return [decay](const std::vector<torch::Tensor>& averaged, const std::vector<torch::Tensor>& current,
                 std::int64_t /*num_averaged*/) {
    if (averaged.empty()) return;
    torch::NoGradGuard no_grad;
    if (averaged.front().is_floating_point() || averaged.front().is_complex()) {
      compat::foreach_lerp_(averaged, current, 1.0 - decay);
      return;
    }
    for (std::size_t i = 0; i < averaged.size(); ++i) averaged[i].copy_(averaged[i] * decay + current[i] * (1.0 - decay));
  };
}
}  // namespace volt

namespace volt::detail {

VOLT_INLINE void AveragedWeights::reset(torch::nn::Module& module, torch::Device device) {
  torch::NoGradGuard no_grad;
  parameters_ = copies(module.parameters(), device);
  buffers_ = copies(module.buffers(), device);
  n_averaged_ = 0;
  ready_ = true;
}

VOLT_INLINE void AveragedWeights::take(torch::nn::Module& module, std::int64_t n_averaged) {
  torch::NoGradGuard no_grad;
  parameters_.clear();
  buffers_.clear();
  for (const auto& tensor : module.parameters()) parameters_.push_back(tensor.detach().clone());
  for (const auto& tensor : module.buffers()) buffers_.push_back(tensor.detach().clone());
  n_averaged_ = n_averaged;
  ready_ = false;
}

VOLT_INLINE void AveragedWeights::adopt(torch::nn::Module& module, torch::Device device, const std::string& owner) {
  check_matches(parameters_, module.parameters(), owner, "parameter");
  check_matches(buffers_, module.buffers(), owner, "buffer");
  for (auto& tensor : parameters_) tensor = tensor.to(device);
  for (auto& tensor : buffers_) tensor = tensor.to(device);
  ready_ = true;
}

VOLT_INLINE void AveragedWeights::update(torch::nn::Module& module, const AveragingFunction& average,
                                         bool use_buffers) {
  torch::NoGradGuard no_grad;
  std::vector<torch::Tensor> averaged = parameters_;
  std::vector<torch::Tensor> current = module.parameters();
  if (use_buffers) {
    averaged.insert(averaged.end(), buffers_.begin(), buffers_.end());
    for (auto& buffer : module.buffers()) current.push_back(buffer);
  }
  check_count(averaged.size(), current.size());
  for (std::size_t i = 0; i < current.size(); ++i) current[i] = current[i].detach().to(averaged[i].device());
  if (n_averaged_ == 0) {
    for (std::size_t i = 0; i < averaged.size(); ++i) averaged[i].copy_(current[i]);
  } else {
    // One call per dtype, as torch groups the tensors by device and dtype (the copy has one device).
    std::map<c10::ScalarType, std::pair<std::vector<torch::Tensor>, std::vector<torch::Tensor>>> groups;
    for (std::size_t i = 0; i < averaged.size(); ++i) {
      auto& group = groups[averaged[i].scalar_type()];
      group.first.push_back(averaged[i]);
      group.second.push_back(current[i]);
    }
    for (auto& [dtype, group] : groups) average(group.first, group.second, n_averaged_);
  }
  if (!use_buffers) copy_buffers_from(module);
  ++n_averaged_;
}

VOLT_INLINE void AveragedWeights::swap(torch::nn::Module& module) {
  torch::NoGradGuard no_grad;
  auto swap_all = [](std::vector<torch::Tensor>& mine, const std::vector<torch::Tensor>& theirs) {
    check_count(mine.size(), theirs.size());
    for (std::size_t i = 0; i < mine.size(); ++i) {
      torch::Tensor kept = mine[i].clone();
      mine[i].copy_(theirs[i]);
      theirs[i].copy_(kept);
    }
  };
  swap_all(parameters_, module.parameters());
  swap_all(buffers_, module.buffers());
}

VOLT_INLINE void AveragedWeights::copy_into(torch::nn::Module& module, bool with_buffers) const {
  torch::NoGradGuard no_grad;
  copy_all(module.parameters(), parameters_);
  if (with_buffers) copy_all(module.buffers(), buffers_);
}

VOLT_INLINE void AveragedWeights::save(torch::serialize::OutputArchive& archive) const {
  archive.write("ready", c10::IValue(ready_));
  archive.write("n_averaged", c10::IValue(n_averaged_));
  archive.write("parameters/count", c10::IValue(static_cast<std::int64_t>(parameters_.size())));
  archive.write("buffers/count", c10::IValue(static_cast<std::int64_t>(buffers_.size())));
  for (std::size_t i = 0; i < parameters_.size(); ++i) {
    archive.write("parameters/" + std::to_string(i), parameters_[i], /*is_buffer=*/true);
  }
  for (std::size_t i = 0; i < buffers_.size(); ++i) {
    archive.write("buffers/" + std::to_string(i), buffers_[i], /*is_buffer=*/true);
  }
}

VOLT_INLINE bool AveragedWeights::load(torch::serialize::InputArchive& archive) {
  c10::IValue value;
  archive.read("ready", value);
  if (!value.toBool()) return false;
  archive.read("n_averaged", value);
  n_averaged_ = value.toInt();
  parameters_ = read_tensors(archive, "parameters");
  buffers_ = read_tensors(archive, "buffers");
  return true;
}

VOLT_INLINE auto AveragedWeights::copies(const std::vector<torch::Tensor>& tensors, torch::Device device) -> std::vector<torch::Tensor> {
  std::vector<torch::Tensor> result;
  result.reserve(tensors.size());
  for (const auto& tensor : tensors) result.push_back(tensor.detach().to(device, /*non_blocking=*/false, /*copy=*/true));
  return result;
}

VOLT_INLINE auto AveragedWeights::read_tensors(torch::serialize::InputArchive& archive, const std::string& prefix) -> std::vector<torch::Tensor> {
  c10::IValue value;
  archive.read(prefix + "/count", value);
  std::vector<torch::Tensor> tensors(static_cast<std::size_t>(value.toInt()));
  for (std::size_t i = 0; i < tensors.size(); ++i) archive.read(prefix + "/" + std::to_string(i), tensors[i], true);
  return tensors;
}

VOLT_INLINE void AveragedWeights::check_count(std::size_t mine, std::size_t theirs) {
  if (mine != theirs) {
    throw std::logic_error("volt: the averaged weights hold " + std::to_string(mine) +
                           " tensors but the model has " + std::to_string(theirs) +
                           " (the model changed its parameters or buffers during fit)");
  }
}

VOLT_INLINE void AveragedWeights::check_matches(const std::vector<torch::Tensor>& saved,
                                                const std::vector<torch::Tensor>& model, const std::string& owner,
                                                const std::string& kind) {
  std::string problem;
  if (saved.size() != model.size()) {
    problem = std::to_string(saved.size()) + " " + kind + "s, the model " + std::to_string(model.size());
  }
  for (std::size_t i = 0; problem.empty() && i < saved.size(); ++i) {
    if (saved[i].sizes() != model[i].sizes() || saved[i].scalar_type() != model[i].scalar_type()) {
      problem = kind + " " + std::to_string(i) + " is " + c10::toString(saved[i].scalar_type()) + " of shape " +
                c10::str(saved[i].sizes()) + ", the model's " + c10::toString(model[i].scalar_type()) + " of shape " +
                c10::str(model[i].sizes());
    }
  }
  if (!problem.empty()) {
    throw CheckpointError("volt: " + owner + ": the checkpoint's averaged weights do not match the model (" +
                          problem + "); resume with the model that wrote it");
  }
}

VOLT_INLINE void AveragedWeights::copy_buffers_from(torch::nn::Module& module) {
  const auto model_buffers = module.buffers();
  check_count(buffers_.size(), model_buffers.size());
  for (std::size_t i = 0; i < buffers_.size(); ++i) buffers_[i].copy_(model_buffers[i].detach());
}

VOLT_INLINE void AveragedWeights::copy_all(const std::vector<torch::Tensor>& destinations,
                                           const std::vector<torch::Tensor>& sources) {
  check_count(sources.size(), destinations.size());
  for (std::size_t i = 0; i < destinations.size(); ++i) destinations[i].copy_(sources[i]);
}

}  // namespace volt::detail
