/// \file
/// With VOLT_SEPARATE_COMPILATION (volt/core/linkage.hpp): the Trainer's parts and the fit loop's work that
/// depend only on the strategy and the precision, compiled once in volt::compiled for volt's own policies
/// (explicit instantiations), not in every program. Nothing here without VOLT_SEPARATE_COMPILATION.
#pragma once

#include <volt/core/linkage.hpp>
#include <volt/precision.hpp>
#include <volt/strategies.hpp>
#include <volt/trainer/loops/fit_loop.hpp>
#include <volt/trainer/parts.hpp>

#include <torch/torch.h>

#include <filesystem>

namespace volt::detail {

#if defined(VOLT_DETAIL_INSTANTIATE)
#define VOLT_DETAIL_TRAINER_PARTS(S, P)                                                                       \
  VOLT_DETAIL_INSTANTIATE struct TrainerParts<S, P>;                                                          \
  VOLT_DETAIL_INSTANTIATE bool FitLoop::done<TrainerParts<S, P>>(TrainerParts<S, P>&);                        \
  VOLT_DETAIL_INSTANTIATE void FitLoop::end_interrupted<TrainerParts<S, P>>(TrainerParts<S, P>&,              \
                                                                            torch::nn::Module&);              \
  VOLT_DETAIL_INSTANTIATE void FitLoop::write_checkpoint<TrainerParts<S, P>>(                                 \
      TrainerParts<S, P>&, torch::nn::Module&, const std::filesystem::path&, bool);
#define VOLT_DETAIL_TRAINER_PARTS_FOR(S)                                                                      \
  VOLT_DETAIL_TRAINER_PARTS(S, FP32) VOLT_DETAIL_TRAINER_PARTS(S, FP64) VOLT_DETAIL_TRAINER_PARTS(S, FP16True) \
  VOLT_DETAIL_TRAINER_PARTS(S, BF16True) VOLT_DETAIL_TRAINER_PARTS(S, FP16Autocast)                           \
  VOLT_DETAIL_TRAINER_PARTS(S, BF16Autocast)
VOLT_DETAIL_TRAINER_PARTS_FOR(SingleDevice)
VOLT_DETAIL_TRAINER_PARTS_FOR(DDP)
#undef VOLT_DETAIL_TRAINER_PARTS_FOR
#undef VOLT_DETAIL_TRAINER_PARTS
#endif

}  // namespace volt::detail
