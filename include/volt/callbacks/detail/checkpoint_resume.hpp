/// \file
/// What volt::ModelCheckpoint needs when a fit resumes from a checkpoint: the bookkeeping read from it (kept
/// until the folder is known), whether the folder changed (Lightning's rule), and the files an interrupted
/// attempt of the same run wrote after that checkpoint.
#pragma once

#include <volt/core/linkage.hpp>
#include <volt/core/log.hpp>

#include <torch/torch.h>

#include <cstdint>
#include <filesystem>
#include <cmath>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <system_error>

namespace volt::detail {

/// ModelCheckpoint's bookkeeping as read from a checkpoint.
struct CheckpointCallbackState {
  std::filesystem::path best_model_path{};
  std::filesystem::path last_model_path{};
  std::optional<double> best_model_score{};
  std::map<std::filesystem::path, double> best_k_models{};
  std::int64_t last_global_step_saved = -1;
  /// The folder the checkpoint's callback saved to (empty: an older checkpoint that did not record it).
  std::filesystem::path dirpath{};
  /// When the checkpoint's state was taken (file clock ticks; nullopt: not recorded).
  std::optional<std::int64_t> saved_at{};
};

/// Reads what ModelCheckpoint::save_state wrote. Throws what LibTorch's archive throws when a key is missing.
VOLT_INLINE CheckpointCallbackState read_checkpoint_callback_state(torch::serialize::InputArchive& archive);

/// The current time in std::filesystem's file clock ticks (what last_write_time compares with).
VOLT_INLINE std::int64_t file_clock_now();

/// Whether two checkpoint folders are the same (compared as absolute, normalized paths, as Lightning compares
/// its realpath'ed dirpath).
VOLT_INLINE bool same_checkpoint_folder(const std::filesystem::path& a, const std::filesystem::path& b);

/// Lightning's warning when the checkpoint folder changed between the run saved and the run resuming.
VOLT_INLINE std::string dirpath_changed_warning(const std::filesystem::path& from, const std::filesystem::path& to);

/// The `.ckpt` files in `folder` that `state` does not track and that were written after its checkpoint was
/// taken: files of an interrupted attempt of the same run (killed between writing a checkpoint and writing
/// the one resumed from). The resumed run rewrites them under the same names instead of adding `-vN`
/// copies; files that existed before the run started are older and not listed.
VOLT_INLINE std::set<std::filesystem::path> files_written_after(const std::filesystem::path& folder,
                                                                const CheckpointCallbackState& state);

}  // namespace volt::detail

#if VOLT_DETAIL_HEADER_BODIES
#include <volt/callbacks/detail/impl/checkpoint_resume.ipp>
#endif
