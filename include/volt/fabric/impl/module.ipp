/// \file
/// Definitions of the functions declared in volt/fabric/module.hpp: compiled in every translation unit
/// (header-only), or once with VOLT_IMPLEMENTATION (see volt/core/linkage.hpp).
#pragma once

namespace volt::detail {

VOLT_INLINE void optimizer_state_to_device(torch::optim::Optimizer& optimizer, torch::Device device) {
  if (optimizer.state().empty()) return;
  torch::serialize::OutputArchive out;
  optimizer.save(out);
  std::ostringstream bytes;
  out.save_to(bytes);
  std::istringstream in_bytes(bytes.str());
  torch::serialize::InputArchive in;
  in.load_from(in_bytes, device);
  optimizer.load(in);
}

}  // namespace volt::detail
