/// \file
/// What a callback's on_save_checkpoint and on_load_checkpoint see of a full checkpoint (Lightning's checkpoint
/// dict in Callback.on_save_checkpoint / on_load_checkpoint): volt::CheckpointSave while one is written,
/// volt::CheckpointLoad while a fit resumes from one.
#pragma once

#include <volt/core/linkage.hpp>
#include <volt/serialization/checkpoint_io.hpp>
#include <volt/serialization/module_archive.hpp>

#include <torch/torch.h>

#include <optional>
#include <string>
#include <vector>

namespace volt {

/// A full checkpoint being written, before its model entry ("model", Lightning's state_dict) is: a callback may
/// add entries and replace the model entry. Offered to callbacks on global rank zero only, and not for
/// weights-only checkpoints (save_weights_only), as Lightning calls no callback's on_save_checkpoint for those.
class CheckpointSave {
 public:
  /// A checkpoint of `module` written into `archive`; `contiguous_weights`: the model entry holds contiguous
  /// tensors (a channels-last run).
  CheckpointSave(const torch::nn::Module& module, torch::serialize::OutputArchive& archive, bool contiguous_weights)
      : module_(module), archive_(archive), contiguous_weights_(contiguous_weights) {}

  /// The model being saved.
  const torch::nn::Module& module() const noexcept { return module_; }

  /// Writes the module's own weights into `into`, as the model entry holds them.
  void write_module_weights(torch::serialize::OutputArchive& into) const;

  /// Writes into `into` the model entry's names and nesting with `parameters` and `buffers` (in the order of
  /// module().parameters() and module().buffers()) in place of the module's tensors. Throws std::logic_error
  /// when their numbers differ from the module's.
  void write_weights(torch::serialize::OutputArchive& into, const std::vector<torch::Tensor>& parameters,
                     const std::vector<torch::Tensor>& buffers) const;

  /// Adds the entry `key` beside the checkpoint's others (volt's own keys, "model", "loop/..." and the
  /// callbacks' state keys, are taken).
  void write(const std::string& key, torch::serialize::OutputArchive& entry) { archive_.write(key, entry); }

  /// Makes `weights` (written with write_weights) the checkpoint's model entry in place of the module's own
  /// weights; of several callbacks that replace it, the last one's is kept.
  void replace_model_entry(torch::serialize::OutputArchive weights) { model_entry_.emplace(std::move(weights)); }

  /// The model entry a callback put in place of the module's weights, or nullptr.
  torch::serialize::OutputArchive* replaced_model_entry() noexcept { return model_entry_ ? &*model_entry_ : nullptr; }

 private:
  const torch::nn::Module& module_;
  torch::serialize::OutputArchive& archive_;
  bool contiguous_weights_;
  std::optional<torch::serialize::OutputArchive> model_entry_{};
};

/// A checkpoint a fit resumes from, after its model entry was loaded into the module and before the callbacks'
/// load_state (Lightning's order: the model's state_dict, then the callbacks' on_load_checkpoint, then their
/// load_state_dict).
class CheckpointLoad {
 public:
  /// The checkpoint read by `reader`, resumed into `module`.
  CheckpointLoad(torch::nn::Module& module, const detail::CheckpointReader& reader) : module_(module), reader_(reader) {}

  /// The model being resumed (it holds the checkpoint's model entry until a callback loads another).
  torch::nn::Module& module() noexcept { return module_; }

  /// Whether the checkpoint has an entry `key`.
  bool contains(const std::string& key) const { return reader_.contains(key); }

  /// Reads the archive entry `key` into `into`; false (and `into` untouched) when the checkpoint has none.
  bool try_read(const std::string& key, torch::serialize::InputArchive& into) const {
    return reader_.try_read_archive(key, into);
  }

  /// Loads the module weights of entry `key` (written with CheckpointSave::write_module_weights) into the
  /// module. Throws CheckpointError naming the file when the entry is missing or does not match the module.
  void load_module_weights(const std::string& key);

 private:
  torch::nn::Module& module_;
  const detail::CheckpointReader& reader_;
};

}  // namespace volt

#if VOLT_DETAIL_HEADER_BODIES
#include <volt/serialization/impl/checkpoint_hooks.ipp>
#endif
