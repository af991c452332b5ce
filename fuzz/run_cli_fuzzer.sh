#!/bin/sh
# Builds fuzz/cli_fuzzer.cpp (volt's command-line parser, volt/cli/args.hpp) with clang's libFuzzer,
# AddressSanitizer and UndefinedBehaviorSanitizer, then runs it on the seeds in fuzz/corpus/cli with the
# dictionary fuzz/cli.dict:
#   fuzz/run_cli_fuzzer.sh [runs] [extra libFuzzer flags...]     (default: 10000000 inputs)
# Compiler, LibTorch, output folder and logs: see fuzz/libtorch_fuzzer.sh. Run it with `nice -n 10` on a shared
# machine.
exec sh "$(dirname "$0")/libtorch_fuzzer.sh" cli 10000000 512 "$@"
