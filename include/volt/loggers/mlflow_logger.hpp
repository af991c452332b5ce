/// \file
/// volt::MLFlowLogger: runs, parameters, metrics and artifacts on an MLflow tracking server, over MLflow's REST
/// API (Lightning's MLFlowLogger with a tracking URI). Optional: only programs that include this header need
/// libcurl (Debian: libcurl4-openssl-dev; link with -lcurl or CMake's CURL::libcurl); <volt/volt.hpp> does not
/// include it.
///
/// A server that is down, slow or answers with an error never stops training: each request is retried with
/// exponential backoff, then kept in a queue (oldest dropped beyond `max_pending` requests); the server is not
/// contacted again for a pause that doubles with each failed round (up to `max_pause_s`), so a slow server
/// costs training at most one round of attempts per pause. The first failure is logged once as a warning, and
/// finalize() tries once more and says how many requests were lost if the server never came back.
#pragma once

#include <volt/core/log.hpp>
#include <volt/core/python_format.hpp>
#include <volt/loggers/detail/mlflow_http.hpp>
#include <volt/loggers/logger.hpp>

#include <curl/curl.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <deque>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <optional>
#include <sstream>
#include <stdexcept>
#include <string>
#include <string_view>
#include <system_error>
#include <thread>
#include <tuple>
#include <utility>
#include <vector>

namespace volt {

/// Which checkpoints MLFlowLogger uploads as artifacts (Lightning's log_model: False, True, "all").
enum class LogModel {
  off,  ///< none (Lightning's False, the default)
  on,   ///< those ModelCheckpoint keeps (best, top-k, last), at the end of the run; every save when save_top_k == -1
  all,  ///< each checkpoint right after it is saved
};

/// The options of volt::MLFlowLogger (Lightning's MLFlowLogger arguments that apply to a tracking server).
struct MLFlowLoggerOptions {
  /// The experiment; created on the server when it does not exist.
  std::string experiment_name = "lightning_logs";
  /// The run's name (the `mlflow.runName` tag); empty: the server picks one.
  std::string run_name{};
  /// The server, e.g. "http://127.0.0.1:5000"; empty: the MLFLOW_TRACKING_URI environment variable, else
  /// "http://127.0.0.1:5000".
  std::string tracking_uri{};
  /// Tags set on the run when it is created.
  std::map<std::string, std::string> tags{};
  /// Prepended to every metric name with "-" (Lightning's prefix).
  std::string prefix{};
  /// Continue this run instead of creating one (Lightning's run_id).
  std::string run_id{};
  /// Where a new experiment keeps its artifacts (empty: the server's default).
  std::string artifact_location{};
  /// Checkpoints of ModelCheckpoint uploaded as artifacts (Lightning's log_model): each under
  /// `<file stem>/` with `metadata.yaml` (its score, file name and the callback's options) and `aliases.txt`.
  LogModel log_model = LogModel::off;
  /// Seconds one request may take before it counts as failed.
  double request_timeout_s = 10.0;
  /// Attempts per request before it is queued (the waits between them double from retry_backoff_s).
  int max_attempts = 3;
  /// The first wait between attempts, in seconds.
  double retry_backoff_s = 0.2;
  /// Requests kept while the server is unreachable (the oldest are dropped beyond this).
  std::size_t max_pending = 10000;
  /// The longest pause, in seconds, between rounds of attempts while the server keeps failing.
  double max_pause_s = 60.0;
};

/// Logs to an MLflow tracking server: creates (or continues) a run in the experiment on the first call,
/// sends hyperparameters as params, metrics with their steps, artifacts, and at finalize the run's status
/// (FINISHED for "success", FAILED otherwise). Not thread-safe; the Trainer calls it on global rank zero.
/// Never throws for server failures (see the file comment); throws std::runtime_error for a local artifact
/// file that cannot be read.
class MLFlowLogger : public Logger {
 public:
  /// Keeps the options; contacts the server on the first call.
  explicit MLFlowLogger(MLFlowLoggerOptions options = {}) : options_(std::move(options)) {
    if (options_.tracking_uri.empty()) {
      const char* from_environment = std::getenv("MLFLOW_TRACKING_URI");
      options_.tracking_uri = from_environment != nullptr && *from_environment != '\0' ? from_environment
                                                                                       : "http://127.0.0.1:5000";
    }
    while (!options_.tracking_uri.empty() && options_.tracking_uri.back() == '/') options_.tracking_uri.pop_back();
    run_id_ = options_.run_id;
  }

  /// The run's id (empty until the server created it).
  const std::string& run_id() const { return run_id_; }
  /// The experiment's id (empty until known).
  const std::string& experiment_id() const { return experiment_id_; }
  /// Requests that failed and wait in the queue.
  std::size_t pending() const { return pending_.size(); }

  /// A local folder for files of the run: `./mlruns/<experiment id>/<run id>` (nothing is written there).
  std::filesystem::path log_dir() const override {
    return std::filesystem::path("mlruns") / (experiment_id_.empty() ? "0" : experiment_id_) / run_id_;
  }

  /// Sends the hyperparameters as the run's params (at most 100 per request, as the server allows).
  void log_hyperparams(const std::map<std::string, std::string>& params) override {
    std::vector<std::string> entries;
    for (const auto& [key, value] : params) {
      entries.push_back("{\"key\":" + detail::mlflow::json_string(key) + ",\"value\":" +
                        detail::mlflow::json_string(value.substr(0, 6000)) + "}");
    }
    for (std::size_t at = 0; at < entries.size(); at += 100) {
      std::string list;
      for (std::size_t i = at; i < std::min(entries.size(), at + 100); ++i) list += (i > at ? "," : "") + entries[i];
      enqueue("runs/log-batch", "{\"params\":[" + list + "]}");
    }
    flush();
  }

  /// Sends the metrics at `step` with the current time (names prefixed as Lightning does).
  void log_metrics(const std::map<std::string, double>& metrics, std::int64_t step) override {
    if (metrics.empty()) return;
    const auto timestamp = std::to_string(detail::mlflow::now_ms());
    std::string list;
    for (const auto& [key, value] : metrics) {
      std::ostringstream number;
      number.precision(17);
      number << value;
      const std::string name = options_.prefix.empty() ? key : options_.prefix + "-" + key;
      list += (list.empty() ? "" : ",") + std::string("{\"key\":") + detail::mlflow::json_string(name) +
              ",\"value\":" + (value == value && value - value == 0.0 ? number.str() : "\"NaN\"") +
              ",\"timestamp\":" + timestamp + ",\"step\":" + std::to_string(step) + "}";
    }
    enqueue("runs/log-batch", "{\"metrics\":[" + list + "]}");
    flush();
  }

  /// Uploads the file at `local_path` as the artifact `<artifact_dir>/<file name>` of the run (the server must
  /// serve artifacts: `mlflow server`'s default). Retried like every request; a failure is a warning.
  void log_artifact(const std::filesystem::path& local_path, const std::string& artifact_dir = "") {
    std::ifstream in(local_path, std::ios::binary);
    if (!in) throw std::runtime_error("volt: MLFlowLogger cannot read the artifact " + local_path.string());
    std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    const std::string name = (artifact_dir.empty() ? "" : artifact_dir + "/") + local_path.filename().string();
    if (!ensure_run()) return warn("the artifact " + name + " was not uploaded");
    const auto root = artifact_uri_.rfind("mlflow-artifacts:", 0) == 0 ? artifact_uri_.substr(17) : std::string();
    if (root.empty()) return warn("the run's artifact store (" + artifact_uri_ + ") is not served by the server");
    const auto response = send("PUT", options_.tracking_uri + "/api/2.0/mlflow-artifacts/artifacts" + root + "/" + name,
                               bytes, "Content-Type: application/octet-stream");
    if (response.status != 200) warn("uploading the artifact " + name + " failed: " + describe(response));
  }

  /// Sends the queued requests (called by each log call).
  void save() override { flush(); }

  /// After ModelCheckpoint saved: uploads the checkpoints not uploaded yet (log_model all, or on with
  /// save_top_k == -1), or remembers them for finalize (on).
  void after_save_checkpoint(const SavedCheckpoints& checkpoints) override {
    if (options_.log_model == LogModel::all || (options_.log_model == LogModel::on && checkpoints.save_top_k == -1)) {
      upload_checkpoints(checkpoints);
    } else if (options_.log_model == LogModel::on) {
      to_upload_ = checkpoints;
    }
  }

  /// Sends what is queued and ends the run: FINISHED for "success", FAILED for "failed", KILLED otherwise
  /// (Lightning's statuses). Warns with the number of requests lost when the server stayed unreachable.
  void finalize(const std::string& status) override {
    if (to_upload_) upload_checkpoints(*std::exchange(to_upload_, std::nullopt));
    const std::string state = status == "success" ? "FINISHED" : status == "failed" ? "FAILED" : "KILLED";
    enqueue("runs/update", "{\"status\":\"" + state + "\",\"end_time\":" + std::to_string(detail::mlflow::now_ms()) + "}");
    pause_until_ = {};
    flush();
    if (!pending_.empty()) {
      log::warn_rank_zero("volt: MLFlowLogger: " + std::to_string(pending_.size()) + " request(s) to " +
                          options_.tracking_uri + " could not be sent and are lost");
      pending_.clear();
    }
  }

 private:
  /// Lightning's _scan_and_log_checkpoints: the last, best and top-k checkpoints that exist, oldest first, that
  /// were not uploaded since they were last written; each with its metadata.yaml and aliases.txt.
  void upload_checkpoints(const SavedCheckpoints& checkpoints) {
    struct Candidate {
      std::optional<double> score;
    };
    std::map<std::filesystem::path, Candidate> candidates;
    if (!checkpoints.last_model_path.empty()) candidates[checkpoints.last_model_path] = {checkpoints.current_score};
    if (!checkpoints.best_model_path.empty()) candidates[checkpoints.best_model_path] = {checkpoints.best_model_score};
    for (const auto& [path, score] : checkpoints.best_k_models) candidates[path] = {score};
    std::vector<std::tuple<std::filesystem::file_time_type, std::filesystem::path, std::optional<double>>> found;
    for (const auto& [path, candidate] : candidates) {
      std::error_code error;
      if (!std::filesystem::is_regular_file(path, error)) continue;
      const auto written = std::filesystem::last_write_time(path, error);
      if (error) continue;
      if (const auto it = uploaded_.find(path); it != uploaded_.end() && it->second >= written) continue;
      found.emplace_back(written, path, candidate.score);
    }
    std::sort(found.begin(), found.end());
    for (const auto& [written, path, score] : found) {
      const std::string folder = path.stem().string();
      log_artifact(path, folder);
      const auto scratch = std::filesystem::temp_directory_path() / ("volt-mlflow-" + std::to_string(detail::mlflow::now_ms()) + "-" + std::to_string(uploaded_.size()));
      std::filesystem::create_directories(scratch);
      std::ofstream(scratch / "metadata.yaml") << checkpoint_metadata(checkpoints, path, score);
      std::ofstream(scratch / "aliases.txt")
          << (path == checkpoints.best_model_path ? "['latest', 'best']" : "['latest']");
      log_artifact(scratch / "metadata.yaml", folder);
      log_artifact(scratch / "aliases.txt", folder);
      // Not std::filesystem::remove_all: the torch 2.11 wheel's libtorch.so exports its own copy, which crashes
      // (a null call inside it) in programs that link libtorch.
      std::error_code ignored;
      for (const char* name : {"metadata.yaml", "aliases.txt"}) std::filesystem::remove(scratch / name, ignored);
      std::filesystem::remove(scratch, ignored);
      uploaded_[path] = written;
    }
  }

  /// The metadata.yaml Lightning writes beside an uploaded checkpoint (yaml.dump's layout: keys sorted).
  static std::string checkpoint_metadata(const SavedCheckpoints& c, const std::filesystem::path& path,
                                         std::optional<double> score) {
    auto text = [](const std::string& value) { return value.empty() ? std::string("null") : value; };
    std::ostringstream out;
    out << "Checkpoint:\n  _every_n_train_steps: " << c.every_n_train_steps << "\n  mode: " << text(c.mode)
        << "\n  monitor: " << text(c.monitor) << "\n  save_last: " << (c.save_last ? "true" : "false")
        << "\n  save_top_k: " << c.save_top_k << "\n  save_weights_only: " << (c.save_weights_only ? "true" : "false")
        << "\noriginal_filename: " << path.filename().string()
        << "\nscore: " << (score ? detail::python_float(*score) : std::string("null")) << "\n";
    return out.str();
  }

  std::string api(const std::string& endpoint) const { return options_.tracking_uri + "/api/2.0/mlflow/" + endpoint; }

  static std::string describe(const detail::mlflow::Response& response) {
    return response.status == 0 ? response.body
                                : "HTTP " + std::to_string(response.status) + " " + response.body.substr(0, 300);
  }

  void warn(const std::string& what) {
    if (warned_) return;
    warned_ = true;
    log::warn_rank_zero("volt: MLFlowLogger: " + what + " (" + options_.tracking_uri +
                        "); training continues, later requests are retried");
  }

  /// One request with retries: answers 2xx and 4xx (the request is wrong, retrying cannot help) end it;
  /// no answer, 429 and 5xx are retried after 0.2 s, 0.4 s, ... (retry_backoff_s doubling).
  detail::mlflow::Response send(const std::string& method, const std::string& url, const std::string& body,
                                const char* content_type = "Content-Type: application/json") {
    detail::mlflow::Response response;
    double wait = options_.retry_backoff_s;
    for (int attempt = 0; attempt < std::max(1, options_.max_attempts); ++attempt) {
      if (attempt > 0) {
        std::this_thread::sleep_for(std::chrono::duration<double>(wait));
        wait *= 2;
      }
      response = detail::mlflow::request(method, url, body, options_.request_timeout_s, content_type);
      if (response.status >= 200 && response.status < 500 && response.status != 429) return response;
    }
    return response;
  }

  /// Finds or creates the experiment and creates the run; false when the server did not answer as expected.
  bool ensure_run() {
    if (!run_id_.empty() && !artifact_uri_.empty()) return true;
    if (!run_id_.empty()) {  // a given run: its artifact URI
      const auto got = send("GET", api("runs/get?run_id=" + run_id_), "");
      if (got.status != 200) return warn("cannot read the run " + run_id_ + ": " + describe(got)), false;
      artifact_uri_ = detail::mlflow::json_field(got.body, "artifact_uri").value_or("");
      experiment_id_ = detail::mlflow::json_field(got.body, "experiment_id").value_or("");
      return true;
    }
    if (experiment_id_.empty()) {
      char* escaped = curl_easy_escape(nullptr, options_.experiment_name.c_str(), 0);
      const auto found = send("GET", api("experiments/get-by-name?experiment_name=" + std::string(escaped ? escaped : "")), "");
      curl_free(escaped);
      if (found.status == 200) {
        experiment_id_ = detail::mlflow::json_field(found.body, "experiment_id").value_or("");
      } else if (found.status == 404) {
        std::string body = "{\"name\":" + detail::mlflow::json_string(options_.experiment_name);
        if (!options_.artifact_location.empty()) {
          body += ",\"artifact_location\":" + detail::mlflow::json_string(options_.artifact_location);
        }
        const auto created = send("POST", api("experiments/create"), body + "}");
        if (created.status != 200) return warn("cannot create the experiment: " + describe(created)), false;
        experiment_id_ = detail::mlflow::json_field(created.body, "experiment_id").value_or("");
      } else {
        return warn("cannot look up the experiment: " + describe(found)), false;
      }
      if (experiment_id_.empty()) return warn("the server's answer names no experiment"), false;
    }
    std::string tags;
    auto all_tags = options_.tags;
    if (!options_.run_name.empty()) all_tags["mlflow.runName"] = options_.run_name;
    for (const auto& [key, value] : all_tags) {
      tags += (tags.empty() ? "" : ",") + std::string("{\"key\":") + detail::mlflow::json_string(key) +
              ",\"value\":" + detail::mlflow::json_string(value) + "}";
    }
    std::string body = "{\"experiment_id\":" + detail::mlflow::json_string(experiment_id_) +
                       ",\"start_time\":" + std::to_string(detail::mlflow::now_ms()) + ",\"tags\":[" + tags + "]";
    if (!options_.run_name.empty()) body += ",\"run_name\":" + detail::mlflow::json_string(options_.run_name);
    const auto created = send("POST", api("runs/create"), body + "}");
    if (created.status != 200) return warn("cannot create the run: " + describe(created)), false;
    run_id_ = detail::mlflow::json_field(created.body, "run_id").value_or("");
    artifact_uri_ = detail::mlflow::json_field(created.body, "artifact_uri").value_or("");
    if (run_id_.empty()) return warn("the server's answer names no run"), false;
    return true;
  }

  /// Queues a request to `endpoint` whose JSON object `body` still lacks the run id.
  void enqueue(const std::string& endpoint, std::string body) {
    pending_.emplace_back(endpoint, std::move(body));
    while (pending_.size() > options_.max_pending) pending_.pop_front();
  }

  /// Sends the queued requests in order; stops at the first one the server does not take.
  void flush() {
    if (pending_.empty() || std::chrono::steady_clock::now() < pause_until_) return;
    if (!ensure_run()) return pause();
    while (!pending_.empty()) {
      const auto& [endpoint, body] = pending_.front();
      const std::string with_run = "{\"run_id\":" + detail::mlflow::json_string(run_id_) + "," + body.substr(1);
      const auto response = send("POST", api(endpoint), with_run);
      if (response.status >= 500 || response.status == 429 || response.status == 0) {
        warn("the server did not take a request: " + describe(response));
        return pause();
      }
      if (response.status != 200) warn("the server refused a request: " + describe(response));
      pending_.pop_front();  // sent (or refused for good: retrying a 4xx cannot help)
    }
    pause_s_ = 0;
  }

  /// After a failed round: no request until the pause (doubling, from retry_backoff_s to max_pause_s) ends.
  void pause() {
    pause_s_ = std::min(options_.max_pause_s, pause_s_ == 0 ? std::max(options_.retry_backoff_s, 0.001) : pause_s_ * 2);
    pause_until_ = std::chrono::steady_clock::now() +
                   std::chrono::duration_cast<std::chrono::steady_clock::duration>(std::chrono::duration<double>(pause_s_));
  }

  MLFlowLoggerOptions options_;
  std::string run_id_;
  std::string experiment_id_;
  std::string artifact_uri_;
  std::deque<std::pair<std::string, std::string>> pending_;
  bool warned_ = false;
  double pause_s_ = 0;
  std::chrono::steady_clock::time_point pause_until_{};
  std::optional<SavedCheckpoints> to_upload_{};
  std::map<std::filesystem::path, std::filesystem::file_time_type> uploaded_{};
};

}  // namespace volt
