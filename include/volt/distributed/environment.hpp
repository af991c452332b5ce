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

#include <volt/core/linkage.hpp>
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

VOLT_INLINE std::optional<std::string> env(const char* name);

/// Reads an integer environment variable; throws MisconfigurationError naming the variable when it is not one.
VOLT_INLINE std::optional<int> env_int(const char* name);

VOLT_INLINE int require_env_int(const char* name, std::string_view launcher);

/// The first host of a SLURM node list: "node[1-3,5],other" -> "node1", "a,b" -> "a".
VOLT_INLINE std::string slurm_root_node(std::string_view nodes);

/// A TCP port that was free a moment ago on 127.0.0.1 (the kernel's choice), as Lightning's find_free_network_port.
VOLT_INLINE int find_free_port();

}  // namespace detail

/// Reads the environment of this process for a run of `num_nodes` nodes with `devices_per_node` processes each
/// (Lightning's cluster-environment detection and checks). Throws std::invalid_argument with Lightning's message
/// when torchrun's WORLD_SIZE disagrees with devices * num_nodes, or SLURM's tasks per node with `devices`, and
/// MisconfigurationError when a variable a launcher requires is missing or not an integer. Logs Lightning's
/// warnings for a missing MASTER_ADDR / MASTER_PORT under torchrun. Does not change the environment.
VOLT_INLINE ClusterEnvironment detect_cluster_environment(int devices_per_node, int num_nodes);

}  // namespace volt

#if VOLT_DETAIL_HEADER_BODIES
#include <volt/distributed/impl/environment.ipp>
#endif
