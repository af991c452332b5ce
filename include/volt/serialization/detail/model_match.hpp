/// \file
/// volt::CheckpointError, and the comparison of a checkpoint's model entry with a module (keys, shapes,
/// dtypes) that volt's checkpoint loaders run before LibTorch's Module::load.
#pragma once

#include <volt/core/linkage.hpp>
#include <torch/torch.h>

#include <optional>
#include <set>
#include <stdexcept>
#include <string>
#include <vector>

namespace volt {

/// A checkpoint file could not be written or read, or does not fit the model. Says which file and why.
class CheckpointError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

namespace detail {

VOLT_INLINE std::string shape_text(c10::IntArrayRef sizes);

VOLT_INLINE void compare_module_keys(torch::serialize::InputArchive& archive, const torch::nn::Module& module,
                                     const std::string& prefix, std::vector<std::string>& problems);

/// The first floating parameter or buffer whose dtype in `archive` differs from `module`'s: its dotted name,
/// the checkpoint's dtype and the module's; nullopt when all agree (or a key is missing: check_model_matches
/// reports that).
struct DtypeMismatch {
  std::string name;
  c10::ScalarType stored;
  c10::ScalarType expected;
};
VOLT_INLINE std::optional<DtypeMismatch> first_dtype_mismatch(torch::serialize::InputArchive& archive,
                                                              const torch::nn::Module& module,
                                                              const std::string& prefix = "");

/// Throws CheckpointError when `model_archive` (the "model" entry of the checkpoint `shown`) does not hold
/// exactly `module`'s parameters, buffers and submodules with the same shapes; the message lists every
/// missing and extra key and every shape mismatch. LibTorch's Module::load would silently accept other shapes.
VOLT_INLINE void check_model_matches(torch::serialize::InputArchive& model_archive, const torch::nn::Module& module,
                                     const std::string& shown);

}  // namespace detail
}  // namespace volt

#if VOLT_DETAIL_HEADER_BODIES
#include <volt/serialization/detail/impl/model_match.ipp>
#endif
