/// \file
/// Which strategies run on which accelerators: a specializable trait (as Kokkos does it) and the checks the
/// Trainer and Fabric instantiate.
///
/// Users extend the matrix for their own policies:
///
/// ```
///   template <> struct volt::strategy_supported<MyAccelerator, volt::DDP> : std::false_type {};
/// ```
#pragma once

#include <volt/accelerators/accelerator.hpp>
#include <volt/accelerators/mps.hpp>
#include <volt/strategies/ddp.hpp>
#include <volt/strategies/single_device.hpp>

#include <concepts>
#include <stdexcept>
#include <string>
#include <string_view>
#include <type_traits>

namespace volt {
namespace detail {

/// Whether the strategy runs several processes that synchronise (the DDP family); false when the
/// strategy does not say.
template <class Strategy>
consteval bool is_distributed_strategy() {
  if constexpr (requires { Strategy::is_distributed; }) {
    return static_cast<bool>(Strategy::is_distributed);
  } else {
    return false;
  }
}

}  // namespace detail

/// Whether `Strategy` can run on `Accelerator`. True unless specialized; false for MPS with any strategy of
/// the DDP family (Lightning: "strategies from the DDP family are not supported on the MPS accelerator").
template <class Accelerator, class Strategy>
struct strategy_supported : std::true_type {};

template <class Strategy>
struct strategy_supported<MPS, Strategy> : std::bool_constant<!detail::is_distributed_strategy<Strategy>()> {};

template <class Accelerator, class Strategy>
/// strategy_supported<Accelerator, Strategy>::value.
inline constexpr bool strategy_supported_v = strategy_supported<Accelerator, Strategy>::value;

/// Whether volt::Trainer and volt::Fabric of this version can run `Strategy` (whatever the accelerator).
/// Code that maps run-time choices onto policies (volt's CLI) instantiates only strategies for which it holds.
template <class Strategy>
inline constexpr bool strategy_implemented_v = std::is_same_v<Strategy, SingleDevice> || std::is_same_v<Strategy, DDP>;

/// Fails to compile when strategy_supported<Accelerator, Strategy> is false: the Trainer and Fabric
/// instantiate it for their policies.
template <class Accelerator, class Strategy>
constexpr void check_strategy_supported() {
  if constexpr (std::is_same_v<Accelerator, MPS> && detail::is_distributed_strategy<Strategy>()) {
    static_assert(strategy_supported_v<Accelerator, Strategy>,
                  "volt: DDP family strategies are not supported on the MPS accelerator; use volt::SingleDevice");
  } else {
    static_assert(strategy_supported_v<Accelerator, Strategy>,
                  "volt: this strategy is not supported on this accelerator (volt::strategy_supported<Accelerator, "
                  "Strategy> is false); choose another strategy or accelerator");
  }
}

/// The run-time half of Lightning's rule (spec 3.4), for accelerators chosen at run time (volt::Auto,
/// volt::GPU): when MPS is available and the strategy is not supported on MPS, throws std::invalid_argument
/// "You set `strategy=ddp` but strategies from the DDP family are not supported on the MPS accelerator. ..."
/// (ValueError in both Lightning front ends). volt::CPU and volt::CUDA pass; volt::MPS is refused at compile
/// time by check_strategy_supported.
template <class Accelerator, class Strategy>
void check_strategy_supported_on_machine() {
  if constexpr (AcceleratorSelector<Accelerator> && !strategy_supported_v<MPS, Strategy>) {
    if (!MPS::is_available()) return;
    std::string strategy_name = "ddp";
    if constexpr (requires { Strategy::name; }) strategy_name = std::string(Strategy::name);
    throw std::invalid_argument("You set `strategy=" + strategy_name +
                                "` but strategies from the DDP family are not supported on the MPS accelerator. "
                                "Either explicitly choose volt::CPU as the accelerator or change the strategy "
                                "(volt::SingleDevice) (Lightning: \"Either explicitly set `accelerator='cpu'` or "
                                "change the strategy.\")");
  }
}

/// What makes a type a strategy policy: a Lightning strategy name ("single_device", "ddp"). Whether volt can
/// run it is strategy_implemented_v, checked with its own message.
template <class S>
concept StrategyPolicy = requires {
  { S::name } -> std::convertible_to<std::string_view>;
};

}  // namespace volt
