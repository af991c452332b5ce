#include "test_common.hpp"

#include "trainer/trainer_fixtures.hpp"

#include <cmath>
#include <cstring>
#include <fstream>
#include <iterator>
#include <limits>
#include <map>
#include <optional>
#include <set>

// TensorBoardLogger: the event file is decoded back here with an independent reader (bitwise CRC-32C,
// a minimal protobuf parser) and checked record by record.
namespace {

/// CRC-32C computed bit by bit (independent of the logger's table).
std::uint32_t reference_crc32c(const std::string& bytes) {
  std::uint32_t crc = 0xFFFFFFFFU;
  for (unsigned char byte : bytes) {
    crc ^= byte;
    for (int bit = 0; bit < 8; ++bit) crc = (crc >> 1) ^ (0x82F63B78U & (0U - (crc & 1U)));
  }
  return ~crc;
}
std::uint32_t reference_masked(const std::string& bytes) {
  const std::uint32_t crc = reference_crc32c(bytes);
  return ((crc >> 15) | (crc << 17)) + 0xA282EAD8U;
}

std::uint64_t read_le(const std::string& data, std::size_t at, int bytes) {
  std::uint64_t value = 0;
  for (int i = 0; i < bytes; ++i) value |= static_cast<std::uint64_t>(static_cast<unsigned char>(data.at(at + i))) << (8 * i);
  return value;
}

/// Splits a TFRecord stream into payloads; fails the test on a bad CRC or a torn record.
std::vector<std::string> read_records(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  const std::string data((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  std::vector<std::string> records;
  std::size_t at = 0;
  while (at < data.size()) {
    REQUIRE(at + 12 <= data.size());
    const std::uint64_t length = read_le(data, at, 8);
    CHECK(read_le(data, at + 8, 4) == reference_masked(data.substr(at, 8)));
    REQUIRE(at + 12 + length + 4 <= data.size());
    std::string payload = data.substr(at + 12, length);
    CHECK(read_le(data, at + 12 + length, 4) == reference_masked(payload));
    records.push_back(std::move(payload));
    at += 12 + length + 4;
  }
  return records;
}

/// One protobuf field: number, wire type and either an integer (varint / fixed) or bytes.
struct Field {
  int number = 0;
  int wire = 0;
  std::uint64_t integer = 0;
  std::string bytes;
};

std::vector<Field> parse_proto(const std::string& data) {
  std::vector<Field> fields;
  std::size_t at = 0;
  auto varint = [&] {
    std::uint64_t value = 0;
    for (int shift = 0;; shift += 7) {
      REQUIRE(at < data.size());
      const auto byte = static_cast<unsigned char>(data[at++]);
      value |= static_cast<std::uint64_t>(byte & 0x7FU) << shift;
      if ((byte & 0x80U) == 0) return value;
    }
  };
  while (at < data.size()) {
    const std::uint64_t key = varint();
    Field field;
    field.number = static_cast<int>(key >> 3);
    field.wire = static_cast<int>(key & 7U);
    if (field.wire == 0) {
      field.integer = varint();
    } else if (field.wire == 1) {
      field.integer = read_le(data, at, 8);
      at += 8;
    } else if (field.wire == 5) {
      field.integer = read_le(data, at, 4);
      at += 4;
    } else {
      REQUIRE(field.wire == 2);
      const std::uint64_t length = varint();
      REQUIRE(at + length <= data.size());
      field.bytes = data.substr(at, length);
      at += length;
    }
    fields.push_back(std::move(field));
  }
  return fields;
}

std::optional<Field> field(const std::vector<Field>& fields, int number) {
  for (const auto& f : fields) {
    if (f.number == number) return f;
  }
  return std::nullopt;
}
double as_double(std::uint64_t bits) {
  double value = 0;
  std::memcpy(&value, &bits, sizeof value);
  return value;
}
float as_float(std::uint64_t bits) {
  const auto narrow = static_cast<std::uint32_t>(bits);
  float value = 0;
  std::memcpy(&value, &narrow, sizeof value);
  return value;
}

struct Scalar {
  std::int64_t step;
  std::string tag;
  float value;
};

struct DecodedFile {
  std::string file_version;
  std::vector<Scalar> scalars;
  std::vector<std::string> session_start_infos;  // HParamsPluginData bytes
  std::vector<std::string> plugin_tags;          // "<plugin>:<tag>" of every value with plugin metadata
  std::vector<Scalar> histograms;                // step and tag of every histogram value
  std::vector<double> wall_times;
};

DecodedFile decode(const std::filesystem::path& path) {
  DecodedFile decoded;
  for (const auto& record : read_records(path)) {
    const auto event = parse_proto(record);
    const auto wall_time = field(event, 1);
    REQUIRE(wall_time);
    CHECK(wall_time->wire == 1);
    decoded.wall_times.push_back(as_double(wall_time->integer));
    const auto step = field(event, 2);
    const std::int64_t step_value = step ? static_cast<std::int64_t>(step->integer) : 0;
    if (const auto version = field(event, 3)) decoded.file_version = version->bytes;
    if (const auto summary = field(event, 5)) {
      for (const auto& value_field : parse_proto(summary->bytes)) {
        REQUIRE(value_field.number == 1);
        const auto value = parse_proto(value_field.bytes);
        const auto tag = field(value, 1);
        REQUIRE(tag);
        if (const auto simple = field(value, 2)) {
          CHECK(simple->wire == 5);
          decoded.scalars.push_back({step_value, tag->bytes, as_float(simple->integer)});
        }
        if (const auto metadata = field(value, 9)) {
          const auto plugin = parse_proto(field(parse_proto(metadata->bytes), 1)->bytes);
          decoded.plugin_tags.push_back(field(plugin, 1)->bytes + ":" + tag->bytes);
          if (tag->bytes == "_hparams_/session_start_info") decoded.session_start_infos.push_back(field(plugin, 2)->bytes);
        }
        if (field(value, 5)) decoded.histograms.push_back({step_value, tag->bytes, 0.0F});
      }
    }
  }
  return decoded;
}

std::vector<std::filesystem::path> event_files(const std::filesystem::path& dir) {
  std::vector<std::filesystem::path> files;
  for (const auto& entry : std::filesystem::directory_iterator(dir)) {
    if (entry.path().filename().string().rfind("events.out.tfevents.", 0) == 0) files.push_back(entry.path());
  }
  return files;
}

}  // namespace

TEST_CASE("TensorBoard CRC-32C matches the standard check value and TFRecord's mask") {
  CHECK(volt::detail::tensorboard::crc32c("123456789") == 0xE3069283U);
  CHECK(volt::detail::tensorboard::crc32c("") == 0U);
  const std::string text = "volt event";
  CHECK(volt::detail::tensorboard::masked_crc32c(text) == reference_masked(text));
}

TEST_CASE("TensorBoardLogger writes Lightning's layout and a file of valid records with scalars") {
  volt_test::TempDir dir;
  volt::TensorBoardLogger logger({.save_dir = dir.path, .name = "runs"});
  CHECK(logger.log_dir() == dir.path / "runs" / "version_0");
  logger.log_metrics({{"train_loss", 0.25}, {"val_acc", 0.875}}, 3);
  logger.log_metrics({{"train_loss", 0.125}}, 7);
  logger.finalize("success");

  const auto files = event_files(dir.path / "runs" / "version_0");
  REQUIRE(files.size() == 1);
  CHECK(files[0] == logger.event_file());
  // events.out.tfevents.<10-digit time>.<host>.<pid>.<n>
  const std::string name = files[0].filename().string();
  const std::string rest = name.substr(std::string("events.out.tfevents.").size());
  CHECK(rest.find('.') == 10);
  CHECK(name.find("." + volt::detail::tensorboard::host_name() + ".") != std::string::npos);
  CHECK(name.find("." + std::to_string(volt::detail::tensorboard::process_id()) + ".") != std::string::npos);

  const auto decoded = decode(files[0]);
  CHECK(decoded.file_version == "brain.Event:2");
  REQUIRE(decoded.scalars.size() == 3);
  CHECK(decoded.scalars[0].tag == "train_loss");
  CHECK(decoded.scalars[0].step == 3);
  CHECK(decoded.scalars[0].value == 0.25f);
  CHECK(decoded.scalars[1].tag == "val_acc");
  CHECK(decoded.scalars[1].value == 0.875f);
  CHECK(decoded.scalars[2].step == 7);
  CHECK(decoded.scalars[2].value == 0.125f);
  const double now = volt::detail::tensorboard::now_seconds();
  for (double wall_time : decoded.wall_times) CHECK((wall_time > now - 600 && wall_time <= now));

  // A second logger in the same folder takes the next version.
  volt::TensorBoardLogger next({.save_dir = dir.path, .name = "runs"});
  CHECK(next.log_dir() == dir.path / "runs" / "version_1");
}

TEST_CASE("TensorBoardLogger hyperparameters: hparams.yaml, hp_metric and the hparams plugin's session_start_info") {
  volt_test::TempDir dir;
  volt::TensorBoardLogger logger({.save_dir = dir.path, .version = 4});
  logger.log_hyperparams({{"lr", "0.001"}, {"optimizer", "adam"}, {"shuffle", "true"}});
  logger.save();
  CHECK(std::filesystem::exists(dir.path / "lightning_logs" / "version_4" / "hparams.yaml"));
  const auto decoded = decode(logger.event_file());
  REQUIRE(decoded.scalars.size() == 1);
  CHECK(decoded.scalars[0].tag == "hp_metric");
  CHECK(decoded.scalars[0].value == -1.0f);
  REQUIRE(decoded.session_start_infos.size() == 1);
  const auto plugin_data = parse_proto(decoded.session_start_infos[0]);
  CHECK(field(plugin_data, 1)->integer == 0);  // version
  const auto session = parse_proto(field(plugin_data, 3)->bytes);
  std::map<std::string, std::vector<Field>> hparams;
  for (const auto& entry : session) {
    if (entry.number != 1) continue;
    const auto pair = parse_proto(entry.bytes);
    hparams[field(pair, 1)->bytes] = parse_proto(field(pair, 2)->bytes);
  }
  REQUIRE(hparams.size() == 3);
  CHECK(field(hparams["lr"], 2)->wire == 1);
  CHECK(as_double(field(hparams["lr"], 2)->integer) == 0.001);
  CHECK(field(hparams["optimizer"], 3)->bytes == "adam");
  CHECK(field(hparams["shuffle"], 4)->integer == 1);
  CHECK(field(session, 5));  // start_time_secs

  volt::TensorBoardLogger quiet({.save_dir = dir.path, .version = 5, .default_hp_metric = false});
  quiet.log_hyperparams({});
  quiet.save();
  const auto without_metric = decode(quiet.event_file());
  CHECK(without_metric.scalars.empty());
  CHECK(without_metric.session_start_infos.size() == 1);
}

TEST_CASE("TensorBoardLogger with the Trainer: hparams at fit start and train_loss at the logged steps") {
  volt_test::TempDir dir;
  auto model = std::make_shared<volt_test::Classifier>();
  auto options = volt_test::quiet_options(dir);
  options.logger = true;
  options.max_epochs = 2;
  options.log_every_n_steps = 2;
  volt::Trainer<volt::CPU> trainer(options, volt::TensorBoardLogger({.save_dir = dir.path}));
  REQUIRE(trainer.loggers().size() == 1);
  trainer.fit(model, volt_test::make_classification_batches(4, 8));
  const auto files = event_files(dir.path / "lightning_logs" / "version_0");
  REQUIRE(files.size() == 1);
  const auto decoded = decode(files[0]);
  CHECK(decoded.session_start_infos.size() == 1);
  std::vector<std::int64_t> loss_steps;
  for (const auto& scalar : decoded.scalars) {
    if (scalar.tag == "train_loss") loss_steps.push_back(scalar.step);
  }
  // 8 optimizer steps, logged every 2: global steps 2, 4, 6, 8 at logger steps 1, 3, 5, 7.
  CHECK(loss_steps == std::vector<std::int64_t>{1, 3, 5, 7});
}

TEST_CASE("A logger list chosen at run time: entries in order under default_root_dir; empty means none") {
  volt_test::TempDir dir;
  auto options = volt_test::quiet_options(dir);
  options.logger = true;
  options.max_epochs = 1;
  options.log_every_n_steps = 2;
  {
    std::vector<std::shared_ptr<volt::Logger>> list{std::make_shared<volt::CSVLogger>(),
                                                    std::make_shared<volt::TensorBoardLogger>()};
    volt::Trainer<volt::CPU> trainer(options, list);
    REQUIRE(trainer.loggers().size() == 2);
    CHECK(trainer.loggers()[0] == list[0]);  // the same objects, not copies
    CHECK(trainer.loggers()[1] == list[1]);
    auto model = std::make_shared<volt_test::Classifier>();
    trainer.fit(model, volt_test::make_classification_batches(4, 8));
    // Both took the Trainer's default_root_dir, as loggers given one by one do; the second of the same name
    // takes the next version, as in Lightning.
    CHECK(std::filesystem::exists(dir.path / "lightning_logs" / "version_0" / "metrics.csv"));
    CHECK(event_files(dir.path / "lightning_logs" / "version_0").empty());
    CHECK(event_files(dir.path / "lightning_logs" / "version_1").size() == 1);
  }
  {
    // Lightning's logger=[]: no logger, not the default CSVLogger.
    volt::Trainer<volt::CPU> trainer(options, std::vector<std::shared_ptr<volt::Logger>>{});
    CHECK(trainer.loggers().empty());
  }
  {
    volt::Trainer<volt::CPU> trainer(options);
    CHECK(trainer.loggers().size() == 1);  // nothing given: the default CSVLogger
  }
  {
    std::vector<std::shared_ptr<volt::Logger>> list{std::make_shared<volt::CSVLogger>(), nullptr};
    VOLT_CHECK_THROWS_CONTAINS(volt::Trainer<volt::CPU>(options, list), volt::MisconfigurationError,
                               "null entry at index 1 (of 2)");
  }
}

TEST_CASE("TensorBoardLogger names the file it cannot create") {
  volt_test::TempDir dir;
  {
    std::ofstream blocker(dir.path / "not_a_folder");
    blocker << "x";
  }
  volt::TensorBoardLogger logger({.save_dir = dir.path / "not_a_folder"});
  VOLT_CHECK_THROWS_CONTAINS(logger.log_metrics({{"a", 1.0}}, 0), std::runtime_error, "not_a_folder");
}

TEST_CASE("encode_png: signature, IHDR, stored deflate blocks holding the rows, CRC-32 and Adler-32") {
  // 2 rows x 3 columns, RGB, uint8: pixel (y, x, c) = 100 y + 10 x + c.
  const auto image = (torch::arange(2).view({1, 2, 1}) * 100 + torch::arange(3).view({1, 1, 3}) * 10 +
                      torch::arange(3).view({3, 1, 1})).to(torch::kByte);
  const std::string png = volt::encode_png(image);
  REQUIRE(png.size() > 8 + 25 + 12 + 12);
  CHECK(png.substr(0, 8) == std::string("\x89PNG\r\n\x1a\n", 8));
  const auto u32 = [&](std::size_t at) {
    std::uint32_t value = 0;
    for (int i = 0; i < 4; ++i) value = value << 8 | static_cast<unsigned char>(png[at + static_cast<std::size_t>(i)]);
    return value;
  };
  CHECK(u32(8) == 13);
  CHECK(png.substr(12, 4) == "IHDR");
  CHECK(u32(16) == 3);  // width
  CHECK(u32(20) == 2);  // height
  CHECK(png.substr(24, 5) == std::string("\x08\x02\x00\x00\x00", 5));  // 8 bits, RGB, deflate, no filter, no interlace
  CHECK(u32(29) == volt::detail::png::crc32(png.substr(12, 17)));
  const std::size_t idat = 33;
  CHECK(png.substr(idat + 4, 4) == "IDAT");
  const std::string zlib = png.substr(idat + 8, u32(idat));
  // zlib header, one final stored block of 2 x (1 + 9) bytes, the rows with filter byte 0, Adler-32.
  CHECK(zlib.substr(0, 2) == "\x78\x01");
  CHECK(zlib.substr(2, 5) == std::string("\x01\x14\x00\xeb\xff", 5));
  std::string expected;
  for (int y = 0; y < 2; ++y) {
    expected += '\0';
    for (int x = 0; x < 3; ++x) {
      for (int c = 0; c < 3; ++c) expected += static_cast<char>(100 * y + 10 * x + c);
    }
  }
  CHECK(zlib.substr(7, 20) == expected);
  std::uint32_t a = 1, b = 0;
  for (const char byte : expected) a = (a + static_cast<unsigned char>(byte)) % 65521, b = (b + a) % 65521;
  CHECK(u32(idat + 8 + 27) == (b << 16 | a));
  CHECK(png.substr(png.size() - 12) == std::string("\x00\x00\x00\x00IEND\xae\x42\x60\x82", 12));
  // Floats are scaled by 255 and clipped; other shapes and dtypes are refused.
  const auto scaled = volt::image_to_hwc_uint8(torch::tensor({{-1.0F, 0.5F, 2.0F}}));
  CHECK(scaled.sizes() == c10::IntArrayRef{1, 3, 1});
  CHECK(scaled[0][0][0].item<int>() == 0);
  CHECK(scaled[0][1][0].item<int>() == 127);
  CHECK(scaled[0][2][0].item<int>() == 255);
  CHECK_THROWS_WITH_AS(volt::encode_png(torch::zeros({2, 3, 3})), doctest::Contains("1, 3 or 4 channels"),
                       std::invalid_argument);
  CHECK_THROWS_WITH_AS(volt::encode_png(torch::zeros({3, 3}, torch::kInt)), doctest::Contains("or uint8, got Int"),
                       std::invalid_argument);
}

TEST_CASE("make_image_grid lays out a batch as torchvision's make_grid") {
  const auto batch = torch::arange(5 * 16, torch::kFloat).reshape({5, 1, 4, 4});
  const auto grid = volt::make_image_grid(batch, {.nrow = 2, .padding = 2, .pad_value = -1.0});
  CHECK(grid.sizes() == c10::IntArrayRef{3, 3 * 6 + 2, 2 * 6 + 2});
  CHECK(torch::equal(grid.narrow(1, 2, 4).narrow(2, 8, 4), batch[1].expand({3, 4, 4})));  // row 0, column 1
  CHECK(torch::equal(grid.narrow(1, 14, 4).narrow(2, 2, 4), batch[4].expand({3, 4, 4})));  // row 2, column 0
  CHECK(grid[0][0][0].item<float>() == -1.0F);
  CHECK(grid[0][15][10].item<float>() == -1.0F);  // the empty sixth cell
  CHECK(torch::equal(volt::make_image_grid(batch.narrow(0, 0, 1)), batch[0].expand({3, 4, 4})));
  CHECK_THROWS_AS(volt::make_image_grid(batch, {.nrow = 0}), std::invalid_argument);
}

TEST_CASE("TensorBoardLogger writes images, histograms, text and the hparams experiment with its metrics") {
  volt_test::TempDir dir;
  volt::TensorBoardLogger logger({.save_dir = dir.path, .version = 0, .prefix = "p"});
  logger.log_hyperparams({{"lr", "0.1"}}, {{"val_acc", 0.5}});
  logger.log_image("img", torch::rand({3, 4, 4}), 1);
  logger.log_images("grid", torch::rand({4, 1, 2, 2}), 2);
  logger.log_histogram("h", torch::tensor({1.0, std::numeric_limits<double>::infinity(), 2.0}), 3, 4);
  logger.log_text("t", "hello", 4);
  logger.save();
  const auto decoded = decode(logger.event_file());
  CHECK(decoded.plugin_tags == std::vector<std::string>{"hparams:_hparams_/experiment", "hparams:_hparams_/session_start_info",
                                                        "hparams:_hparams_/session_end_info", "text:p-t/text_summary"});
  REQUIRE(decoded.scalars.size() == 1);
  CHECK(decoded.scalars[0].tag == "p-val_acc");
  REQUIRE(decoded.histograms.size() == 1);
  CHECK(decoded.histograms[0].tag == "p-h");
  CHECK(decoded.histograms[0].step == 3);
  CHECK_THROWS_WITH_AS(logger.log_histogram("nan", torch::full({2}, std::nan("")), 5),
                       doctest::Contains("\"nan\" has no finite value"), std::invalid_argument);
}

TEST_CASE("HistogramMonitor logs parameters and gradients every n steps to the TensorBoardLogger") {
  volt_test::TempDir dir;
  auto model = std::make_shared<volt_test::Classifier>();
  auto options = volt_test::quiet_options(dir);
  options.logger = true;
  options.max_epochs = 2;
  volt::Trainer<volt::CPU> trainer(options, volt::TensorBoardLogger({.save_dir = dir.path}),
                                   volt::HistogramMonitor({.every_n_steps = 3, .bins = 8}));
  trainer.fit(model, volt_test::make_classification_batches(4, 8));  // 8 steps: logged before steps 0, 3, 6
  const auto decoded = decode(event_files(dir.path / "lightning_logs" / "version_0")[0]);
  const auto parameters = model->named_parameters();
  std::map<std::int64_t, int> per_step;
  std::set<std::string> tags;
  for (const auto& histogram : decoded.histograms) {
    ++per_step[histogram.step];
    tags.insert(histogram.tag);
  }
  const int per_log = 2 * static_cast<int>(parameters.size());
  CHECK(per_step == std::map<std::int64_t, int>{{0, per_log}, {3, per_log}, {6, per_log}});
  CHECK(tags.count("parameters/" + parameters.keys()[0]) == 1);
  CHECK(tags.count("gradients/" + parameters.keys()[0]) == 1);

  volt::Trainer<volt::CPU> without_tensorboard(volt_test::quiet_options(dir), volt::HistogramMonitor());
  CHECK_THROWS_WITH_AS(without_tensorboard.fit(model, volt_test::make_classification_batches(1, 8)),
                       doctest::Contains("has no TensorBoardLogger"), volt::MisconfigurationError);
  CHECK_THROWS_AS(volt::HistogramMonitor({.every_n_steps = 0}), volt::MisconfigurationError);
}
