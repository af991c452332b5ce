/// \file
/// Definitions of the functions declared in volt/accelerators/fallback.hpp: compiled in every translation unit
/// (header-only), or once with VOLT_IMPLEMENTATION (see volt/core/linkage.hpp).
#pragma once

namespace volt {

VOLT_INLINE bool is_not_implemented_error(const std::exception& error) {
  if (dynamic_cast<const c10::NotImplementedError*>(&error) != nullptr) return true;
  const auto* torch_error = dynamic_cast<const c10::Error*>(&error);
  const std::string_view message = torch_error != nullptr ? std::string_view(torch_error->msg()) : error.what();
  if (message.find("not currently implemented for the MPS device") != std::string_view::npos) return true;
  const auto could_not_run = message.find("Could not run '");
  return could_not_run != std::string_view::npos &&
         message.find("with arguments from the '", could_not_run) != std::string_view::npos &&
         message.find("' backend", could_not_run) != std::string_view::npos;
}
}  // namespace volt

namespace volt::detail {

VOLT_INLINE void note_device(std::optional<torch::Device>& found, const torch::Tensor& tensor) {
  if (!found && tensor.defined()) found = tensor.device();
}

}  // namespace volt::detail
