#!/bin/sh
# Builds fuzz/safetensors_fuzzer.cpp (volt's safetensors reader, volt/serialization/safetensors.hpp) with clang's
# libFuzzer, AddressSanitizer and UndefinedBehaviorSanitizer, then runs it on the seeds in fuzz/corpus/safetensors
# (files written by Python's safetensors package) with the dictionary fuzz/safetensors.dict:
#   fuzz/run_safetensors_fuzzer.sh [runs] [extra libFuzzer flags...]     (default: 1000000 inputs)
# Compiler, LibTorch, output folder and logs: see fuzz/libtorch_fuzzer.sh. Run it with `nice -n 10` on a shared
# machine.
exec sh "$(dirname "$0")/libtorch_fuzzer.sh" safetensors 1000000 4096 "$@"
