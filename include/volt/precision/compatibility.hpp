/// \file
/// Which precision policies an accelerator can run, decided at compile time.
///
/// `precision_supported<Accelerator, Precision>` is a trait users may specialize for their own policies
/// (Kokkos style); `check_precision_supported<A, P>()` turns a false answer into a compile error that names
/// the rule and the fix. The Trainer and Fabric call it once for their <Accelerator, Precision> pair.
///
/// Only the names of the policies are needed here, so this header declares them and includes no LibTorch:
/// the accelerators are defined in volt/accelerators/, the precision policies in volt/precision/policies.hpp.
#pragma once

#include <type_traits>

namespace volt {

struct CPU;
struct CUDA;
struct MPS;
struct Auto;
struct GPU;

struct FP32;
struct FP64;
struct FP16True;
struct BF16True;
struct FP16Autocast;
struct BF16Autocast;

/// Whether `Precision` can run on `Accelerator`. True unless a rule below says otherwise; specialize it
/// to forbid (or re-allow) a combination involving your own types. Accelerators resolved at run time
/// (Auto, GPU) are allowed here and checked when the policy's setup() sees the real device.
template <class Accelerator, class Precision>
struct precision_supported : std::true_type {};

/// Lightning turns "16-mixed" on CPU into "bf16-mixed"; when the CPU is known at compile time volt asks
/// for BF16Autocast instead of silently running something other than what was spelled.
template <>
struct precision_supported<CPU, FP16Autocast> : std::false_type {};

/// Metal has no float64 tensors.
template <>
struct precision_supported<MPS, FP64> : std::false_type {};

namespace detail {
template <class Accelerator, class Precision>
inline constexpr bool is_cpu_fp16_autocast =
    std::is_same_v<Accelerator, CPU> && std::is_same_v<Precision, FP16Autocast>;
template <class Accelerator, class Precision>
inline constexpr bool is_mps_fp64 = std::is_same_v<Accelerator, MPS> && std::is_same_v<Precision, FP64>;
}  // namespace detail

/// Fails to compile when precision_supported<Accelerator, Precision> is false, with one message per rule.
/// Does nothing at run time.
template <class Accelerator, class Precision>
constexpr void check_precision_supported() {
  constexpr bool supported = precision_supported<Accelerator, Precision>::value;
  static_assert(supported || !detail::is_cpu_fp16_autocast<Accelerator, Precision>,
                "volt: FP16Autocast is not supported on the CPU accelerator; use volt::BF16Autocast");
  static_assert(supported || !detail::is_mps_fp64<Accelerator, Precision>,
                "volt: FP64 is not supported on the MPS accelerator (Metal has no float64); use volt::FP32");
  static_assert(supported || detail::is_cpu_fp16_autocast<Accelerator, Precision> ||
                    detail::is_mps_fp64<Accelerator, Precision>,
                "volt: this precision policy is not supported on this accelerator "
                "(volt::precision_supported<Accelerator, Precision> is false); choose another precision policy");
}

}  // namespace volt
