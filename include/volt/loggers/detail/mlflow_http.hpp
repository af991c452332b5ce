/// \file
/// The HTTP side of volt::MLFlowLogger (volt/loggers/mlflow_logger.hpp): one request with libcurl, and the few
/// JSON pieces its requests and the server's answers need. Optional, like the logger: it includes libcurl.
#pragma once

#include <volt/core/encoding.hpp>

#include <curl/curl.h>

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace volt {

namespace detail::mlflow {

/// `text` as a JSON string (core/encoding.hpp's escaping).
inline std::string json_string(std::string_view text) {
  std::string out;
  append_json_string(out, text);
  return out;
}

/// The string value of the first `"key": "..."` in a server response (MLflow's responses are JSON objects
/// with unique ids; escapes other than \" and \\ do not occur in ids and URIs). nullopt when absent.
inline std::optional<std::string> json_field(std::string_view body, std::string_view key) {
  const std::string needle = "\"" + std::string(key) + "\"";
  auto at = body.find(needle);
  if (at == std::string_view::npos) return std::nullopt;
  at = body.find(':', at + needle.size());
  if (at == std::string_view::npos) return std::nullopt;
  at = body.find_first_not_of(" \t\r\n", at + 1);
  if (at == std::string_view::npos || body[at] != '"') return std::nullopt;
  std::string value;
  for (++at; at < body.size() && body[at] != '"'; ++at) {
    if (body[at] == '\\' && at + 1 < body.size()) ++at;
    value += body[at];
  }
  return value;
}

inline std::int64_t now_ms() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::system_clock::now().time_since_epoch())
      .count();
}

/// A response: the HTTP status (0 when no answer came) and the body, or libcurl's error text.
struct Response {
  long status = 0;
  std::string body;
};

inline std::size_t append_body(char* data, std::size_t size, std::size_t count, void* out) {
  static_cast<std::string*>(out)->append(data, size * count);
  return size * count;
}

/// One HTTP request with libcurl: `method` ("GET", "POST", "PUT") to `url` with `body` (JSON unless
/// `content_type` says otherwise).
inline Response request(const std::string& method, const std::string& url, const std::string& body, double timeout_s,
                        const char* content_type = "Content-Type: application/json") {
  static const bool initialized = curl_global_init(CURL_GLOBAL_DEFAULT) == CURLE_OK;
  Response response;
  CURL* curl = initialized ? curl_easy_init() : nullptr;
  if (curl == nullptr) {
    response.body = "libcurl could not be initialized";
    return response;
  }
  curl_slist* headers = curl_slist_append(nullptr, content_type);
  curl_easy_setopt(curl, CURLOPT_URL, url.c_str());
  curl_easy_setopt(curl, CURLOPT_HTTPHEADER, headers);
  curl_easy_setopt(curl, CURLOPT_TIMEOUT_MS, static_cast<long>(timeout_s * 1000));
  curl_easy_setopt(curl, CURLOPT_NOSIGNAL, 1L);
  curl_easy_setopt(curl, CURLOPT_WRITEFUNCTION, append_body);
  curl_easy_setopt(curl, CURLOPT_WRITEDATA, &response.body);
  if (method == "POST" || method == "PUT") {
    curl_easy_setopt(curl, CURLOPT_CUSTOMREQUEST, method.c_str());
    curl_easy_setopt(curl, CURLOPT_POSTFIELDS, body.data());
    curl_easy_setopt(curl, CURLOPT_POSTFIELDSIZE_LARGE, static_cast<curl_off_t>(body.size()));
  }
  const CURLcode code = curl_easy_perform(curl);
  if (code == CURLE_OK) {
    curl_easy_getinfo(curl, CURLINFO_RESPONSE_CODE, &response.status);
  } else {
    response.body = curl_easy_strerror(code);
  }
  curl_slist_free_all(headers);
  curl_easy_cleanup(curl);
  return response;
}

}  // namespace detail::mlflow

}  // namespace volt
