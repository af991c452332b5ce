/// \file
/// Definitions of the functions declared in volt/serialization/checkpoint_hooks.hpp: compiled in every translation unit
/// (header-only), or once with VOLT_IMPLEMENTATION (see volt/core/linkage.hpp).
#pragma once

namespace volt {

VOLT_INLINE void CheckpointSave::write_module_weights(torch::serialize::OutputArchive& into) const {
  if (contiguous_weights_) {
    detail::save_module_contiguous(module_, into);
  } else {
    module_.save(into);
  }
}

VOLT_INLINE void CheckpointSave::write_weights(torch::serialize::OutputArchive& into,
                                               const std::vector<torch::Tensor>& parameters,
                                               const std::vector<torch::Tensor>& buffers) const {
  detail::save_module_replaced(module_, parameters, buffers, into, contiguous_weights_);
}

VOLT_INLINE void CheckpointLoad::load_module_weights(const std::string& key) {
  torch::serialize::InputArchive weights;
  reader_.read_archive(key, weights);
  detail::check_model_matches(weights, module_, reader_.shown() + " (entry '" + key + "')");
  try {
    module_.load(weights);
  } catch (const std::exception& error) {
    throw CheckpointError("volt: the entry '" + key + "' of " + reader_.shown() + " does not match the model: " +
                          error.what());
  }
}

}  // namespace volt
