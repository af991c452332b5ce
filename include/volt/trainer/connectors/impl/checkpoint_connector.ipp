/// \file
/// Definitions of the functions declared in volt/trainer/connectors/checkpoint_connector.hpp: compiled in every translation unit
/// (header-only), or once with VOLT_IMPLEMENTATION (see volt/core/linkage.hpp).
#pragma once

namespace volt::detail {

VOLT_INLINE torch::Tensor cpu_rng_state() {
  auto generator = at::detail::getDefaultCPUGenerator();
  std::lock_guard<std::mutex> lock(generator.mutex());
  return generator.get_state();
}

VOLT_INLINE void set_cpu_rng_state(const torch::Tensor& state) {
  auto generator = at::detail::getDefaultCPUGenerator();
  std::lock_guard<std::mutex> lock(generator.mutex());
  generator.set_state(state);
}

VOLT_INLINE void CheckpointConnector::reset() {
  resume = {};
  total_batches = 0;
  restored_metrics.clear();
}

VOLT_INLINE void CheckpointConnector::dump(const CheckpointParts& parts, const std::filesystem::path& path,
                                           bool weights_only) const {
  if (!parts.state.is_global_zero) return;
  torch::serialize::OutputArchive archive;
  archive.write("volt/format", c10::IValue(std::int64_t{1}));
  archive.write("volt/weights_only", c10::IValue(weights_only));
  archive.write("volt/precision", c10::IValue(std::string(parts.precision_name)));
  // The callbacks see a full checkpoint before its model entry is written (Lightning calls their
  // on_save_checkpoint after the state_dict is taken; a weights-only checkpoint is not offered to them).
  CheckpointSave checkpoint(parts.module, archive, parts.contiguous_weights);
  if (!weights_only) {
    for (const auto& [callback, key] : parts.callbacks.state_keys()) callback->on_save_checkpoint(checkpoint);
  }
  if (auto* replaced = checkpoint.replaced_model_entry()) {
    archive.write("model", *replaced);
  } else {
    torch::serialize::OutputArchive model_archive;
    checkpoint.write_module_weights(model_archive);
    archive.write("model", model_archive);
  }
  if (!hparams.empty()) {
    torch::serialize::OutputArchive hparams_archive;
    for (const auto& [name, value] : hparams) hparams_archive.write(name, c10::IValue(value));
    archive.write("hparams", hparams_archive);
  }
  if (!weights_only) {
    archive.write("loop/epoch", c10::IValue(resume_point.epoch));
    archive.write("loop/global_step", c10::IValue(parts.state.global_step));
    archive.write("loop/batches_done", c10::IValue(resume_point.batches_done));
    archive.write("loop/at_epoch_end", c10::IValue(resume_point.at_epoch_end));
    archive.write("loop/batch_end_pending", c10::IValue(static_cast<std::int64_t>(resume_point.pending)));
    archive.write("loop/total_batches", c10::IValue(total_batches));
    archive.write("loop/batches_stepped", c10::IValue(parts.optimization.batches_stepped));
    // The first optimizer under "optimizer" (as checkpoints of one optimizer always had it), the others
    // under "optimizers/<index>".
    const auto optimizers = parts.optimization.optimizers();
    archive.write("optimizers/count", c10::IValue(static_cast<std::int64_t>(optimizers.size())));
    for (std::size_t i = 0; i < optimizers.size(); ++i) {
      torch::serialize::OutputArchive optimizer_archive;
      optimizers[i]->save(optimizer_archive);
      archive.write(optimizer_key(i), optimizer_archive);
      // LibTorch's Optimizer::save keeps the per-parameter state, not the groups' options: the learning rates
      // are written beside it (Lightning's optimizer state_dict holds them in param_groups).
      std::vector<double> learning_rates;
      for (const auto& group : optimizers[i]->param_groups()) learning_rates.push_back(group.options().get_lr());
      archive.write(optimizer_key(i) + "/lrs", c10::IValue(c10::List<double>(learning_rates)));
    }
    std::vector<std::int64_t> scheduler_steps;
    for (const auto& slot : parts.optimization.schedulers()) scheduler_steps.push_back(slot.steps);
    archive.write("schedulers/steps", c10::IValue(c10::List<std::int64_t>(scheduler_steps)));
    // Schedulers whose state is more than a step count (ReduceLROnPlateau) save it.
    for (std::size_t i = 0; i < parts.optimization.schedulers().size(); ++i) {
      if (const auto* stateful = parts.optimization.schedulers()[i].stateful) {
        torch::serialize::OutputArchive scheduler_archive;
        stateful->save(scheduler_archive);
        archive.write("schedulers/" + std::to_string(i), scheduler_archive);
      }
    }
    if (parts.optimization.schedulers_replaced()) archive.write("schedulers/replaced", c10::IValue(true));
    torch::serialize::OutputArchive precision_archive;
    parts.save_precision(precision_archive);
    archive.write("precision", precision_archive);
    for (const auto& [callback, key] : parts.callbacks.state_keys()) {
      torch::serialize::OutputArchive callback_archive;
      callback->save_state(callback_archive);
      archive.write(key, callback_archive);
    }
    for (const auto& extra : extra_states) {
      torch::serialize::OutputArchive extra_archive;
      extra.save(extra_archive);
      archive.write(extra.key, extra_archive);
    }
    std::vector<std::string> metric_names;
    std::vector<double> metric_values;
    if (parts.state.metrics_ != nullptr) {
      for (const auto& [name, value] : parts.state.callback_metrics()) {
        metric_names.push_back(name);
        metric_values.push_back(value);
      }
    }
    archive.write("metrics/names", c10::IValue(c10::List<std::string>(metric_names)));
    archive.write("metrics/values", c10::IValue(c10::List<double>(metric_values)));
    archive.write("rng/cpu", cpu_rng_state(), /*is_buffer=*/true);
    archive.write("rng/cpu_epoch_start", epoch_start_rng.defined() ? epoch_start_rng : cpu_rng_state(),
                  /*is_buffer=*/true);
  }
  save_archive_atomically(archive, path);
}

VOLT_INLINE void CheckpointConnector::restore(const CheckpointParts& parts, const std::filesystem::path& path,
                                              torch::Device device) {
  try {
    read(parts, path, device);
  } catch (const CheckpointError&) {
    throw;
  } catch (const std::exception& error) {
    throw CheckpointError("volt: cannot resume from " + path.string() +
                          " (corrupted, or written by another configuration): " + error.what());
  }
}

VOLT_INLINE void CheckpointConnector::check_precision_matches(const CheckpointReader& reader,
                                                              torch::serialize::InputArchive& model_archive,
                                                              const CheckpointParts& parts) {
  const auto mismatch = first_dtype_mismatch(model_archive, parts.module);
  if (!mismatch) return;
  c10::IValue written;
  const std::string written_at = reader.archive().try_read("volt/precision", written) && written.isString()
                                     ? "precision '" + written.toStringRef() + "'"
                                     : std::string("an unrecorded precision");
  throw CheckpointError("volt: cannot resume from " + reader.shown() + " at precision '" +
                        std::string(parts.precision_name) + "': it was written at " + written_at + " ('" +
                        mismatch->name + "' is " + c10::toString(mismatch->stored) + " there, " +
                        c10::toString(mismatch->expected) + " here); resume at the precision it was written "
                        "with");
}

VOLT_INLINE std::string CheckpointConnector::optimizer_key(std::size_t index) {
  return index == 0 ? std::string("optimizer") : "optimizers/" + std::to_string(index);
}

VOLT_INLINE void CheckpointConnector::read(const CheckpointParts& parts, const std::filesystem::path& path,
                                           torch::Device device) {
  torch::serialize::InputArchive archive;
  load_archive(archive, path, device);
  const CheckpointReader reader(archive, path.string());
  if (!reader.contains("volt/format")) {
    throw CheckpointError("volt: " + path.string() + " is not a volt checkpoint (no volt/format entry)");
  }
  torch::serialize::InputArchive model_archive;
  if (!reader.try_read_archive("model", model_archive)) {
    throw CheckpointError("volt: " + path.string() + " is not a volt checkpoint or is corrupted: it has no model");
  }
  check_precision_matches(reader, model_archive, parts);
  check_model_matches(model_archive, parts.module, path.string());
  try {
    parts.module.load(model_archive);
  } catch (const std::exception& error) {
    throw CheckpointError("volt: the model in " + path.string() + " does not match the model being fitted: " +
                          error.what());
  }
  if (reader.read_bool("volt/weights_only")) {
    throw CheckpointError("volt: " + path.string() +
                          " holds weights only (save_weights_only); it cannot resume training. Load it with "
                          "volt::load_checkpoint_weights instead.");
  }
  const std::int64_t epoch = reader.read_int("loop/epoch");
  parts.state.global_step = reader.read_int("loop/global_step");
  const std::int64_t batches_done = reader.read_int("loop/batches_done");
  const bool at_epoch_end = reader.read_bool("loop/at_epoch_end");
  // Both absent in checkpoints of earlier releases, which resumed at the next batch and counted the batches from
  // the resume on.
  const std::int64_t pending_code =
      reader.contains("loop/batch_end_pending") ? reader.read_int("loop/batch_end_pending") : 2;
  if (pending_code < 0 || pending_code > 2) {
    throw CheckpointError("volt: " + path.string() + " is corrupted: loop/batch_end_pending is " +
                          std::to_string(pending_code) + " (allowed: 0, 1, 2)");
  }
  const auto pending = static_cast<BatchEndPending>(pending_code);
  total_batches = reader.contains("loop/total_batches") ? reader.read_int("loop/total_batches") : 0;
  // Schedulers: replay their steps (or load their state); the learning rates saved with each optimizer follow.
  const auto steps = reader.read_int_list("schedulers/steps");
  auto& schedulers = parts.optimization.schedulers();
  const auto optimizers = parts.optimization.optimizers();
  const std::int64_t saved_optimizers = reader.contains("optimizers/count") ? reader.read_int("optimizers/count") : 1;
  if (saved_optimizers != static_cast<std::int64_t>(optimizers.size())) {
    throw CheckpointError("volt: " + path.string() + " holds the state of " + std::to_string(saved_optimizers) +
                          " optimizer(s), but configure_optimizers() returned " +
                          std::to_string(optimizers.size()) + "; resume with the configuration that wrote it");
  }
  // A callback (StochasticWeightAveraging) had replaced the schedulers: it installs its own again.
  const bool replaced = reader.contains("schedulers/replaced") && reader.read_bool("schedulers/replaced");
  if (replaced) parts.optimization.clear_replaced_schedulers();
  if (!replaced && steps.size() != schedulers.size()) {
    throw CheckpointError("volt: " + path.string() + " holds the state of " + std::to_string(steps.size()) +
                          " LR scheduler(s), but configure_optimizers() returned " +
                          std::to_string(schedulers.size()) + "; resume with the configuration that wrote it");
  }
  for (std::size_t i = 0; i < schedulers.size() && i < steps.size(); ++i) {
    if (auto* stateful = schedulers[i].stateful) {
      torch::serialize::InputArchive scheduler_archive;
      reader.read_archive("schedulers/" + std::to_string(i), scheduler_archive);
      stateful->load(scheduler_archive);
    } else {
      for (std::int64_t n = 0; n < steps[i]; ++n) schedulers[i].scheduler->step();
    }
    schedulers[i].steps = steps[i];
  }
  for (std::size_t i = 0; i < optimizers.size(); ++i) {
    torch::serialize::InputArchive optimizer_archive;
    reader.read_archive(optimizer_key(i), optimizer_archive);
    optimizers[i]->load(optimizer_archive);
    // The learning rates at the save (absent in older checkpoints, where the scheduler replay above set them).
    if (c10::IValue saved; reader.archive().try_read(optimizer_key(i) + "/lrs", saved) && saved.isDoubleList()) {
      const auto learning_rates = saved.toDoubleList();
      auto& groups = optimizers[i]->param_groups();
      if (learning_rates.size() != groups.size()) {
        throw CheckpointError("volt: " + path.string() + " holds the learning rates of " +
                              std::to_string(learning_rates.size()) + " parameter group(s) of optimizer " +
                              std::to_string(i) + ", but it has " + std::to_string(groups.size()) +
                              "; resume with the configuration that wrote it");
      }
      for (std::size_t g = 0; g < groups.size(); ++g) groups[g].options().set_lr(learning_rates.get(g));
    }
  }
  parts.optimization.batches_stepped =
      reader.contains("loop/batches_stepped") ? reader.read_int("loop/batches_stepped") : parts.state.global_step;
  torch::serialize::InputArchive precision_archive;
  reader.read_archive("precision", precision_archive);
  parts.load_precision(precision_archive);
  // The module holds the model entry; a callback may load other weights into it (Lightning's order: the
  // state_dict, then every callback's on_load_checkpoint, then their load_state_dict).
  CheckpointLoad checkpoint(parts.module, reader);
  for (const auto& [callback, key] : parts.callbacks.state_keys()) callback->on_load_checkpoint(checkpoint);
  const auto keys = parts.callbacks.state_keys();
  const auto earlier_keys = parts.callbacks.state_keys(/*mangled=*/true);  // checkpoints of the earlier format
  for (std::size_t i = 0; i < keys.size(); ++i) {
    torch::serialize::InputArchive callback_archive;
    if (reader.try_read_archive(keys[i].second, callback_archive) ||
        reader.try_read_archive(earlier_keys[i].second, callback_archive)) {
      keys[i].first->load_state(callback_archive);
    }
  }
  for (const auto& extra : extra_states) {
    torch::serialize::InputArchive extra_archive;
    if (reader.try_read_archive(extra.key, extra_archive)) extra.load(extra_archive);
  }
  restored_metrics.clear();
  if (c10::IValue names, values; reader.archive().try_read("metrics/names", names) &&
                                 reader.archive().try_read("metrics/values", values)) {  // absent in older checkpoints
    if (!names.isList() || !values.isDoubleList() || names.toList().size() != values.toDoubleList().size()) {
      throw CheckpointError("volt: " + path.string() + " is corrupted: its metrics/names and metrics/values differ");
    }
    const auto name_list = names.toList();
    const auto value_list = values.toDoubleList();
    for (std::size_t i = 0; i < name_list.size(); ++i) {
      restored_metrics[name_list.get(i).toStringRef()] = value_list.get(i);
    }
  }
  const torch::Tensor rng = reader.read_tensor("rng/cpu").to(torch::kCPU);
  const torch::Tensor start_rng = reader.read_tensor("rng/cpu_epoch_start").to(torch::kCPU);
  parts.state.current_epoch = epoch;
  if (at_epoch_end) {
    // Saved by an epoch-end hook: the rest of that epoch's end is the epoch-interval scheduler step.
    parts.optimization.step_schedulers(SchedulerInterval::epoch, epoch + 1, SchedulerKinds::all,
                                       /*with_metrics=*/false);
    parts.state.current_epoch = epoch + 1;
    set_cpu_rng_state(rng);
  } else if (batches_done > 0) {
    resume = {batches_done, start_rng, rng, pending};
  } else {
    set_cpu_rng_state(rng);
  }
  resume_point = {parts.state.current_epoch, batches_done, false, pending};
}

}  // namespace volt::detail
