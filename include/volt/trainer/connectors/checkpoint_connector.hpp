/// \file
/// The checkpoint connector (Lightning's trainer/connectors/checkpoint_connector.py): what a checkpoint of a
/// fit holds (model, loop progress, optimizer, schedulers, precision, callbacks, the CPU generator) and how a
/// fit resumes from one. Independent of the model's type: it works on torch::nn::Module.
#pragma once

#include <volt/core/linkage.hpp>
#include <volt/serialization/checkpoint_hooks.hpp>
#include <volt/serialization/checkpoint_io.hpp>
#include <volt/serialization/module_archive.hpp>
#include <volt/trainer/connectors/callback_connector.hpp>
#include <volt/trainer/optimizers.hpp>
#include <volt/trainer/state.hpp>

#include <torch/torch.h>

#include <cstdint>
#include <exception>
#include <filesystem>
#include <functional>
#include <map>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

namespace volt::detail {

/// The default CPU generator's state.
VOLT_INLINE torch::Tensor cpu_rng_state();
/// Sets the default CPU generator's state.
VOLT_INLINE void set_cpu_rng_state(const torch::Tensor& state);

/// What a fit's checkpoint holds besides the loop progress, as the Trainer has it.
struct CheckpointParts {
  torch::nn::Module& module;
  Optimization& optimization;
  CallbackConnector& callbacks;
  TrainerState& state;
  std::function<void(torch::serialize::OutputArchive&)> save_precision;
  std::function<void(torch::serialize::InputArchive&)> load_precision;
  /// The precision's name ("32-true", "bf16-mixed"...), recorded in the checkpoint and named in errors.
  std::string_view precision_name{};
  /// Write the weights contiguous (a channels-last run): they are saved as Module::save saves them otherwise.
  bool contiguous_weights = false;
};

/// Writes and reads checkpoints of a fit, and keeps the loop's position for them.
class CheckpointConnector {
 public:
  /// Where the loop stands now (the loops keep it current).
  ResumePoint resume_point{};
  /// What a mid-epoch resume still has to do (set by restore, consumed by the epoch loop).
  ResumeState resume{};
  /// The training batches the fit has started, all epochs together (Lightning's batch_progress.total.ready):
  /// validation every val_check_interval batches across epochs counts them. Kept in checkpoints.
  std::int64_t total_batches = 0;
  /// The CPU generator's state when the current epoch started (its loader shuffled with it).
  torch::Tensor epoch_start_rng{};
  /// The callback metrics a restored checkpoint held (the last validation's values among them), put back into
  /// the metric store once the sanity check (which clears it) is over: a resumed run's top-k and every-n-steps
  /// saves then see what the uninterrupted run saw.
  std::map<std::string, double, std::less<>> restored_metrics{};

  /// State kept in checkpoints besides the fit's own (a volt::DataModule's, under its class name, as Lightning
  /// stores it): written after the callbacks' state, read back (when the checkpoint has it) after theirs.
  struct ExtraState {
    std::string key;
    std::function<void(torch::serialize::OutputArchive&)> save;
    std::function<void(torch::serialize::InputArchive&)> load;
  };
  /// The extra states of the fit being run (set by the Trainer for the length of that fit).
  std::vector<ExtraState> extra_states{};
  /// The hyperparameters of the fit being run (the model's and the data module's hparams()), written into
  /// every checkpoint as Lightning's hyper_parameters.
  std::map<std::string, std::string> hparams{};

  /// A new fit: no resume pending (the position is the loops' to update).
  void reset();

  /// Writes the checkpoint at `path` (atomically; on global rank zero only): the weights, and unless
  /// `weights_only` the training state, after the callbacks' on_save_checkpoint (a full checkpoint only) added
  /// their entries and perhaps replaced the model entry.
  void dump(const CheckpointParts& parts, const std::filesystem::path& path, bool weights_only) const;

  /// Restores the training state from `path` before a fit starts (Lightning's ckpt_path); the callbacks'
  /// on_load_checkpoint run after the model entry was loaded, before their load_state. Throws
  /// CheckpointError for an unreadable, foreign, weights-only or mismatched file, and for any other error while
  /// reading (e.g. a checkpoint of another configuration).
  void restore(const CheckpointParts& parts, const std::filesystem::path& path, torch::Device device);

 private:
  /// A checkpoint whose weights are of another dtype than the model's (64-true resumed at 32-true or bf16):
  /// refused before anything is loaded, naming both precisions.
  static void check_precision_matches(const CheckpointReader& reader, torch::serialize::InputArchive& model_archive,
                                      const CheckpointParts& parts);

  static std::string optimizer_key(std::size_t index);

  void read(const CheckpointParts& parts, const std::filesystem::path& path, torch::Device device);
};

}  // namespace volt::detail

#if VOLT_DETAIL_HEADER_BODIES
#include <volt/trainer/connectors/impl/checkpoint_connector.ipp>
#endif
