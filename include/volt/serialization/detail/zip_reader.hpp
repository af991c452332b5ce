/// \file
/// Reading the directory and entries of a zip archive (the container of torch.save files and LibTorch
/// archives) with every offset and length bounds-checked and every entry's CRC-32 verified; deflated entries
/// are inflated by volt's decoder (detail/inflate.hpp). Zip64 records (archives over 4 GiB) are read too.
/// Implementation of volt/serialization/checkpoint_io.hpp and weights.hpp, no public API.
#pragma once

#include <volt/core/linkage.hpp>
#include <volt/core/encoding.hpp>
#include <volt/serialization/detail/inflate.hpp>
#include <volt/serialization/detail/model_match.hpp>

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace volt::detail {

/// One entry of a zip archive: its name and its content (a view of the archive's bytes for a stored
/// entry, the inflated copy for a deflated one).
struct ZipEntry {
  std::string name;
  std::string_view stored{};
  std::string inflated{};
  bool deflated = false;
  /// The entry's content.
  std::string_view content() const noexcept { return deflated ? std::string_view(inflated) : stored; }
};

/// The entries of the zip archive `bytes`, in directory order, each checked against its CRC-32. Throws
/// CheckpointError "volt: <shown> is not a readable <noun> (truncated or corrupted, N bytes): <what>" for a
/// missing end record, a directory or entry outside the file, an unknown compression method, a damaged
/// compressed entry or a failed checksum. `bytes` must outlive the entries.
VOLT_INLINE std::vector<ZipEntry> read_zip_entries(std::string_view bytes, const std::string& shown,
                                                   const std::string& noun = "checkpoint");

}  // namespace volt::detail

#if VOLT_DETAIL_HEADER_BODIES
#include <volt/serialization/detail/impl/zip_reader.ipp>
#endif
