/// \file
/// Cluster environments: who started this process and where its peers are (Lightning's ClusterEnvironment).
///
/// Lightning's ClusterEnvironment plugins, spec section 6.4. Three are detected, in Lightning's priority order:
///
/// ```
/// torchrun  (TORCHELASTIC_RUN_ID set): RANK, WORLD_SIZE, LOCAL_RANK required; GROUP_RANK is the node rank;
///           MASTER_ADDR / MASTER_PORT default to 127.0.0.1 / 12910 with Lightning's warnings.
/// SLURM     (SLURM_NTASKS set and SLURM_JOB_NAME not "bash"/"interactive"): SLURM_PROCID, SLURM_NTASKS,
///           SLURM_LOCALID, SLURM_NODEID; the main address is the first host of SLURM_NODELIST; the port is
///           MASTER_PORT or 15000 + the last four digits of SLURM_JOB_ID.
/// volt      (otherwise, Lightning's LightningEnvironment): LOCAL_RANK, NODE_RANK (or GROUP_RANK), MASTER_ADDR,
///           MASTER_PORT; when LOCAL_RANK is unset this process is local rank 0 and starts the others itself
///           (volt::detail::SubprocessLauncher).
/// ```
#pragma once

#include <volt/core/errors.hpp>
#include <volt/core/log.hpp>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cctype>
#include <cstdint>
#include <cstdlib>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>

namespace volt {

/// Which launcher started the processes of a distributed run.
enum class ClusterKind {
  volt,      ///< No external launcher: the user started local rank 0 and volt's launcher the others (or the
             ///< user started every process with LOCAL_RANK, MASTER_ADDR and MASTER_PORT set).
  torchrun,  ///< Started by torchrun / TorchElastic (TORCHELASTIC_RUN_ID is set).
  slurm,     ///< Started by SLURM (SLURM_NTASKS is set and SLURM_JOB_NAME is neither "bash" nor "interactive").
};

/// The name used in messages, with Lightning's class name: e.g. "torchrun (TorchElasticEnvironment)".
inline constexpr std::string_view to_string(ClusterKind kind) {
  switch (kind) {
    case ClusterKind::torchrun: return "torchrun (TorchElasticEnvironment)";
    case ClusterKind::slurm: return "SLURM (SLURMEnvironment)";
    case ClusterKind::volt: break;
  }
  return "volt (LightningEnvironment)";
}

/// Where this process sits in a distributed run. Built by detect_cluster_environment().
struct ClusterEnvironment {
  /// The launcher detected.
  ClusterKind kind = ClusterKind::volt;
  /// This process's rank among all processes (RANK, SLURM_PROCID, or node_rank x devices + local_rank).
  int global_rank = 0;
  /// This process's rank on its node, its index into the node's devices.
  int local_rank = 0;
  /// The index of this process's node.
  int node_rank = 0;
  /// The number of processes of the run.
  int world_size = 1;
  /// The host of global rank 0, where the rendezvous store listens (MASTER_ADDR).
  std::string main_address = "127.0.0.1";
  /// The rendezvous port (MASTER_PORT); 0: not given, volt's launcher picks a free one.
  int main_port = 0;
  /// True when something else (torchrun, srun, or volt's launcher in the parent) started the processes.
  bool creates_processes_externally = false;
};

namespace detail {

inline std::optional<std::string> env(const char* name) {
  const char* value = std::getenv(name);
  if (value == nullptr || *value == '\0') return std::nullopt;
  return std::string(value);
}

/// Reads an integer environment variable; throws MisconfigurationError naming the variable when it is not one.
inline std::optional<int> env_int(const char* name) {
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

inline int require_env_int(const char* name, std::string_view launcher) {
  auto value = env_int(name);
  if (!value) {
    throw MisconfigurationError("volt: " + std::string(launcher) + " is detected but the environment variable " +
                                std::string(name) + " is not set");
  }
  return *value;
}

/// The first host of a SLURM node list: "node[1-3,5],other" -> "node1", "a,b" -> "a".
inline std::string slurm_root_node(std::string_view nodes) {
  std::string host;
  std::size_t i = 0;
  for (; i < nodes.size() && nodes[i] != ',' && nodes[i] != '['; ++i) host += nodes[i];
  if (i < nodes.size() && nodes[i] == '[') {
    ++i;
    while (i < nodes.size() && (std::isdigit(static_cast<unsigned char>(nodes[i])) != 0)) host += nodes[i++];
  }
  return host;
}

/// A TCP port that was free a moment ago on 127.0.0.1 (the kernel's choice), as Lightning's find_free_network_port.
inline int find_free_port() {
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

}  // namespace detail

/// Reads the environment of this process for a run of `num_nodes` nodes with `devices_per_node` processes each
/// (Lightning's cluster-environment detection and checks). Throws std::invalid_argument with Lightning's message
/// when torchrun's WORLD_SIZE disagrees with devices * num_nodes, or SLURM's tasks per node with `devices`, and
/// MisconfigurationError when a variable a launcher requires is missing or not an integer. Logs Lightning's
/// warnings for a missing MASTER_ADDR / MASTER_PORT under torchrun. Does not change the environment.
inline ClusterEnvironment detect_cluster_environment(int devices_per_node, int num_nodes) {
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
