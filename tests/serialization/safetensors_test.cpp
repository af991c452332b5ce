#include "test_common.hpp"

#include "trainer/trainer_fixtures.hpp"

#include <cstdint>
#include <cstring>
#include <fstream>
#include <iterator>
#include <string>

// save_safetensors / load_safetensors within C++: the bytes of the format, the checks of untrusted headers,
// memory-mapped loading, loading into modules. The exchange with Python is tests/python/check_safetensors.py.
using volt_test::read_bytes;
using volt_test::write_bytes;

namespace {

struct Net : torch::nn::Module {
  torch::nn::Sequential net{torch::nn::Linear(4, 3), torch::nn::BatchNorm1d(3), torch::nn::ReLU(), torch::nn::Linear(3, 2)};
  Net() { register_module("net", net); }
};

/// A file of `json` (padded to 8 bytes) followed by `data`.
std::string file_of(std::string json, const std::string& data = "") {
  json.append((8 - json.size() % 8) % 8, ' ');
  std::string out(8, '\0');
  auto length = static_cast<std::uint64_t>(json.size());
  for (int i = 0; i < 8; ++i, length >>= 8) out[static_cast<std::size_t>(i)] = static_cast<char>(length & 0xFF);
  return out + json + data;
}

std::string load_error(const std::string& bytes) {
  volt_test::TempDir dir;
  write_bytes(dir.path / "bad.safetensors", bytes);
  try {
    volt::load_safetensors(dir.path / "bad.safetensors");
  } catch (const volt::SafetensorsError& error) {
    return error.what();
  }
  return "";
}

}  // namespace

TEST_CASE("save_safetensors writes the bytes Python's safetensors writes: length, padded JSON, data") {
  volt_test::TempDir dir;
  volt::StateDict weights;
  weights.insert("b", torch::tensor(1.5F));
  weights.insert("a", torch::tensor({int64_t{1}, int64_t{-2}}));
  weights.insert("c\"\n", torch::tensor({true}));
  volt::save_safetensors(weights, dir.path / "w.safetensors", {{"format", "pt"}});
  const std::string bytes = read_bytes(dir.path / "w.safetensors");
  // Tensors by dtype rank (I64 before F32 before BOOL), metadata first, spaces to a multiple of 8.
  const std::string json =
      "{\"__metadata__\":{\"format\":\"pt\"},\"a\":{\"dtype\":\"I64\",\"shape\":[2],\"data_offsets\":[0,16]},"
      "\"b\":{\"dtype\":\"F32\",\"shape\":[],\"data_offsets\":[16,20]},"
      "\"c\\\"\\n\":{\"dtype\":\"BOOL\",\"shape\":[1],\"data_offsets\":[20,21]}}";
  REQUIRE(bytes.size() >= 8);
  std::uint64_t length = 0;
  for (int i = 7; i >= 0; --i) length = length << 8 | static_cast<unsigned char>(bytes[static_cast<std::size_t>(i)]);
  CHECK(length % 8 == 0);
  CHECK(length == json.size() + (8 - json.size() % 8) % 8);
  CHECK(bytes.substr(8, json.size()) == json);
  CHECK(bytes.substr(8 + json.size(), length - json.size()) == std::string(length - json.size(), ' '));
  CHECK(bytes.size() == 8 + length + 21);
  const std::string data = bytes.substr(8 + length);
  CHECK(static_cast<unsigned char>(data[0]) == 1);     // 1 as little-endian int64
  CHECK(static_cast<unsigned char>(data[8]) == 0xFE);  // -2
  CHECK(static_cast<unsigned char>(data[20]) == 1);    // true
}

TEST_CASE("save_safetensors then load_safetensors gives back every dtype, shape, value and the metadata") {
  volt_test::TempDir dir;
  volt::StateDict weights;
  weights.insert("f32", torch::randn({3, 4}));
  weights.insert("f64", torch::arange(3, torch::kDouble) - 1.5);
  weights.insert("f16", torch::randn({5}).to(torch::kHalf));
  weights.insert("bf16", torch::randn({2, 2}).to(torch::kBFloat16));
  weights.insert("i64", torch::tensor({int64_t{1} << 40, -(int64_t{1} << 35)}));
  weights.insert("i32", torch::tensor({7, -9}, torch::kInt));
  weights.insert("i16", torch::tensor({300, -300}, torch::kShort));
  weights.insert("i8", torch::tensor({-128, 127}, torch::kChar));
  weights.insert("u8", torch::tensor({0, 255}, torch::kByte));
  weights.insert("bool", torch::tensor({true, false, true}));
  weights.insert("c64", torch::randn({2}, torch::kComplexFloat));
  weights.insert("scalar", torch::tensor(3.0F));
  weights.insert("empty", torch::empty({0, 3}));
  weights.insert("transposed", torch::randn({2, 3}).t());
  for (const char* name : {"Float8_e5m2", "Float8_e4m3fn", "Float8_e5m2fnuz", "Float8_e4m3fnuz", "Float8_e8m0fnu",
                           "UInt16", "UInt32", "UInt64", "Float4_e2m1fn_x2"}) {
    if (const auto type = volt::compat::scalar_type_named(name)) {
      // 8 bytes per row: a whole number of elements of every one of these types (UInt64 is 8 bytes).
      weights.insert(name, torch::randint(0, 255, {2, 8}, torch::kByte).view(*type));
    }
  }
  const volt::SafetensorsMetadata metadata{{"format", "pt"}, {"note", "é ü \t \"quoted\""}};
  volt::save_safetensors(weights, dir.path / "sub" / "w.safetensors", metadata);
  for (const bool mmap : {true, false}) {
    CAPTURE(mmap);
    const auto file = volt::load_safetensors(dir.path / "sub" / "w.safetensors", {.mmap = mmap});
    CHECK(file.metadata == metadata);
    REQUIRE(file.tensors.size() == weights.size());
    for (const auto& item : weights) {
      CAPTURE(item.key());
      const auto* loaded = file.tensors.find(item.key());
      REQUIRE(loaded != nullptr);
      CHECK((loaded->scalar_type() == item.value().scalar_type()));
      CHECK(loaded->sizes() == item.value().sizes());
      // Bit-exact: compare the bytes (NaN patterns of the float8 types included).
      const auto expected = item.value().contiguous();
      const auto size = static_cast<std::size_t>(expected.numel() * expected.element_size());
      if (size > 0) CHECK(std::memcmp(loaded->data_ptr(), expected.data_ptr(), size) == 0);  // empty: no data
    }
  }
}

TEST_CASE("load_safetensors maps the file: CPU tensors are private views that outlive everything else") {
  volt_test::TempDir dir;
  volt::StateDict weights;
  weights.insert("w", torch::arange(1024, torch::kFloat));
  const auto path = dir.path / "w.safetensors";
  volt::save_safetensors(weights, path);
  const std::string before = read_bytes(path);
  torch::Tensor view;
  {
    auto file = volt::load_safetensors(path);
    view = file.tensors["w"];
  }
  // The mapping lives as long as the tensor; writing to it changes memory, never the file.
  CHECK(view[1023].item<float>() == 1023.0F);
  view.mul_(2);
  CHECK(view[1023].item<float>() == 2046.0F);
  CHECK(read_bytes(path) == before);
  // A header of 4 bytes padded to 8 puts the data of a float at an aligned address; an odd header length
  // (allowed by the format) makes a float misaligned, which is copied instead of viewed.
  const std::string data("\x00\x00\x80\x3f", 4);
  write_bytes(dir.path / "odd.safetensors",
              [&] {
                const std::string json = "{\"x\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]}}";
                std::string out(8, '\0');
                out[0] = static_cast<char>(json.size());
                return out + json + data;
              }());
  CHECK(volt::load_safetensors(dir.path / "odd.safetensors").tensors["x"].item<float>() == 1.0F);
}

TEST_CASE("load_safetensors into a module: strict by default, non-strict lists the keys, shapes always checked") {
  volt_test::TempDir dir;
  auto source = std::make_shared<Net>();
  volt::save_safetensors(source, dir.path / "net.safetensors");
  auto target = std::make_shared<Net>();
  const auto result = volt::load_safetensors(target, dir.path / "net.safetensors");
  CHECK(result.missing_keys.empty());
  CHECK(result.unexpected_keys.empty());
  for (const auto& item : volt::state_dict(source)) {
    CHECK(torch::equal(volt::state_dict(target)[item.key()], item.value()));
  }

  auto partial = volt::state_dict(source);
  partial.erase("net.3.bias");
  partial.insert("extra.weight", torch::zeros({1}));
  volt::save_safetensors(partial, dir.path / "partial.safetensors");
  auto strict_target = std::make_shared<Net>();
  const auto untouched = strict_target->net[0]->as<torch::nn::Linear>()->weight.clone();
  try {
    volt::load_safetensors(strict_target, dir.path / "partial.safetensors");
    FAIL("expected an error");
  } catch (const volt::SafetensorsError& error) {
    const std::string text = error.what();
    CHECK(text.find("Missing key(s) in state_dict: \"net.3.bias\"") != std::string::npos);
    CHECK(text.find("Unexpected key(s) in state_dict: \"extra.weight\"") != std::string::npos);
    CHECK(text.find("partial.safetensors") != std::string::npos);
  }
  CHECK(torch::equal(strict_target->net[0]->as<torch::nn::Linear>()->weight, untouched));  // unchanged
  const auto loose = volt::load_safetensors(strict_target, dir.path / "partial.safetensors", {.strict = false});
  CHECK(loose.missing_keys == std::vector<std::string>{"net.3.bias"});
  CHECK(loose.unexpected_keys == std::vector<std::string>{"extra.weight"});

  auto wrong = volt::state_dict(source);
  wrong["net.0.weight"] = torch::zeros({2, 2});
  volt::save_safetensors(wrong, dir.path / "wrong.safetensors");
  try {
    volt::load_safetensors(target, dir.path / "wrong.safetensors", {.strict = false});
    FAIL("expected an error");
  } catch (const volt::SafetensorsError& error) {
    CHECK(std::string(error.what()).find("size mismatch for net.0.weight: copying a param with shape "
                                         "torch.Size([2, 2]) from checkpoint, the shape in current model is "
                                         "torch.Size([3, 4]).") != std::string::npos);
  }
}

TEST_CASE("load_safetensors rejects malformed files with a message saying what is wrong") {
  const std::string f32 = R"("x":{"dtype":"F32","shape":[2],"data_offsets":[0,8]})";
  const std::string eight(8, '\0');
  CHECK(load_error(file_of("{" + f32 + "}", eight)).empty());  // the well-formed control
  const std::pair<std::string, std::string> cases[] = {
      {std::string("\x01\x02", 2), "fewer than the 8 of the header length"},
      {std::string("\xff\xff\xff\xff\xff\xff\xff\xff", 8), "is over the limit of 100000000 bytes"},
      {std::string("\x40\x00\x00\x00\x00\x00\x00\x00{}", 10), "is more than the 2 bytes after it"},
      {file_of("[]"), "does not start with '{'"},
      {file_of("{" + f32 + "}", std::string(7, '\0')), "past the end of the data (7 bytes)"},
      {file_of("{" + f32 + "}", std::string(9, '\0')), "the tensors cover 8 bytes of data but the file holds 9"},
      {file_of(R"({"x":{"dtype":"F31","shape":[2],"data_offsets":[0,8]}})", eight), "unknown dtype \"F31\""},
      {file_of(R"({"x":{"dtype":"F32","shape":[3],"data_offsets":[0,8]}})", eight), "need 12 bytes"},
      {file_of(R"({"x":{"dtype":"F32","shape":[-2],"data_offsets":[0,8]}})", eight), "expected a non-negative integer"},
      {file_of(R"({"x":{"dtype":"F32","shape":[2.0],"data_offsets":[0,8]}})", eight), "fraction or exponent"},
      {file_of(R"({"x":{"dtype":"F32","shape":[2],"data_offsets":[0]}})", eight), "has 1 data_offsets; expected 2"},
      {file_of(R"({"x":{"dtype":"F32","shape":[2],"data_offsets":[8,0]}})", eight), "end before they begin"},
      {file_of(R"({"x":{"dtype":"F32","shape":[2]}})", eight), "lacks \"data_offsets\""},
      {file_of(R"({"x":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},"x":{"dtype":"F32","shape":[0],"data_offsets":[8,8]}})", eight),
       "the tensor \"x\" twice"},
      {file_of(R"({"x":{"dtype":"F32","shape":[1],"data_offsets":[0,4]},"y":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}})", eight),
       "without gaps or overlaps"},
      {file_of(R"({"x":{"dtype":"F32","shape":[99999999999,99999999999,99999999999],"data_offsets":[0,8]}})", eight),
       "more elements than 64 bits count"},
      {file_of(R"({"x":{"dtype":"F32","shape":[2],"data_offsets":[0,99999999999999999999]}})", eight), "over 64 bits"},
      {file_of(R"({"__metadata__":{"k":1}})"), "is not a string"},
      {file_of(R"({"__metadata__":{"k":"\ud800"}})"), "high surrogate without its low surrogate"},
      {file_of("{\"__metadata__\":{\"k\":\"\x01\"}}"), "control character"},
      {file_of("{\"k\xff\":1}"), "not valid UTF-8"},
      {file_of("{" + f32 + "} x", eight), "text after the header's closing '}'"},
      {file_of("{" + f32, eight), "the header ends early"},
      {file_of(R"({"x":{"dtype":"F32","shape":[2],"data_offsets":[0,8],"more":)" + std::string(70, '[') +
                   std::string(70, ']') + "}}",
               eight),
       "nesting deeper than 64"},
      {file_of(R"({"x":{"dtype":"F6_E2M3","shape":[4],"data_offsets":[0,3]}})", std::string(3, '\0')),
       "has no type for"},
  };
  for (const auto& [bytes, expected] : cases) {
    CAPTURE(expected);
    const std::string error = load_error(bytes);
    CHECK(error.find(expected) != std::string::npos);
    CHECK(error.find("bad.safetensors") != std::string::npos);
  }
  // What a conforming JSON reader accepts is accepted: whitespace, escapes, unknown members, null metadata.
  volt_test::TempDir dir;
  write_bytes(dir.path / "ok.safetensors",
              file_of("{\n\t\"__metadata__\" : null , \"\\u00e9\\ud83d\\ude00\" : {\"extra\": [1, {\"a\": -2.5e3}, null, true],"
                      " \"dtype\":\"U8\", \"shape\" : [ ], \"data_offsets\":[0 , 1] } } \r\n",
                      "\x07"));
  const auto file = volt::load_safetensors(dir.path / "ok.safetensors");
  REQUIRE(file.tensors.size() == 1);
  CHECK(file.tensors.keys()[0] == "\xc3\xa9\xf0\x9f\x98\x80");
  CHECK(file.tensors.values()[0].item<int>() == 7);
  CHECK(file.metadata.empty());
}

TEST_CASE("save_safetensors: clear errors for what the format cannot hold; a failed write keeps the old file") {
  volt_test::TempDir dir;
  volt::StateDict weights;
  weights.insert("x", torch::ones({2}));
  const auto path = dir.path / "w.safetensors";
  volt::save_safetensors(weights, path);
  const std::string before = read_bytes(path);

  volt::StateDict complex128;
  complex128.insert("z", torch::zeros({2}, torch::kComplexDouble));
  CHECK_THROWS_WITH_AS(volt::save_safetensors(complex128, path),
                       doctest::Contains("the tensor \"z\" has the dtype ComplexDouble, which the safetensors format "
                                         "has no name for"),
                       std::invalid_argument);
  volt::StateDict undefined;
  undefined.insert("u", torch::Tensor());
  CHECK_THROWS_WITH_AS(volt::save_safetensors(undefined, path), doctest::Contains("\"u\" is undefined"),
                       std::invalid_argument);
  volt::StateDict reserved;
  reserved.insert("__metadata__", torch::ones({1}));
  CHECK_THROWS_AS(volt::save_safetensors(reserved, path), std::invalid_argument);
  CHECK_THROWS_AS(volt::save_safetensors(weights, path, {{"k", "\xff"}}), std::invalid_argument);
  CHECK(read_bytes(path) == before);

  // The target is a folder: the rename fails, the temporary file is removed.
  std::filesystem::create_directories(dir.path / "folder.safetensors" / "inside");
  CHECK_THROWS_WITH_AS(volt::save_safetensors(weights, dir.path / "folder.safetensors"),
                       doctest::Contains("could not rename the new safetensors file over"), volt::SafetensorsError);
  int leftovers = 0;
  for (const auto& entry : std::filesystem::directory_iterator(dir.path)) {
    leftovers += entry.path().filename().string().find(".tmp") != std::string::npos;
  }
  CHECK(leftovers == 0);
  CHECK_THROWS_WITH_AS(volt::load_safetensors(dir.path / "missing.safetensors"),
                       doctest::Contains("could not read the safetensors file"), volt::SafetensorsError);
}

TEST_CASE("ModelCheckpoint export_safetensors writes the best checkpoint's weights to best.safetensors") {
  volt_test::TempDir dir;
  auto model = std::make_shared<volt_test::CountingModel>();
  model->val_metric_by_epoch = {1.0, 3.0, 2.0};  // the best is epoch 1, then the model keeps training
  auto options = volt_test::quiet_options(dir);
  options.max_epochs = 3;
  options.num_sanity_val_steps = 0;
  options.enable_checkpointing = true;
  volt::Trainer<volt::CPU> trainer(options, volt::ModelCheckpoint{{.dirpath = dir.path / "ckpt", .monitor = "val_score",
                                                                   .mode = "max", .export_safetensors = true}});
  trainer.fit(model, volt_test::make_batches(5), volt_test::make_batches(1));
  const auto file = volt::load_safetensors(dir.path / "ckpt" / volt::ModelCheckpoint::name_best_safetensors);
  CHECK(file.metadata == volt::SafetensorsMetadata{{"format", "pt"}, {"checkpoint", "epoch=1-step=10.ckpt"},
                                                   {"epoch", "1"}, {"step", "10"}, {"monitor", "val_score"},
                                                   {"score", "3"}});
  // The weights are those of the best checkpoint, not of the model at the end of training.
  auto from_checkpoint = std::make_shared<volt_test::CountingModel>();
  volt::load_checkpoint_weights(*from_checkpoint, dir.path / "ckpt" / "epoch=1-step=10.ckpt");
  const auto expected = volt::state_dict(from_checkpoint);
  REQUIRE(file.tensors.size() == expected.size());
  bool differs_from_final = false;
  for (const auto& item : expected) {
    CAPTURE(item.key());
    CHECK(torch::equal(file.tensors[item.key()], item.value()));
    differs_from_final |= !torch::equal(file.tensors[item.key()], volt::state_dict(model)[item.key()]);
  }
  CHECK(differs_from_final);
}

TEST_CASE("safetensors on CUDA: tensors saved from the GPU, loaded onto it (skipped without a GPU)") {
  if (!torch::cuda::is_available()) {
    MESSAGE("skipped: no CUDA device (torch::cuda::is_available() is false)");
    return;
  }
  volt_test::TempDir dir;
  volt::StateDict weights;
  weights.insert("w", torch::randn({64, 32}, torch::kCUDA));
  weights.insert("h", torch::randn({7}, torch::kCUDA).to(torch::kHalf));
  volt::save_safetensors(weights, dir.path / "gpu.safetensors");
  const auto file = volt::load_safetensors(dir.path / "gpu.safetensors", {.device = torch::kCUDA});
  for (const auto& item : weights) {
    CAPTURE(item.key());
    CHECK(file.tensors[item.key()].is_cuda());
    CHECK(torch::equal(file.tensors[item.key()], item.value()));
  }
  auto model = std::make_shared<Net>();
  model->to(torch::kCUDA);
  volt::save_safetensors(model, dir.path / "net.safetensors");
  auto copy = std::make_shared<Net>();
  copy->to(torch::kCUDA);
  volt::load_safetensors(copy, dir.path / "net.safetensors");
  for (const auto& item : volt::state_dict(model)) CHECK(torch::equal(volt::state_dict(copy)[item.key()], item.value()));
}
