/// \file
/// Header-only or compiled once: the two ways to build volt's functions that do not depend on a user's types.
///
/// By default volt is header-only: every function is `inline` and is compiled in each translation unit that
/// uses it. Programs that define VOLT_SEPARATE_COMPILATION (volt's CMake target `volt::compiled` does it for
/// them) see only the declarations of volt's non-template functions (checkpoint files, safetensors, device
/// selection, loggers, option checks, messages...), and one translation unit compiles their definitions: the
/// `volt::compiled` library, or a file of the program's own that defines VOLT_IMPLEMENTATION as well before it
/// includes <volt/volt.hpp>. Templates (the Trainer, the loops, everything that sees the model) stay in the
/// headers either way.
///
///   VOLT_INLINE                 `inline` when header-only; nothing with VOLT_SEPARATE_COMPILATION (one
///                               out-of-line definition, in the translation unit with VOLT_IMPLEMENTATION)
///   VOLT_DETAIL_HEADER_BODIES   1 where the definitions are compiled: header-only, or with VOLT_IMPLEMENTATION
///   VOLT_DETAIL_INSTANTIATE     with VOLT_SEPARATE_COMPILATION only: `template` with VOLT_IMPLEMENTATION,
///                               `extern template` elsewhere, so that one list of volt's explicit instantiations
///                               (`VOLT_DETAIL_INSTANTIATE struct X<A>;`) both defines them and declares them
#pragma once

#if defined(VOLT_SEPARATE_COMPILATION)
/// The linkage of volt's non-template functions: external (one definition, compiled with VOLT_IMPLEMENTATION).
#define VOLT_INLINE
#if defined(VOLT_IMPLEMENTATION)
/// 1: this translation unit compiles the definitions (it defines VOLT_IMPLEMENTATION).
#define VOLT_DETAIL_HEADER_BODIES 1
#else
/// 0: the definitions are compiled elsewhere (volt::compiled, or the file that defines VOLT_IMPLEMENTATION).
#define VOLT_DETAIL_HEADER_BODIES 0
#endif
#else
/// The linkage of volt's non-template functions: `inline`, compiled in each translation unit (header-only).
#define VOLT_INLINE inline
/// 1: this translation unit compiles the definitions (header-only).
#define VOLT_DETAIL_HEADER_BODIES 1
#endif

#if defined(VOLT_SEPARATE_COMPILATION) && defined(VOLT_IMPLEMENTATION)
/// An explicit instantiation definition: compiled here, once.
#define VOLT_DETAIL_INSTANTIATE template
#elif defined(VOLT_SEPARATE_COMPILATION)
/// An explicit instantiation declaration: compiled in volt::compiled, not in this translation unit.
#define VOLT_DETAIL_INSTANTIATE extern template
#endif
