/// \file
/// volt/cli: Lightning-style command-line flags mapped onto the compile-time policies.
///
/// ```
///   return volt::cli::run(argc, argv, [&]<class A, class S, class P>(volt::cli::Args& args) {
///     volt::Trainer<A, S, P> trainer(args.trainer_options());
///     ...
///   });
/// ```
#pragma once

#include <volt/cli/values.hpp>
#include <volt/cli/args.hpp>
#include <volt/cli/dispatch.hpp>

/// \namespace volt::cli
/// Lightning's Trainer flags on the command line (Args, Parser) and the dispatch from their strings to the
/// compile-time policy types (run).
