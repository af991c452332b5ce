/// \file
/// volt::seed_everything: Lightning's seed_everything for a C++ program — seeds LibTorch's generators (CPU and
/// every CUDA device) and the C library's rand(), and records the seed in the environment (PL_GLOBAL_SEED,
/// PL_SEED_WORKERS) so that processes started afterwards (volt's DDP launcher re-runs the program) and a
/// later call without a seed use the same one.
///
/// When to use it rather than TrainerOptions::seed: TrainerOptions::seed seeds when the Trainer is
/// constructed, so whatever was made before (the model's initial weights, a shuffled dataset) is not covered
/// by it. Call volt::seed_everything first thing in main(), before building the model and the data, for a run
/// that is the same every time; TrainerOptions::seed is enough when the model is built after the Trainer or
/// its weights are loaded from a file.
#pragma once

#include <volt/core/linkage.hpp>
#include <volt/core/log.hpp>

#include <torch/torch.h>

#include <cerrno>
#include <charconv>
#include <cstdint>
#include <cstdlib>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <system_error>

namespace volt {

/// The largest seed seed_everything accepts (Lightning's max_seed_value, 2^32 - 1: NumPy's limit).
inline constexpr std::int64_t max_seed_value = 4294967295;
/// The smallest seed seed_everything accepts (Lightning's min_seed_value).
inline constexpr std::int64_t min_seed_value = 0;

namespace detail {

/// The process's rank as Lightning's _get_rank reads it (set_global_rank, then RANK, LOCAL_RANK,
/// SLURM_PROCID, JSM_NAMESPACE_RANK), or nullopt when nothing names one.
VOLT_INLINE std::optional<int> rank_if_known();

/// Python's int(text) for the digits of an environment variable (surrounding spaces allowed).
VOLT_INLINE std::optional<std::int64_t> parse_seed_text(std::string_view text);

VOLT_INLINE void set_environment(const char* name, const std::string& value);

}  // namespace detail

/// Lightning's seed_everything(seed, workers, verbose): seeds LibTorch's CPU generator and, when CUDA is
/// available, every CUDA device's (torch::manual_seed), and std::srand; sets PL_GLOBAL_SEED to the seed and
/// PL_SEED_WORKERS to "1" or "0"; returns the seed.
///
/// Without a seed it reads PL_GLOBAL_SEED, and uses 0 with the warning "No seed found, seed set to 0" when the
/// variable is not set. Throws std::invalid_argument with Lightning's messages for a seed outside
/// [0, 4294967295] ("5000000000 is not in bounds, numpy accepts from 0 to 4294967295") and for a
/// PL_GLOBAL_SEED that is not an integer ("Invalid seed specified via PL_GLOBAL_SEED: 'abc'"). With `verbose`
/// every process logs "Seed set to <seed>" (prefixed "[rank: N] " when a launcher set the rank).
///
/// `workers`: LibTorch's data loader workers are threads of this process and draw from its generator, so
/// there is no per-worker seeding to set up; the flag is recorded in PL_SEED_WORKERS for programs and
/// processes that read it, as Lightning does.
VOLT_INLINE std::int64_t seed_everything(std::optional<std::int64_t> seed = std::nullopt, bool workers = false,
                                         bool verbose = true);

}  // namespace volt

#if VOLT_DETAIL_HEADER_BODIES
#include <volt/core/impl/seed.ipp>
#endif
