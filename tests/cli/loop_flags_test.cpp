// --overfit-batches and --reload-dataloaders-every-n-epochs, and the reserved names of the config-file flags.
#include "test_common.hpp"

#include <string>
#include <vector>

namespace {

volt::cli::Args parse(const std::vector<std::string>& flags, const volt::cli::Parser& parser = volt::cli::Parser("prog")) {
  std::vector<const char*> argv = {"prog"};
  for (const auto& flag : flags) argv.push_back(flag.c_str());
  return parser.parse(static_cast<int>(argv.size()), argv.data());
}

std::string refusal(const std::vector<std::string>& flags) {
  try {
    (void)parse(flags);
  } catch (const volt::cli::UsageError& error) {
    return error.what();
  }
  return "(accepted)";
}

}  // namespace

TEST_CASE("cli: --overfit-batches follows Lightning's int-or-float rule and reaches TrainerOptions") {
  const auto defaults = parse({});
  CHECK(defaults.overfit_batches.is_fraction());
  CHECK(defaults.overfit_batches.fraction() == 0.0);
  CHECK(defaults.trainer_options().overfit_batches.fraction() == 0.0);

  const auto count = parse({"--overfit-batches", "10"});
  REQUIRE_FALSE(count.overfit_batches.is_fraction());
  CHECK(count.overfit_batches.count() == 10);
  CHECK(count.trainer_options().overfit_batches.count() == 10);

  const auto fraction = parse({"--overfit-batches=0.25"});
  REQUIRE(fraction.overfit_batches.is_fraction());
  CHECK(fraction.trainer_options().overfit_batches.fraction() == 0.25);
  // "1" is one batch, "1.0" the whole epoch; a whole float above 1 is a count (Lightning: 3.0 -> 3).
  CHECK(parse({"--overfit-batches", "1"}).overfit_batches.count() == 1);
  CHECK(parse({"--overfit-batches", "1.0"}).overfit_batches.is_whole_epoch());
  const auto whole = parse({"--overfit-batches", "3.0"});
  REQUIRE_FALSE(whole.overfit_batches.is_fraction());
  CHECK(whole.overfit_batches.count() == 3);

  CHECK(refusal({"--overfit-batches", "1.5"}) ==
        "argument --overfit-batches: You have passed invalid value 1.5 for overfit_batches, it has to be in "
        "[0.0, 1.0] or an int.");
  CHECK(refusal({"--overfit-batches", "-2"}) ==
        "argument --overfit-batches: You have passed invalid value -2 for overfit_batches, it has to be in "
        "[0.0, 1.0] or an int.");
  CHECK(refusal({"--overfit-batches", "many"}) ==
        "argument --overfit-batches: expected an int (a number of batches) or a float with a '.' (a fraction of "
        "the epoch), got 'many'");
  CHECK(refusal({"--overfit-batches", "1e-3"}).find("got '1e-3'") != std::string::npos);  // int("1e-3") fails
  CHECK(refusal({"--overfit-batches", "nan."}).find("got 'nan.'") != std::string::npos);
  CHECK(refusal({"--overfit-batches"}) == "argument --overfit-batches: expected one argument");
}

TEST_CASE("cli: --reload-dataloaders-every-n-epochs takes an int >= 0 into TrainerOptions") {
  CHECK(parse({}).reload_dataloaders_every_n_epochs == 0);
  const auto args = parse({"--reload-dataloaders-every-n-epochs", "2"});
  CHECK(args.reload_dataloaders_every_n_epochs == 2);
  CHECK(args.trainer_options().reload_dataloaders_every_n_epochs == 2);
  CHECK(refusal({"--reload-dataloaders-every-n-epochs=-1"}) ==
        "argument --reload-dataloaders-every-n-epochs: `reload_dataloaders_every_n_epochs` should be an int >= 0, "
        "got -1.");
  CHECK(refusal({"--reload-dataloaders-every-n-epochs", "0.5"}) ==
        "argument --reload-dataloaders-every-n-epochs: expected an int >= 0, got '0.5'");
}

TEST_CASE("cli: the help lists the new flags with their defaults") {
  volt::cli::Parser parser("prog");
  parser.defaults().overfit_batches = 4;
  parser.defaults().reload_dataloaders_every_n_epochs = 3;
  const std::string help = parser.help();
  CHECK(help.find("--overfit-batches N|F") != std::string::npos);
  CHECK(help.find("default 4 (train and validate") != std::string::npos);
  CHECK(help.find("--reload-dataloaders-every-n-epochs N") != std::string::npos);
  CHECK(help.find("default 3 (make new loaders") != std::string::npos);
  CHECK(help.find("--config FILE") != std::string::npos);
  CHECK(help.find("--print-config") != std::string::npos);
}

TEST_CASE("cli: program flags cannot take reserved names or another flag's config key") {
  volt::cli::Parser parser("prog");
  for (const char* name : {"--config", "--print-config", "--overfit-batches", "--reload-dataloaders-every-n-epochs"}) {
    CAPTURE(name);
    CHECK_THROWS_AS(parser.add_option(name, "X", "taken"), std::invalid_argument);
  }
  parser.add_option("--data-dir", "DIR", "data");
  CHECK_THROWS_WITH_AS(parser.add_switch("--data_dir", "same key"),
                       "volt::cli: the flag --data_dir has the config key model.data_dir of the flag --data-dir",
                       std::invalid_argument);
  parser.config_section("data");
  parser.add_option("--data_dir", "DIR", "another section, another key");
  CHECK_THROWS_AS(parser.add_option("--batch_size", "N", "data.batch_size is --batch-size's"), std::invalid_argument);
  CHECK_THROWS_AS(parser.config_section("trainer"), std::invalid_argument);
  CHECK_THROWS_AS(parser.config_section("my-section"), std::invalid_argument);
  CHECK_THROWS_AS(parser.config_section(""), std::invalid_argument);
}
