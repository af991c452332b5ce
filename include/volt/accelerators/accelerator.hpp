/// \file
/// What every accelerator policy (volt::CPU, volt::CUDA, volt::MPS) provides, and the vocabulary shared by
/// the accelerators and the code that selects them.
///
/// An accelerator policy is a stateless type with static members, Lightning's Accelerator interface:
///
/// ```
///   static constexpr std::string_view name;                 // "cpu", "cuda", "mps"
///   static constexpr AcceleratorKind kind;
///   static bool is_available();
///   static int  auto_device_count();
///   static std::optional<std::vector<int>> parse_devices(const DeviceSpec&);   // nullopt: "no devices"
///   static std::vector<torch::Device> get_parallel_devices(const std::vector<int>& ids);
///   static void setup_device(torch::Device);                // MisconfigurationError for a wrong device
///   static std::map<std::string, double> get_device_stats(torch::Device);
///   static void teardown();
/// ```
#pragma once

#include <volt/core/linkage.hpp>
#include <volt/accelerators/device_spec.hpp>
#include <volt/core/errors.hpp>

#include <torch/torch.h>

#include <concepts>
#include <map>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

namespace volt {

/// The concrete accelerators volt runs on.
enum class AcceleratorKind { cpu, cuda, mps };

/// "cpu", "cuda", "mps": Lightning's accelerator names.
constexpr std::string_view to_string(AcceleratorKind kind) {
  switch (kind) {
    case AcceleratorKind::cuda: return "cuda";
    case AcceleratorKind::mps: return "mps";
    case AcceleratorKind::cpu: break;
  }
  return "cpu";
}

/// Which Lightning front end's rules apply: the Trainer raises MisconfigurationError where Fabric raises
/// std::invalid_argument (ValueError) or std::runtime_error (RuntimeError), with texts that name
/// `Trainer` or `Fabric` (spec 1.6, 3.3).
enum class Frontend { trainer, fabric };

/// A concrete accelerator policy (CPU, CUDA, MPS or a user's own) with Lightning's static interface.
template <class A>
concept AcceleratorPolicy = requires(const DeviceSpec& spec, const std::vector<int>& ids, torch::Device device) {
  { A::name } -> std::convertible_to<std::string_view>;
  { A::kind } -> std::convertible_to<AcceleratorKind>;
  { A::is_available() } -> std::same_as<bool>;
  { A::auto_device_count() } -> std::same_as<int>;
  { A::parse_devices(spec) } -> std::same_as<std::optional<std::vector<int>>>;
  { A::get_parallel_devices(ids) } -> std::same_as<std::vector<torch::Device>>;
  A::setup_device(device);
  { A::get_device_stats(device) } -> std::same_as<std::map<std::string, double>>;
};

/// An accelerator choice made at run time (volt::Auto, volt::GPU): `resolve(Frontend)` picks a kind.
template <class A>
concept AcceleratorSelector = requires(Frontend frontend) {
  { A::name } -> std::convertible_to<std::string_view>;
  { A::resolve(frontend) } -> std::same_as<AcceleratorKind>;
};

/// What a Trainer or Fabric accepts as its Accelerator parameter: a policy or a run-time selector.
template <class A>
concept AcceleratorChoice = AcceleratorPolicy<A> || AcceleratorSelector<A>;

namespace detail {

/// Lightning's setup_device check: PL raises MisconfigurationException, Fabric ValueError. `label` is
/// the name in the message ("CPU", "MPS"; PL's CUDA says "GPU" and omits the final period).
VOLT_INLINE void check_device_type(torch::Device device, c10::DeviceType expected, std::string_view label,
                                   bool final_period, Frontend frontend);

}  // namespace detail
}  // namespace volt

#if VOLT_DETAIL_HEADER_BODIES
#include <volt/accelerators/impl/accelerator.ipp>
#endif
