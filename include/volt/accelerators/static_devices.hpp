/// \file
/// volt::static_devices: a device spec checked at compile time against the accelerator it is meant for.
///
/// ```
///   volt::Trainer<volt::MPS> trainer({.devices = volt::static_devices<volt::MPS, 1>});
///   volt::Trainer<volt::CUDA> trainer({.devices = volt::static_devices<volt::CUDA, "0,2">});
///   volt::static_devices<volt::CUDA, volt::devices({1, 3})>
/// ```
///
/// A plain DeviceSpec already refuses a malformed constant string at compile time; static_devices adds the
/// rules that need the accelerator but not the machine. Which ids exist is still checked at run time.
#pragma once

#include <volt/accelerators/accelerator.hpp>
#include <volt/accelerators/device_spec.hpp>

#include <climits>

namespace volt {
namespace detail {

/// The most devices an accelerator can ever have (MPS: 1), or INT_MAX when it declares no limit.
template <class Accelerator>
consteval int static_device_limit() {
  if constexpr (requires { Accelerator::max_devices; }) {
    return Accelerator::max_devices;
  } else {
    return INT_MAX;
  }
}

template <class Accelerator>
consteval bool is_cpu_policy() {
  if constexpr (requires { Accelerator::kind; }) {
    return Accelerator::kind == AcceleratorKind::cpu;
  } else {
    return false;
  }
}

template <class Accelerator, DeviceSpec Spec>
consteval DeviceSpec checked_static_devices() {
  static_assert(!Spec.selects_none(),
                "volt: a constant device spec must select at least one device; 0, \"0\" and volt::devices({}) select "
                "none (Lightning: \"value is not a valid input\"); use a count > 0, -1 for all, or a list of ids");
  static_assert(Spec.known_device_count().value_or(1) <= static_device_limit<Accelerator>(),
                "volt: the MPS accelerator has one device; a constant device spec for volt::MPS must ask for at most "
                "one device: 1, -1, \"0,\" or volt::devices({0})");
  static_assert(!is_cpu_policy<Accelerator>() ||
                    (Spec.form() == DeviceSpecForm::integer && Spec.count() > 0) ||
                    (Spec.form() == DeviceSpecForm::string && Spec.text_is_digits() && Spec.count() > 0 &&
                     !Spec.cpu_int_rejects_text()),
                "volt: volt::CPU takes a device count > 0, as an int or a string of digits such as \"3\" (Lightning: "
                "\"`devices` selected with `CPUAccelerator` should be an int > 0.\"); lists, -1 and \"auto\" are refused");
  return Spec;
}

}  // namespace detail

/// `Spec` after the compile-time checks for `Accelerator`: it selects at least one device, its ids are
/// unique, it asks for no more devices than the accelerator can have (MPS: one), and for volt::CPU it is
/// a count > 0. Each rule is a static_assert whose message names the rule and the fix.
template <class Accelerator, DeviceSpec Spec>
inline constexpr DeviceSpec static_devices = detail::checked_static_devices<Accelerator, Spec>();

}  // namespace volt
