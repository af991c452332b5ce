/// \file
/// Definitions of the functions declared in volt/distributed/environment.hpp: compiled in every translation unit
/// (header-only), or once with VOLT_IMPLEMENTATION (see volt/core/linkage.hpp).
#pragma once

namespace volt::detail {

VOLT_INLINE std::optional<std::string> env(const char* name) {
  const char* value = std::getenv(name);
  if (value == nullptr || *value == '\0') return std::nullopt;
  return std::string(value);
}

VOLT_INLINE std::optional<int> env_int(const char* name) {
  auto value = env(name);
  if (!value) return std::nullopt;
  std::size_t used = 0;
  int result = 0;
  try {
    result = std::stoi(*value, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  if (used != value->size()) {
    throw MisconfigurationError("volt: the environment variable " + std::string(name) + "='" + *value +
                                "' is not an integer");
  }
  return result;
}

VOLT_INLINE int require_env_int(const char* name, std::string_view launcher) {
  auto value = env_int(name);
  if (!value) {
    throw MisconfigurationError("volt: " + std::string(launcher) + " is detected but the environment variable " +
                                std::string(name) + " is not set");
  }
  return *value;
}

VOLT_INLINE std::string slurm_root_node(std::string_view nodes) {
  std::string host;
  std::size_t i = 0;
  for (; i < nodes.size() && nodes[i] != ',' && nodes[i] != '['; ++i) host += nodes[i];
  if (i < nodes.size() && nodes[i] == '[') {
    ++i;
    while (i < nodes.size() && (std::isdigit(static_cast<unsigned char>(nodes[i])) != 0)) host += nodes[i++];
  }
  return host;
}

VOLT_INLINE int find_free_port() {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) throw std::runtime_error("volt: cannot open a socket to find a free port");
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  address.sin_port = 0;
  socklen_t length = sizeof(address);
  int port = 0;
  if (::bind(fd, reinterpret_cast<sockaddr*>(&address), sizeof(address)) == 0 &&
      ::getsockname(fd, reinterpret_cast<sockaddr*>(&address), &length) == 0) {
    port = ntohs(address.sin_port);
  }
  ::close(fd);
  if (port == 0) throw std::runtime_error("volt: could not find a free TCP port for the distributed rendezvous");
  return port;
}
}  // namespace volt::detail

namespace volt {

VOLT_INLINE ClusterEnvironment detect_cluster_environment(int devices_per_node, int num_nodes) {
  ClusterEnvironment result;
  if (detail::env("TORCHELASTIC_RUN_ID")) {
    result.kind = ClusterKind::torchrun;
    result.creates_processes_externally = true;
    result.global_rank = detail::require_env_int("RANK", "torchrun");
    result.world_size = detail::require_env_int("WORLD_SIZE", "torchrun");
    result.local_rank = detail::require_env_int("LOCAL_RANK", "torchrun");
    result.node_rank = detail::env_int("GROUP_RANK").value_or(0);
    if (auto address = detail::env("MASTER_ADDR")) {
      result.main_address = *address;
    } else {
      log::warn_rank_zero("MASTER_ADDR environment variable is not defined. Set as localhost");
      result.main_address = "127.0.0.1";
    }
    if (auto port = detail::env_int("MASTER_PORT")) {
      result.main_port = *port;
    } else {
      log::warn_rank_zero("MASTER_PORT environment variable is not defined. Set as 12910");
      result.main_port = 12910;
    }
    if (devices_per_node * num_nodes != result.world_size) {
      throw std::invalid_argument("You set `devices=" + std::to_string(devices_per_node) + "` and `num_nodes=" +
                                  std::to_string(num_nodes) + "` in Lightning, but the product (" +
                                  std::to_string(devices_per_node) + " * " + std::to_string(num_nodes) +
                                  ") does not match the world size (" + std::to_string(result.world_size) + ").");
    }
    return result;
  }
  const auto job_name = detail::env("SLURM_JOB_NAME");
  if (detail::env("SLURM_NTASKS") && !(job_name && (*job_name == "bash" || *job_name == "interactive"))) {
    result.kind = ClusterKind::slurm;
    result.creates_processes_externally = true;
    result.global_rank = detail::require_env_int("SLURM_PROCID", "SLURM");
    result.world_size = detail::require_env_int("SLURM_NTASKS", "SLURM");
    result.local_rank = detail::require_env_int("SLURM_LOCALID", "SLURM");
    result.node_rank = detail::require_env_int("SLURM_NODEID", "SLURM");
    if (auto address = detail::env("MASTER_ADDR")) {
      result.main_address = *address;
    } else if (auto nodes = detail::env("SLURM_NODELIST")) {
      result.main_address = detail::slurm_root_node(*nodes);
    } else {
      result.main_address = "127.0.0.1";
    }
    if (auto port = detail::env_int("MASTER_PORT")) {
      result.main_port = *port;
    } else {
      const std::string job = detail::env("SLURM_JOB_ID").value_or("12910");
      const std::string tail = job.size() > 4 ? job.substr(job.size() - 4) : job;
      result.main_port = 15000 + std::atoi(tail.c_str());
    }
    if (auto per_node = detail::env_int("SLURM_NTASKS_PER_NODE"); per_node && *per_node != devices_per_node) {
      throw std::invalid_argument("You set `devices=" + std::to_string(devices_per_node) +
                                  "` in Lightning, but the number of tasks per node configured in SLURM "
                                  "`--ntasks-per-node=" + std::to_string(*per_node) +
                                  "` does not match. HINT: Set `devices=" + std::to_string(*per_node) + "`.");
    }
    return result;
  }
  result.kind = ClusterKind::volt;
  result.creates_processes_externally = detail::env("LOCAL_RANK").has_value();
  result.local_rank = detail::env_int("LOCAL_RANK").value_or(0);
  result.node_rank = detail::env_int("NODE_RANK").value_or(detail::env_int("GROUP_RANK").value_or(0));
  result.world_size = devices_per_node * num_nodes;
  result.global_rank = result.node_rank * devices_per_node + result.local_rank;
  result.main_address = detail::env("MASTER_ADDR").value_or("127.0.0.1");
  if (auto port = detail::env_int("MASTER_PORT")) {
    result.main_port = *port;
  } else if (auto standalone = detail::env_int("STANDALONE_PORT")) {
    result.main_port = *standalone;
  }
  if (result.local_rank < 0 || result.local_rank >= devices_per_node) {
    throw MisconfigurationError("volt: LOCAL_RANK=" + std::to_string(result.local_rank) + " is outside the " +
                                std::to_string(devices_per_node) + " devices of this node (0.." +
                                std::to_string(devices_per_node - 1) + ")");
  }
  if (result.node_rank < 0 || result.node_rank >= num_nodes) {
    throw MisconfigurationError("volt: NODE_RANK=" + std::to_string(result.node_rank) + " is outside num_nodes=" +
                                std::to_string(num_nodes) + " (0.." + std::to_string(num_nodes - 1) + ")");
  }
  return result;
}

}  // namespace volt
