/// \file
/// With VOLT_SEPARATE_COMPILATION (volt/core/linkage.hpp): the Trainer's parts and the fit loop's work that
/// depend only on the strategy and the precision, compiled once in volt::compiled for volt's own policies
/// (explicit instantiations), not in every program. Nothing here without VOLT_SEPARATE_COMPILATION.
#pragma once

#include <volt/precision.hpp>
#include <volt/strategies.hpp>
#include <volt/trainer/loops/fit_loop.hpp>
#include <volt/trainer/parts.hpp>

#include <torch/torch.h>

#include <filesystem>

namespace volt::detail {

#if defined(VOLT_SEPARATE_COMPILATION) && defined(VOLT_IMPLEMENTATION)
template struct TrainerParts<SingleDevice, FP32>;
template bool FitLoop::done<TrainerParts<SingleDevice, FP32>>(TrainerParts<SingleDevice, FP32>&);
template void FitLoop::end_interrupted<TrainerParts<SingleDevice, FP32>>(TrainerParts<SingleDevice, FP32>&, torch::nn::Module&);
template void FitLoop::write_checkpoint<TrainerParts<SingleDevice, FP32>>(TrainerParts<SingleDevice, FP32>&, torch::nn::Module&,
                                                 const std::filesystem::path&, bool);
template struct TrainerParts<SingleDevice, FP64>;
template bool FitLoop::done<TrainerParts<SingleDevice, FP64>>(TrainerParts<SingleDevice, FP64>&);
template void FitLoop::end_interrupted<TrainerParts<SingleDevice, FP64>>(TrainerParts<SingleDevice, FP64>&, torch::nn::Module&);
template void FitLoop::write_checkpoint<TrainerParts<SingleDevice, FP64>>(TrainerParts<SingleDevice, FP64>&, torch::nn::Module&,
                                                 const std::filesystem::path&, bool);
template struct TrainerParts<SingleDevice, FP16True>;
template bool FitLoop::done<TrainerParts<SingleDevice, FP16True>>(TrainerParts<SingleDevice, FP16True>&);
template void FitLoop::end_interrupted<TrainerParts<SingleDevice, FP16True>>(TrainerParts<SingleDevice, FP16True>&, torch::nn::Module&);
template void FitLoop::write_checkpoint<TrainerParts<SingleDevice, FP16True>>(TrainerParts<SingleDevice, FP16True>&, torch::nn::Module&,
                                                 const std::filesystem::path&, bool);
template struct TrainerParts<SingleDevice, BF16True>;
template bool FitLoop::done<TrainerParts<SingleDevice, BF16True>>(TrainerParts<SingleDevice, BF16True>&);
template void FitLoop::end_interrupted<TrainerParts<SingleDevice, BF16True>>(TrainerParts<SingleDevice, BF16True>&, torch::nn::Module&);
template void FitLoop::write_checkpoint<TrainerParts<SingleDevice, BF16True>>(TrainerParts<SingleDevice, BF16True>&, torch::nn::Module&,
                                                 const std::filesystem::path&, bool);
template struct TrainerParts<SingleDevice, FP16Autocast>;
template bool FitLoop::done<TrainerParts<SingleDevice, FP16Autocast>>(TrainerParts<SingleDevice, FP16Autocast>&);
template void FitLoop::end_interrupted<TrainerParts<SingleDevice, FP16Autocast>>(TrainerParts<SingleDevice, FP16Autocast>&, torch::nn::Module&);
template void FitLoop::write_checkpoint<TrainerParts<SingleDevice, FP16Autocast>>(TrainerParts<SingleDevice, FP16Autocast>&, torch::nn::Module&,
                                                 const std::filesystem::path&, bool);
template struct TrainerParts<SingleDevice, BF16Autocast>;
template bool FitLoop::done<TrainerParts<SingleDevice, BF16Autocast>>(TrainerParts<SingleDevice, BF16Autocast>&);
template void FitLoop::end_interrupted<TrainerParts<SingleDevice, BF16Autocast>>(TrainerParts<SingleDevice, BF16Autocast>&, torch::nn::Module&);
template void FitLoop::write_checkpoint<TrainerParts<SingleDevice, BF16Autocast>>(TrainerParts<SingleDevice, BF16Autocast>&, torch::nn::Module&,
                                                 const std::filesystem::path&, bool);
template struct TrainerParts<DDP, FP32>;
template bool FitLoop::done<TrainerParts<DDP, FP32>>(TrainerParts<DDP, FP32>&);
template void FitLoop::end_interrupted<TrainerParts<DDP, FP32>>(TrainerParts<DDP, FP32>&, torch::nn::Module&);
template void FitLoop::write_checkpoint<TrainerParts<DDP, FP32>>(TrainerParts<DDP, FP32>&, torch::nn::Module&,
                                                 const std::filesystem::path&, bool);
template struct TrainerParts<DDP, FP64>;
template bool FitLoop::done<TrainerParts<DDP, FP64>>(TrainerParts<DDP, FP64>&);
template void FitLoop::end_interrupted<TrainerParts<DDP, FP64>>(TrainerParts<DDP, FP64>&, torch::nn::Module&);
template void FitLoop::write_checkpoint<TrainerParts<DDP, FP64>>(TrainerParts<DDP, FP64>&, torch::nn::Module&,
                                                 const std::filesystem::path&, bool);
template struct TrainerParts<DDP, FP16True>;
template bool FitLoop::done<TrainerParts<DDP, FP16True>>(TrainerParts<DDP, FP16True>&);
template void FitLoop::end_interrupted<TrainerParts<DDP, FP16True>>(TrainerParts<DDP, FP16True>&, torch::nn::Module&);
template void FitLoop::write_checkpoint<TrainerParts<DDP, FP16True>>(TrainerParts<DDP, FP16True>&, torch::nn::Module&,
                                                 const std::filesystem::path&, bool);
template struct TrainerParts<DDP, BF16True>;
template bool FitLoop::done<TrainerParts<DDP, BF16True>>(TrainerParts<DDP, BF16True>&);
template void FitLoop::end_interrupted<TrainerParts<DDP, BF16True>>(TrainerParts<DDP, BF16True>&, torch::nn::Module&);
template void FitLoop::write_checkpoint<TrainerParts<DDP, BF16True>>(TrainerParts<DDP, BF16True>&, torch::nn::Module&,
                                                 const std::filesystem::path&, bool);
template struct TrainerParts<DDP, FP16Autocast>;
template bool FitLoop::done<TrainerParts<DDP, FP16Autocast>>(TrainerParts<DDP, FP16Autocast>&);
template void FitLoop::end_interrupted<TrainerParts<DDP, FP16Autocast>>(TrainerParts<DDP, FP16Autocast>&, torch::nn::Module&);
template void FitLoop::write_checkpoint<TrainerParts<DDP, FP16Autocast>>(TrainerParts<DDP, FP16Autocast>&, torch::nn::Module&,
                                                 const std::filesystem::path&, bool);
template struct TrainerParts<DDP, BF16Autocast>;
template bool FitLoop::done<TrainerParts<DDP, BF16Autocast>>(TrainerParts<DDP, BF16Autocast>&);
template void FitLoop::end_interrupted<TrainerParts<DDP, BF16Autocast>>(TrainerParts<DDP, BF16Autocast>&, torch::nn::Module&);
template void FitLoop::write_checkpoint<TrainerParts<DDP, BF16Autocast>>(TrainerParts<DDP, BF16Autocast>&, torch::nn::Module&,
                                                 const std::filesystem::path&, bool);
#elif defined(VOLT_SEPARATE_COMPILATION)
extern template struct TrainerParts<SingleDevice, FP32>;
extern template bool FitLoop::done<TrainerParts<SingleDevice, FP32>>(TrainerParts<SingleDevice, FP32>&);
extern template void FitLoop::end_interrupted<TrainerParts<SingleDevice, FP32>>(TrainerParts<SingleDevice, FP32>&, torch::nn::Module&);
extern template void FitLoop::write_checkpoint<TrainerParts<SingleDevice, FP32>>(TrainerParts<SingleDevice, FP32>&, torch::nn::Module&,
                                                        const std::filesystem::path&, bool);
extern template struct TrainerParts<SingleDevice, FP64>;
extern template bool FitLoop::done<TrainerParts<SingleDevice, FP64>>(TrainerParts<SingleDevice, FP64>&);
extern template void FitLoop::end_interrupted<TrainerParts<SingleDevice, FP64>>(TrainerParts<SingleDevice, FP64>&, torch::nn::Module&);
extern template void FitLoop::write_checkpoint<TrainerParts<SingleDevice, FP64>>(TrainerParts<SingleDevice, FP64>&, torch::nn::Module&,
                                                        const std::filesystem::path&, bool);
extern template struct TrainerParts<SingleDevice, FP16True>;
extern template bool FitLoop::done<TrainerParts<SingleDevice, FP16True>>(TrainerParts<SingleDevice, FP16True>&);
extern template void FitLoop::end_interrupted<TrainerParts<SingleDevice, FP16True>>(TrainerParts<SingleDevice, FP16True>&, torch::nn::Module&);
extern template void FitLoop::write_checkpoint<TrainerParts<SingleDevice, FP16True>>(TrainerParts<SingleDevice, FP16True>&, torch::nn::Module&,
                                                        const std::filesystem::path&, bool);
extern template struct TrainerParts<SingleDevice, BF16True>;
extern template bool FitLoop::done<TrainerParts<SingleDevice, BF16True>>(TrainerParts<SingleDevice, BF16True>&);
extern template void FitLoop::end_interrupted<TrainerParts<SingleDevice, BF16True>>(TrainerParts<SingleDevice, BF16True>&, torch::nn::Module&);
extern template void FitLoop::write_checkpoint<TrainerParts<SingleDevice, BF16True>>(TrainerParts<SingleDevice, BF16True>&, torch::nn::Module&,
                                                        const std::filesystem::path&, bool);
extern template struct TrainerParts<SingleDevice, FP16Autocast>;
extern template bool FitLoop::done<TrainerParts<SingleDevice, FP16Autocast>>(TrainerParts<SingleDevice, FP16Autocast>&);
extern template void FitLoop::end_interrupted<TrainerParts<SingleDevice, FP16Autocast>>(TrainerParts<SingleDevice, FP16Autocast>&, torch::nn::Module&);
extern template void FitLoop::write_checkpoint<TrainerParts<SingleDevice, FP16Autocast>>(TrainerParts<SingleDevice, FP16Autocast>&, torch::nn::Module&,
                                                        const std::filesystem::path&, bool);
extern template struct TrainerParts<SingleDevice, BF16Autocast>;
extern template bool FitLoop::done<TrainerParts<SingleDevice, BF16Autocast>>(TrainerParts<SingleDevice, BF16Autocast>&);
extern template void FitLoop::end_interrupted<TrainerParts<SingleDevice, BF16Autocast>>(TrainerParts<SingleDevice, BF16Autocast>&, torch::nn::Module&);
extern template void FitLoop::write_checkpoint<TrainerParts<SingleDevice, BF16Autocast>>(TrainerParts<SingleDevice, BF16Autocast>&, torch::nn::Module&,
                                                        const std::filesystem::path&, bool);
extern template struct TrainerParts<DDP, FP32>;
extern template bool FitLoop::done<TrainerParts<DDP, FP32>>(TrainerParts<DDP, FP32>&);
extern template void FitLoop::end_interrupted<TrainerParts<DDP, FP32>>(TrainerParts<DDP, FP32>&, torch::nn::Module&);
extern template void FitLoop::write_checkpoint<TrainerParts<DDP, FP32>>(TrainerParts<DDP, FP32>&, torch::nn::Module&,
                                                        const std::filesystem::path&, bool);
extern template struct TrainerParts<DDP, FP64>;
extern template bool FitLoop::done<TrainerParts<DDP, FP64>>(TrainerParts<DDP, FP64>&);
extern template void FitLoop::end_interrupted<TrainerParts<DDP, FP64>>(TrainerParts<DDP, FP64>&, torch::nn::Module&);
extern template void FitLoop::write_checkpoint<TrainerParts<DDP, FP64>>(TrainerParts<DDP, FP64>&, torch::nn::Module&,
                                                        const std::filesystem::path&, bool);
extern template struct TrainerParts<DDP, FP16True>;
extern template bool FitLoop::done<TrainerParts<DDP, FP16True>>(TrainerParts<DDP, FP16True>&);
extern template void FitLoop::end_interrupted<TrainerParts<DDP, FP16True>>(TrainerParts<DDP, FP16True>&, torch::nn::Module&);
extern template void FitLoop::write_checkpoint<TrainerParts<DDP, FP16True>>(TrainerParts<DDP, FP16True>&, torch::nn::Module&,
                                                        const std::filesystem::path&, bool);
extern template struct TrainerParts<DDP, BF16True>;
extern template bool FitLoop::done<TrainerParts<DDP, BF16True>>(TrainerParts<DDP, BF16True>&);
extern template void FitLoop::end_interrupted<TrainerParts<DDP, BF16True>>(TrainerParts<DDP, BF16True>&, torch::nn::Module&);
extern template void FitLoop::write_checkpoint<TrainerParts<DDP, BF16True>>(TrainerParts<DDP, BF16True>&, torch::nn::Module&,
                                                        const std::filesystem::path&, bool);
extern template struct TrainerParts<DDP, FP16Autocast>;
extern template bool FitLoop::done<TrainerParts<DDP, FP16Autocast>>(TrainerParts<DDP, FP16Autocast>&);
extern template void FitLoop::end_interrupted<TrainerParts<DDP, FP16Autocast>>(TrainerParts<DDP, FP16Autocast>&, torch::nn::Module&);
extern template void FitLoop::write_checkpoint<TrainerParts<DDP, FP16Autocast>>(TrainerParts<DDP, FP16Autocast>&, torch::nn::Module&,
                                                        const std::filesystem::path&, bool);
extern template struct TrainerParts<DDP, BF16Autocast>;
extern template bool FitLoop::done<TrainerParts<DDP, BF16Autocast>>(TrainerParts<DDP, BF16Autocast>&);
extern template void FitLoop::end_interrupted<TrainerParts<DDP, BF16Autocast>>(TrainerParts<DDP, BF16Autocast>&, torch::nn::Module&);
extern template void FitLoop::write_checkpoint<TrainerParts<DDP, BF16Autocast>>(TrainerParts<DDP, BF16Autocast>&, torch::nn::Module&,
                                                        const std::filesystem::path&, bool);
#endif

}  // namespace volt::detail
