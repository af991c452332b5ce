// libFuzzer target for volt's safetensors reader (include/volt/serialization/safetensors.hpp and
// detail/safetensors_header.hpp): the bytes of a file go through the same code load_safetensors runs on a
// memory-mapped file (the 8-byte length, the JSON header, the checks of every length and offset, the tensors
// built as views of the bytes).
//
// Properties, besides "no crash, hang or sanitizer report":
//   * every input is accepted or refused with volt::SafetensorsError, never another exception;
//   * an accepted input's tensors lie inside the input: every byte of each one is read (AddressSanitizer
//     reports a read past the buffer), and their byte counts add up to the data after the header;
//   * the header volt writes for an accepted input's tensors and metadata (detail::safetensors::write_header)
//     parses back to the same names, dtypes, shapes, offsets and metadata.
//
// Build and run: fuzz/run_safetensors_fuzzer.sh (clang >= 15 with -fsanitize=fuzzer,address,undefined, C++20,
// LibTorch).
#include <volt/serialization/safetensors.hpp>

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <string>

namespace {

namespace st = volt::detail::safetensors;

volatile unsigned sink = 0;

[[noreturn]] void violated(const char* what) {
  std::fprintf(stderr, "safetensors_fuzzer: property violated: %s\n", what);
  std::abort();
}

void check_round_trip(const std::string& bytes) {
  std::uint64_t length = 0;
  for (int i = 7; i >= 0; --i) length = length << 8 | static_cast<unsigned char>(bytes[static_cast<std::size_t>(i)]);
  const std::uint64_t data_size = bytes.size() - 8 - length;
  const auto header = st::parse_header(std::string_view(bytes).substr(8, length), data_size);
  const std::string written = st::write_header(header.tensors, header.metadata);
  if (written.size() % 8 != 0) violated("the written header is not padded to 8 bytes");
  const auto again = st::parse_header(std::string_view(written).substr(8), data_size);
  if (again.metadata != header.metadata) violated("the metadata differs after a write and a read");
  if (again.tensors.size() != header.tensors.size()) violated("the tensor count differs after a write and a read");
  for (std::size_t i = 0; i < header.tensors.size(); ++i) {
    const auto& a = header.tensors[i];
    const auto& b = again.tensors[i];
    if (a.name != b.name || a.dtype != b.dtype || a.shape != b.shape || a.begin != b.begin || a.end != b.end) {
      violated("a tensor entry differs after a write and a read");
    }
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string bytes(reinterpret_cast<const char*>(data), size);
  volt::SafetensorsFile file;
  try {
    file = st::read(volt::detail::MappedFile::from_bytes(bytes), "<fuzz input>", volt::SafetensorsLoadOptions{});
  } catch (const volt::SafetensorsError&) {
    return 0;  // refused with a message: the expected outcome for a bad file
  } catch (const std::exception& error) {
    std::fprintf(stderr, "safetensors_fuzzer: unexpected exception: %s\n", error.what());
    std::abort();
  }
  std::uint64_t total = 0;
  unsigned checksum = 0;
  for (const auto& item : file.tensors) {
    const auto& tensor = item.value();
    const auto count = static_cast<std::size_t>(tensor.numel()) * tensor.element_size();
    const auto* first = static_cast<const unsigned char*>(tensor.data_ptr());
    for (std::size_t i = 0; i < count; ++i) checksum += first[i];
    total += count;
  }
  std::uint64_t length = 0;
  for (int i = 7; i >= 0; --i) length = length << 8 | static_cast<unsigned char>(bytes[static_cast<std::size_t>(i)]);
  if (total != bytes.size() - 8 - length) violated("the tensors' bytes do not add up to the data after the header");
  try {
    check_round_trip(bytes);
  } catch (const std::exception& error) {
    std::fprintf(stderr, "safetensors_fuzzer: a written header was refused: %s\n", error.what());
    std::abort();
  }
  sink = checksum;  // keeps the reads
  return 0;
}
