/// \file
/// Writing the protocol-2 pickle of a state_dict as torch.save does; implementation of
/// volt/serialization/pickle.hpp, no public API.
#pragma once

#include <volt/core/linkage.hpp>
#include <volt/serialization/detail/pickle_reader.hpp>
#include <volt/serialization/detail/pickle_storage.hpp>

#include <torch/torch.h>

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <stdexcept>
#include <string>
#include <string_view>
#include <utility>
#include <variant>
#include <vector>

namespace volt::detail::pickle {

/// Writes protocol-2 pickle opcodes.
class Writer {
 public:
  Writer() { bytes_ += "\x80\x02"; }  // PROTO 2
  void mark() { bytes_ += '('; }
  void global(std::string_view module, std::string_view name);
  void string(std::string_view text);
  void integer(std::int64_t value);
  void int_tuple(c10::IntArrayRef values);
  void tuple() { bytes_ += 't'; }
  void empty_tuple() { bytes_ += ')'; }
  void false_() { bytes_ += '\x89'; }
  void true_() { bytes_ += '\x88'; }
  void none() { bytes_ += 'N'; }
  void floating(double value);
  void empty_list() { bytes_ += ']'; }
  void empty_dict() { bytes_ += '}'; }
  void appends() { bytes_ += 'e'; }
  void reduce() { bytes_ += 'R'; }
  void persistent_id() { bytes_ += 'Q'; }
  void setitems() { bytes_ += 'u'; }
  void stop() { bytes_ += '.'; }
  const std::string& bytes() const { return bytes_; }

 private:
  void append_u32(std::uint32_t value);
  std::string bytes_;
};

/// The pickle of `root` (None, bool, int, float, str, tuple, list, dict and OrderedDict, tensors and
/// parameters), as torch.save writes those types; tensor i refers to storage record data/<i>, whose bytes are
/// `storages[i]` (dense CPU tensors: each tensor is written with its own strides when it is dense and
/// non-overlapping, contiguous otherwise). Throws std::invalid_argument for a value of another kind.
VOLT_INLINE std::string value_pickle(const Value& root, std::vector<torch::Tensor>& storages);

/// The pickle of an OrderedDict name -> tensor as torch.save writes it; tensor i refers to storage record
/// data/<i> (its contiguous CPU bytes, which the caller writes). `tensors` must be contiguous CPU tensors.
VOLT_INLINE std::string state_dict_pickle(const std::vector<std::pair<std::string, torch::Tensor>>& tensors);

}  // namespace volt::detail::pickle

#if VOLT_DETAIL_HEADER_BODIES
#include <volt/serialization/detail/impl/pickle_writer.ipp>
#endif
