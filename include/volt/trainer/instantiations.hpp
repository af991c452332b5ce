/// \file
/// With VOLT_SEPARATE_COMPILATION (volt/core/linkage.hpp): the Trainer's parts and the fit loop's work that
/// depend only on the strategy and the precision, compiled once in volt::compiled for volt's own policies
/// (explicit instantiations), not in every program. Nothing here without VOLT_SEPARATE_COMPILATION.
#pragma once

#include <volt/core/linkage.hpp>
#include <volt/precision.hpp>
#include <volt/strategies.hpp>
#include <volt/trainer/loops/evaluation_loop.hpp>
#include <volt/trainer/loops/fit_loop.hpp>
#include <volt/trainer/parts.hpp>

#include <torch/torch.h>

#include <filesystem>
#include <map>
#include <memory>
#include <string>

namespace volt::detail {

#if defined(VOLT_DETAIL_INSTANTIATE)
#define VOLT_DETAIL_TRAINER_PARTS(S, P)                                                                       \
  VOLT_DETAIL_INSTANTIATE struct TrainerParts<S, P>;                                                          \
  VOLT_DETAIL_INSTANTIATE bool FitLoop::done<TrainerParts<S, P>>(TrainerParts<S, P>&);                        \
  VOLT_DETAIL_INSTANTIATE void FitLoop::end_succeeded<TrainerParts<S, P>>(TrainerParts<S, P>&);               \
  VOLT_DETAIL_INSTANTIATE void FitLoop::end_interrupted<TrainerParts<S, P>>(TrainerParts<S, P>&,              \
                                                                            torch::nn::Module&);              \
  VOLT_DETAIL_INSTANTIATE void FitLoop::write_checkpoint<TrainerParts<S, P>>(                                 \
      TrainerParts<S, P>&, torch::nn::Module&, const std::filesystem::path&, bool);                           \
  VOLT_DETAIL_INSTANTIATE void FitLoop::reset_state<TrainerParts<S, P>>(TrainerParts<S, P>&, bool);           \
  VOLT_DETAIL_INSTANTIATE void FitLoop::set_state_functions<TrainerParts<S, P>>(                              \
      TrainerParts<S, P>&, std::shared_ptr<torch::nn::Module>);                                               \
  VOLT_DETAIL_INSTANTIATE void FitLoop::restore<TrainerParts<S, P>>(TrainerParts<S, P>&, torch::nn::Module&,  \
                                                                    const std::filesystem::path&);            \
  VOLT_DETAIL_INSTANTIATE std::map<std::string, double> FitLoop::end_epoch_values<TrainerParts<S, P>>(        \
      TrainerParts<S, P>&);                                                                                   \
  VOLT_DETAIL_INSTANTIATE void FitLoop::close_epoch<TrainerParts<S, P>>(TrainerParts<S, P>&,                  \
                                                                        const std::map<std::string, double>&); \
  VOLT_DETAIL_INSTANTIATE void EvaluationLoop::end_values<TrainerParts<S, P>>(                                \
      TrainerParts<S, P>&, MetricPhase, Stage, std::map<std::string, double>);
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
