/// \file
/// Definitions of the functions declared in volt/distributed/ddp_runtime.hpp: compiled in every translation unit
/// (header-only), or once with VOLT_IMPLEMENTATION (see volt/core/linkage.hpp).
#pragma once

namespace volt::detail {

VOLT_INLINE std::shared_ptr<ProcessGroup>& process_group_slot() {
  static std::shared_ptr<ProcessGroup> group;
  return group;
}

VOLT_INLINE std::chrono::milliseconds distributed_timeout() {
  if (auto seconds = env_int("VOLT_DDP_TIMEOUT_S"); seconds && *seconds > 0) return std::chrono::seconds(*seconds);
  return std::chrono::seconds(1800);
}

VOLT_INLINE std::int64_t ddp_bucket_bytes() {
  if (auto megabytes = env_int("VOLT_DDP_BUCKET_MB"); megabytes && *megabytes > 0) {
    return static_cast<std::int64_t>(*megabytes) * 1024 * 1024;
  }
  return std::int64_t{25} * 1024 * 1024;
}

VOLT_INLINE bool ddp_broadcast_buffers() {
  const auto value = env_int("VOLT_DDP_BROADCAST_BUFFERS");
  return !value || *value != 0;
}

}  // namespace volt::detail
