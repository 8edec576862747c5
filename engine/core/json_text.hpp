#pragma once
// A JSON value as one line of text for messages and files. Strings that are not valid UTF-8
// (a config value, an environment variable) are written with U+FFFD instead of throwing.
#include <nlohmann/json.hpp>
#include <string>

namespace cs {

inline std::string json_text(const nlohmann::json& v, int indent = -1) {
  return v.dump(indent, ' ', false, nlohmann::json::error_handler_t::replace);
}

}  // namespace cs
