/// \file
/// volt::cli::run: from the command line's strings to the compile-time policy types, in one dispatch.
///
/// ```
/// int main(int argc, char** argv) {
///   return volt::cli::run(argc, argv, [&]<class A, class S, class P>(volt::cli::Args& args) {
///     volt::Trainer<A, S, P> trainer(args.trainer_options());
///     ...
///   });
/// }
/// ```
///
/// run() parses the flags, checks them against this machine (Lightning's order: accelerator, availability,
/// MPS with DDP, devices, strategy, precision), and calls the program once with the concrete accelerator
/// (volt::CPU, volt::CUDA or volt::MPS: "auto" and "gpu" are resolved first), strategy and precision. Only
/// valid combinations are instantiated: none that precision_supported or strategy_supported refuses, and
/// no strategy for which strategy_implemented_v is false. Every bad input ends with exit status 2 and one
/// message naming what was given and the valid choices.
#pragma once

#include <volt/core/linkage.hpp>
#include <volt/accelerators/auto.hpp>
#include <volt/accelerators/connector.hpp>
#include <volt/cli/args.hpp>
#include <volt/core/compat.hpp>
#include <volt/core/errors.hpp>
#include <volt/core/log.hpp>
#include <volt/precision/compatibility.hpp>
#include <volt/precision/policies.hpp>
#include <volt/strategies/compatibility.hpp>
#include <volt/strategies/ddp.hpp>
#include <volt/strategies/single_device.hpp>

#include <cstdlib>
#include <exception>
#include <iostream>
#include <ostream>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>

namespace volt::cli {

/// A list of policy types.
template <class... Types>
struct type_list {};

/// The accelerators a program is compiled for by default: CPU and CUDA everywhere, MPS on Apple platforms only
/// (elsewhere MPS is never available, and `--accelerator mps` stops with the reason before any Trainer would be
/// chosen, so its instantiations would be dead code). `Choices<type_list<CPU, CUDA, MPS>>` compiles MPS anyway.
#if defined(__APPLE__)
using default_accelerators = type_list<CPU, CUDA, MPS>;
#else
using default_accelerators = type_list<CPU, CUDA>;
#endif

/// Which policy types a program is compiled for. The default is every policy volt has that can run on this
/// platform; a program that only ever runs some of them lists those to compile fewer Trainers, e.g.
/// `volt::cli::run<volt::cli::Choices<volt::cli::type_list<volt::CPU, volt::CUDA>>>(argc, argv, program)`.
/// A value the program was not compiled for is refused with exit status 2.
template <class Accelerators = default_accelerators, class Strategies = type_list<SingleDevice, DDP>,
          class Precisions = type_list<FP32, FP64, FP16True, BF16True, FP16Autocast, BF16Autocast>>
struct Choices {
  using accelerators = Accelerators;  ///< The accelerator policies, a type_list.
  using strategies = Strategies;      ///< The strategy policies, a type_list.
  using precisions = Precisions;      ///< The precision policies, a type_list.
};

/// Every strategy and precision, and every accelerator of this platform (default_accelerators).
using AllChoices = Choices<>;

/// Where run() writes the help (out) and the error message (err); std::cout and std::cerr by default.
struct Streams {
  std::ostream* out = &std::cout;  ///< Receives the help text; must stay valid during run().
  std::ostream* err = &std::cerr;  ///< Receives `"<program>: error: <message>"`; must stay valid during run().
};

/// Why volt::MPS::is_available() is false here, with what to do, checking volt's rule in order: DISABLE_MPS
/// set to 1, LibTorch reporting no MPS (not macOS, or a LibTorch without MPS), a process not running
/// natively on arm64 (Rosetta). Empty when MPS is available. Reads the probes of volt/accelerators/machine.hpp.
VOLT_INLINE std::string mps_unavailable_reason();

namespace detail {

template <class T>
struct tag {
  using type = T;
};

/// Calls `f(tag<T>{})` for the first T in the list with `matches(tag<T>{})`; returns whether one did.
template <class... Types, class Match, class F>
bool find_type(type_list<Types...>, Match&& matches, F&& f) {
  bool found = false;
  ((!found && matches(tag<Types>{}) ? (found = true, f(tag<Types>{}), true) : false), ...);
  return found;
}

template <class... Types, class Name>
std::string names_of(type_list<Types...>, Name&& name) {
  std::string out;
  ((out.append(out.empty() ? "" : ", ").append(name(tag<Types>{}))), ...);
  return out;
}

VOLT_INLINE std::string_view accelerator_flag_class(AcceleratorKind kind);

VOLT_INLINE bool available(AcceleratorKind kind);

/// The accelerators available here, in Lightning's list form: "['cuda', 'cpu']".
VOLT_INLINE std::string available_accelerators();

/// Step 1-2: the accelerator the flag names, resolved and available. Throws UsageError.
VOLT_INLINE AcceleratorKind resolve_accelerator_flag(const std::string& flag);

/// Lightning's precision "16-mixed" on the CPU: warn and use "bf16-mixed" (spec 5.2).
VOLT_INLINE std::string effective_precision(const std::string& precision, AcceleratorKind kind);

VOLT_INLINE c10::DeviceType device_type_of(AcceleratorKind kind);

/// The program's status: what it returns (int), or 0 for void.
template <class A, class S, class P, class Program>
int call_program(Program& program, Args& args) {
  using Result = decltype(program.template operator()<A, S, P>(args));
  if constexpr (std::is_void_v<Result>) {
    program.template operator()<A, S, P>(args);
    return 0;
  } else {
    return static_cast<int>(program.template operator()<A, S, P>(args));
  }
}

/// Steps after the accelerator type is known: devices, strategy, precision, then the program.
template <class Accelerator, class ChoiceSet, class Program>
int dispatch_accelerator(Args& args, Program& program) {
  // Lightning's MPS + DDP check (spec 3.4) comes before the devices are parsed.
  if (Accelerator::kind == AcceleratorKind::mps && args.strategy == "ddp") {
    throw UsageError("argument --strategy ddp: You set `strategy=ddp` but strategies from the DDP family are not "
                     "supported on the MPS accelerator. Either explicitly set `--accelerator cpu` or change the "
                     "strategy (valid here: auto, single_device).");
  }
  DeviceSelection selection;
  try {
    selection = select_devices<Accelerator>(args.device_spec(), Frontend::trainer);
  } catch (const std::exception& error) {
    throw UsageError("argument --devices " + args.devices + ": " + error.what());
  }
  args.device_ids = selection.device_ids;
  const std::size_t count = selection.parallel_devices.size();
  // Lightning's rule (spec 6.1): more than one node, or more than one device, is ddp.
  args.strategy_name =
      args.strategy == "auto" ? (count > 1 || args.num_nodes > 1 ? "ddp" : "single_device") : args.strategy;
  if (args.strategy_name == "single_device" && count > 1) {
    throw UsageError("argument --strategy single_device: a single-device strategy trains on one device, but "
                     "--devices " + args.devices + " selected " + std::to_string(count) + " " +
                     std::string(Accelerator::name) + " devices. Pass --devices 1 or --strategy ddp.");
  }
  if (args.strategy_name == "single_device" && args.num_nodes > 1) {
    throw UsageError("argument --strategy single_device: a single-device strategy trains on one machine, but "
                     "--num-nodes " + std::to_string(args.num_nodes) +
                     " was given. Pass --num-nodes 1 or --strategy ddp.");
  }
  const std::string precision = effective_precision(args.precision, Accelerator::kind);
  args.precision = precision;

  int status = 0;
  const bool found_strategy = find_type(
      typename ChoiceSet::strategies{}, [&](auto s) { return decltype(s)::type::name == args.strategy_name; },
      [&](auto s) {
        using Strategy = typename decltype(s)::type;
        if constexpr (!strategy_implemented_v<Strategy>) {
          const std::string policy = std::is_same_v<Strategy, DDP> ? "volt::DDP" : std::string(Strategy::name);
          throw UsageError("argument --strategy: `strategy=" + args.strategy_name +
                           "` is not implemented in this version of volt (volt::strategy_implemented_v<" + policy +
                           "> is false). Use --strategy single_device with --devices 1.");
        } else if constexpr (!strategy_supported_v<Accelerator, Strategy>) {
          throw UsageError("argument --strategy: `strategy=" + args.strategy_name + "` is not supported on the " +
                           std::string(Accelerator::name) + " accelerator. Valid choices: auto, single_device.");
        } else {
          const bool found_precision = find_type(
              typename ChoiceSet::precisions{}, [&](auto p) { return decltype(p)::type::name == precision; },
              [&](auto p) {
                using Precision = typename decltype(p)::type;
                if constexpr (!precision_supported<Accelerator, Precision>::value) {
                  std::string valid;
                  find_type(
                      typename ChoiceSet::precisions{},
                      [&](auto q) {
                        using Q = typename decltype(q)::type;
                        if constexpr (precision_supported<Accelerator, Q>::value) {
                          valid.append(valid.empty() ? "" : ", ").append(Q::name);
                        }
                        return false;
                      },
                      [](auto) {});
                  throw UsageError("argument --precision " + precision + ": precision `" + precision +
                                   "` is not supported on the " + std::string(Accelerator::name) +
                                   " accelerator" +
                                   (Accelerator::kind == AcceleratorKind::mps ? " (Metal has no float64)" : "") +
                                   ". Valid choices on " + std::string(Accelerator::name) + ": " + valid + ".");
                } else {
                  if constexpr (Precision::is_autocast) {
                    const c10::ScalarType dtype = precision == "16-mixed" ? c10::ScalarType::Half
                                                                          : c10::ScalarType::BFloat16;
                    if (!compat::autocast_dtype_supported(device_type_of(Accelerator::kind), dtype)) {
                      throw UsageError("argument --precision " + precision + ": mixed precision `" + precision +
                                       "` needs autocast to " + c10::toString(dtype) + " on " +
                                       std::string(Accelerator::name) + ", which this LibTorch (" + compat::torch_version_string +
                                       ") does not support. Use --precision 32-true or a newer LibTorch.");
                    }
                  }
                  status = call_program<Accelerator, Strategy, Precision>(program, args);
                }
              });
          if (!found_precision) {
            throw UsageError("argument --precision " + precision + ": this program was built for precision " +
                             names_of(typename ChoiceSet::precisions{},
                                      [](auto p) { return decltype(p)::type::name; }) + " only.");
          }
        }
      });
  if (!found_strategy) {
    throw UsageError("argument --strategy " + args.strategy_name + ": this program was built for strategy " +
                     names_of(typename ChoiceSet::strategies{}, [](auto s) { return decltype(s)::type::name; }) +
                     " only.");
  }
  return status;
}

}  // namespace detail

/// Resolves parsed `args` on this machine and calls `program.template operator()<A, S, P>(args)` once,
/// with A one of volt::CPU / volt::CUDA / volt::MPS, S volt::SingleDevice or volt::DDP, P a precision
/// policy; fills args' resolved fields first. Returns what the program returns (0 for void). Throws
/// UsageError for a choice this machine or this build cannot run, and what the program throws.
template <class ChoiceSet = AllChoices, class Program>
int dispatch(Args& args, Program&& program) {
  const AcceleratorKind kind = detail::resolve_accelerator_flag(args.accelerator);
  args.accelerator_kind = kind;
  int status = 0;
  const bool found = detail::find_type(
      typename ChoiceSet::accelerators{}, [&](auto a) { return decltype(a)::type::kind == kind; },
      [&](auto a) { status = detail::dispatch_accelerator<typename decltype(a)::type, ChoiceSet>(args, program); });
  if (!found) {
    throw UsageError("argument --accelerator " + args.accelerator + ": this program was built for accelerator " +
                     detail::names_of(typename ChoiceSet::accelerators{},
                                      [](auto a) { return decltype(a)::type::name; }) +
                     " only, and the choice resolved to " + std::string(to_string(kind)) + ".");
  }
  return status;
}

/// Parses the command line with `parser`, prints the help or the configuration (`--print-config`; status 0)
/// or runs `program` through dispatch(). Returns the program's status; 2 after printing "<program>: error: <message>" for bad input
/// (UsageError, and MisconfigurationError thrown while the program runs: a configuration the command line
/// asked for); 1 after printing "<program>: error: <what>" for any other exception the program throws.
template <class ChoiceSet = AllChoices, class Program>
int run(const Parser& parser, int argc, const char* const* argv, Program&& program, Streams streams = {}) {
  try {
    Args args = parser.parse(argc, argv);
    if (args.help) {
      *streams.out << parser.help();
      return 0;
    }
    if (args.print_config) {  // set only where volt/cli/config_file.hpp registered its support
      *streams.out << detail::config_file_support()->print(parser, args);
      return 0;
    }
    return dispatch<ChoiceSet>(args, program);
  } catch (const UsageError& error) {
    *streams.err << parser.program() << ": error: " << error.what() << '\n';
    return usage_error_status;
  } catch (const MisconfigurationError& error) {
    *streams.err << parser.program() << ": error: " << error.what() << '\n';
    return usage_error_status;
  } catch (const std::exception& error) {
    *streams.err << parser.program() << ": error: " << error.what() << '\n';
    return 1;
  }
}

/// run() with the standard flags only; the program is named after argv[0].
template <class ChoiceSet = AllChoices, class Program>
int run(int argc, const char* const* argv, Program&& program, Streams streams = {}) {
  std::string name = argc > 0 && argv[0] != nullptr ? argv[0] : "program";
  if (const auto slash = name.find_last_of('/'); slash != std::string::npos) name.erase(0, slash + 1);
  return run<ChoiceSet>(Parser(name), argc, argv, std::forward<Program>(program), streams);
}

}  // namespace volt::cli

#if VOLT_DETAIL_HEADER_BODIES
#include <volt/cli/impl/dispatch.ipp>
#endif
