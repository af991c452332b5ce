#include "test_common.hpp"

#include "reliability/legacy_checkpoint.hpp"
#include "trainer/trainer_fixtures.hpp"

#include <caffe2/serialize/inline_container.h>

#include <cmath>
#include <fstream>
#include <iterator>
#include <sstream>
#include <string>
#include <vector>

using volt_test::TempDir;
using volt_test::read_bytes;
using volt_test::write_bytes;
using volt_test::quiet_options;

namespace {

/// A fit of one epoch that writes last.ckpt into `folder`.
std::shared_ptr<volt_test::Classifier> fit_with_last(const TempDir& dir, const std::filesystem::path& folder) {
  torch::manual_seed(3);
  auto model = std::make_shared<volt_test::Classifier>();
  auto options = quiet_options(dir);
  options.max_epochs = 1;
  options.enable_checkpointing = true;
  volt::Trainer<volt::CPU> trainer(options, volt::ModelCheckpoint{{.dirpath = folder, .save_top_k = 0, .save_last = true}});
  trainer.fit(model, volt_test::make_classification_batches(3, 4));
  return model;
}

const volt::detail::pickle::Value* entry(const volt::detail::pickle::Value& dict, std::string_view key) {
  for (const auto& [name, value] : std::get<volt::detail::pickle::Dict>(dict.data).items) {
    if (std::get<std::string>(name->data) == key) return value.get();
  }
  return nullptr;
}

/// A zip archive in torch.save's layout holding the pickle `pickle` and no storage.
std::string torch_save_file(const std::string& pickle) {
  std::string bytes;
  caffe2::serialize::PyTorchStreamWriter writer([&bytes](const void* data, std::size_t size) -> std::size_t {
    bytes.append(static_cast<const char*>(data), size);
    return size;
  });
  writer.writeRecord("data.pkl", pickle.data(), pickle.size());
  writer.writeRecord("byteorder", "little", 6);
  writer.writeEndOfFile();
  return bytes;
}

}  // namespace

TEST_CASE("a Trainer checkpoint is a torch.save file laid out as Lightning's checkpoint dict") {
  TempDir dir;
  const auto model = fit_with_last(dir, dir.path / "ckpt");
  const std::string bytes = read_bytes(dir.path / "ckpt" / "last.ckpt");
  const auto entries = volt::detail::read_zip_entries(bytes, "last.ckpt");
  REQUIRE(volt::detail::is_torch_save_file(entries));
  for (const auto& item : entries) {
    CAPTURE(item.name);
    CHECK(item.name.find("/code/") == std::string::npos);       // no TorchScript source
    CHECK(item.name.find("constants.pkl") == std::string::npos);  // not a LibTorch archive
    CHECK_FALSE(item.deflated);
  }
  // The strict reader (no object of another class allowed) reads the whole file.
  const auto loaded = volt::detail::torch_load_entries(entries, "last.ckpt", /*lenient=*/false);
  const auto& root = *loaded.root;
  for (const char* key : {"epoch", "global_step", "volt_version", "state_dict", "loops", "optimizer_states",
                          "lr_schedulers", "callbacks", "volt"}) {
    CAPTURE(key);
    CHECK(entry(root, key) != nullptr);
  }
  CHECK(std::get<std::int64_t>(entry(root, "global_step")->data) == 3);
  CHECK(std::get<std::int64_t>(entry(*entry(root, "volt"), "format")->data) == 2);
  // state_dict: Python's dotted names in state_dict() order, the model's values.
  const auto& state = std::get<volt::detail::pickle::Dict>(entry(root, "state_dict")->data);
  CHECK(state.ordered);
  const auto expected = volt::state_dict(model);
  REQUIRE(state.items.size() == expected.size());
  std::size_t i = 0;
  for (const auto& item : expected) {
    CHECK(std::get<std::string>(state.items[i].first->data) == item.key());
    CHECK(torch::equal(std::get<torch::Tensor>(state.items[i].second->data), item.value()));
    ++i;
  }
  // volt::load_weights reads a checkpoint's state_dict too.
  const auto weights = volt::load_weights(dir.path / "ckpt" / "last.ckpt");
  CHECK(weights.size() == expected.size());
}

TEST_CASE("every kind of archive entry survives a checkpoint file: numbers, NaN, strings, typed empty lists, tuples, nested archives, parameters, buffers, channels-last strides") {
  TempDir dir;
  torch::serialize::OutputArchive out;
  out.write("volt/format", c10::IValue(std::int64_t{1}));
  out.write("count", c10::IValue(std::int64_t{-(std::int64_t{1} << 40)}));
  out.write("score", c10::IValue(std::nan("")));
  out.write("flag", c10::IValue(false));
  out.write("name", c10::IValue(std::string("ModelCheckpoint{'monitor': None}/0 \xc3\xa9")));
  out.write("none", c10::IValue());
  out.write("empty_floats", c10::IValue(c10::List<double>()));
  out.write("empty_strings", c10::IValue(c10::List<std::string>()));
  out.write("strings", c10::IValue(c10::List<std::string>({"a", "b"})));
  out.write("betas", c10::IValue(std::make_tuple(0.9, 0.999)));
  torch::serialize::OutputArchive nested;
  nested.write("weight", torch::arange(6, torch::kFloat).reshape({2, 3}));
  nested.write("running", torch::ones({2}, torch::kDouble), /*is_buffer=*/true);
  nested.write("inner_empty", c10::IValue(c10::List<std::int64_t>()));
  out.write("callbacks/Thing/0", nested);
  const auto channels_last = torch::arange(2 * 3 * 4 * 5, torch::kFloat).reshape({2, 3, 4, 5}).contiguous(
      at::MemoryFormat::ChannelsLast);
  out.write("image", channels_last, /*is_buffer=*/true);
  const auto path = dir.path / "all.ckpt";
  volt::detail::save_archive_atomically(out, path);

  torch::serialize::InputArchive in;
  volt::detail::load_archive(in, path, torch::kCPU);
  c10::IValue value;
  REQUIRE(in.try_read("count", value));
  CHECK(value.toInt() == -(std::int64_t{1} << 40));
  REQUIRE(in.try_read("score", value));
  CHECK(std::isnan(value.toDouble()));
  REQUIRE(in.try_read("flag", value));
  CHECK(value.isBool());
  CHECK_FALSE(value.toBool());
  REQUIRE(in.try_read("name", value));
  CHECK(value.toStringRef() == "ModelCheckpoint{'monitor': None}/0 \xc3\xa9");
  REQUIRE(in.try_read("none", value));
  CHECK(value.isNone());
  REQUIRE(in.try_read("empty_floats", value));
  CHECK(value.isDoubleList());
  CHECK(value.toDoubleList().empty());
  REQUIRE(in.try_read("empty_strings", value));
  CHECK(value.isList());
  CHECK(value.toList().elementType()->str() == "str");
  REQUIRE(in.try_read("strings", value));
  CHECK(value.toList().size() == 2);
  REQUIRE(in.try_read("betas", value));
  REQUIRE(value.isTuple());
  CHECK(value.toTupleRef().elements()[1].toDouble() == 0.999);
  torch::serialize::InputArchive inner;
  REQUIRE(in.try_read("callbacks/Thing/0", inner));
  torch::Tensor weight;
  torch::Tensor running;
  CHECK(inner.try_read("weight", weight, /*is_buffer=*/false));  // a parameter stays a parameter
  CHECK(torch::equal(weight, torch::arange(6, torch::kFloat).reshape({2, 3})));
  CHECK(inner.try_read("running", running, /*is_buffer=*/true));
  CHECK((running.scalar_type() == torch::kDouble));
  REQUIRE(inner.try_read("inner_empty", value));
  CHECK(value.isIntList());
  torch::Tensor image;
  REQUIRE(in.try_read("image", image, /*is_buffer=*/true));
  CHECK(torch::equal(image, channels_last));
  CHECK(image.is_contiguous(at::MemoryFormat::ChannelsLast));
}

TEST_CASE("the checkpoint reader rebuilds no object: a pickle calling os.system is refused, never run") {
  TempDir dir;
  const auto marker = dir.path / "ran";
  volt::detail::pickle::Writer pickle;
  pickle.empty_dict();
  pickle.mark();
  pickle.string("volt");
  pickle.empty_dict();
  pickle.mark();
  pickle.string("format");
  pickle.integer(2);
  pickle.string("layout");
  pickle.string("trainer");
  pickle.setitems();
  pickle.string("state_dict");
  pickle.global("os", "system");
  pickle.mark();
  pickle.string("touch " + marker.string());
  pickle.tuple();
  pickle.reduce();
  pickle.setitems();
  pickle.stop();
  const auto path = dir.path / "evil.ckpt";
  write_bytes(path, torch_save_file(pickle.bytes()));
  auto model = std::make_shared<volt_test::Classifier>();
  volt::Trainer<volt::CPU> trainer(quiet_options(dir));
  VOLT_CHECK_THROWS_CONTAINS(trainer.fit(model, volt_test::make_classification_batches(3, 4), path),
                             volt::CheckpointError, "evil.ckpt is not a readable checkpoint: 'state_dict' is not a dict");
  VOLT_CHECK_THROWS_CONTAINS(volt::load_weights(path), std::runtime_error, "not a string -> tensor pair");
  // The strict reader names the callable.
  const std::string bytes = read_bytes(path);
  const auto entries = volt::detail::read_zip_entries(bytes, "evil.ckpt");
  VOLT_CHECK_THROWS_CONTAINS(volt::detail::torch_load_entries(entries, "evil.ckpt", /*lenient=*/false),
                             volt::CheckpointError, "unsupported callable os.system");
  CHECK_FALSE(std::filesystem::exists(marker));
}

TEST_CASE("a tensor that reaches past its storage, or holds more elements than it, is refused") {
  for (const auto& [sizes, strides, offset] :
       std::vector<std::tuple<std::vector<std::int64_t>, std::vector<std::int64_t>, std::int64_t>>{
           {{5}, {1}, 0}, {{2}, {1}, 3}, {{4, 4}, {0, 0}, 0}, {{-1}, {1}, 0}, {{1LL << 62, 4}, {4, 1LL << 62}, 0}}) {
    volt::detail::pickle::Writer pickle;
    pickle.global("torch._utils", "_rebuild_tensor_v2");
    pickle.mark();
    pickle.mark();
    pickle.string("storage");
    pickle.global("torch", "FloatStorage");
    pickle.string("0");
    pickle.string("cpu");
    pickle.integer(4);
    pickle.tuple();
    pickle.persistent_id();
    pickle.integer(offset);
    pickle.int_tuple(sizes);
    pickle.int_tuple(strides);
    pickle.false_();
    pickle.global("collections", "OrderedDict");
    pickle.empty_tuple();
    pickle.reduce();
    pickle.tuple();
    pickle.reduce();
    pickle.stop();
    std::string bytes;
    {
      caffe2::serialize::PyTorchStreamWriter writer([&bytes](const void* data, std::size_t size) -> std::size_t {
        bytes.append(static_cast<const char*>(data), size);
        return size;
      });
      writer.writeRecord("data.pkl", pickle.bytes().data(), pickle.bytes().size());
      const std::vector<float> storage(4, 1.0F);
      writer.writeRecord("data/0", storage.data(), storage.size() * sizeof(float));
      writer.writeEndOfFile();
    }
    const auto entries = volt::detail::read_zip_entries(bytes, "bad.pt");
    CAPTURE(sizes.front());
    CAPTURE(offset);
    CHECK_THROWS_AS(volt::detail::torch_load_entries(entries, "bad.pt"), volt::CheckpointError);
  }
}

namespace {
/// A callback with state: the count it loads from a checkpoint.
struct StateCounter {
  std::shared_ptr<std::int64_t> loaded = std::make_shared<std::int64_t>(-1);
  void save_state(torch::serialize::OutputArchive& archive) const { archive.write("count", c10::IValue(std::int64_t{42})); }
  void load_state(torch::serialize::InputArchive& archive) {
    c10::IValue value;
    archive.read("count", value);
    *loaded = value.toInt();
  }
};
}  // namespace

TEST_CASE("a checkpoint of volt's earlier format (a LibTorch archive) still resumes, with a deprecation warning") {
  TempDir dir;
  {
    torch::manual_seed(3);
    auto model = std::make_shared<volt_test::Classifier>();
    auto options = quiet_options(dir);
    options.max_epochs = 1;
    volt::Trainer<volt::CPU> trainer(options, StateCounter{});
    trainer.fit(model, volt_test::make_classification_batches(3, 4));
    trainer.save_checkpoint(dir.path / "current.ckpt");
  }
  // The same checkpoint written as a LibTorch archive, as volt wrote checkpoints before, with the callback's
  // entry under its mangled type name as then.
  const std::string readable = "callbacks/" + c10::demangle(typeid(StateCounter).name()) + "/0";
  const std::string mangled = std::string("callbacks/") + typeid(StateCounter).name() + "/0";
  {
    const auto loaded = volt::detail::torch_load_entries(
        volt::detail::read_zip_entries(read_bytes(dir.path / "current.ckpt"), "current.ckpt"), "current.ckpt");
    CHECK(entry(*entry(*loaded.root, "callbacks"), readable.substr(10)) != nullptr);
  }
  const auto path = dir.path / "old.ckpt";
  volt_test::write_legacy_checkpoint(dir.path / "current.ckpt", path, {{readable, mangled}});
  {
    const std::string bytes = read_bytes(path);
    CHECK_FALSE(volt::detail::is_torch_save_file(volt::detail::read_zip_entries(bytes, "old.ckpt")));
  }
  volt_test::CaptureLog log;
  auto model = std::make_shared<volt_test::Classifier>();
  auto options = quiet_options(dir);
  options.max_epochs = 2;
  volt::Trainer<volt::CPU> trainer(options, StateCounter{});
  trainer.fit(model, volt_test::make_classification_batches(3, 4), path);
  CHECK(trainer.global_step() == 6);
  CHECK(*trainer.callback<StateCounter>()->loaded == 42);  // found under the earlier key
  CHECK(log.warned("old.ckpt is a checkpoint in volt's earlier format (a LibTorch archive)"));
}
