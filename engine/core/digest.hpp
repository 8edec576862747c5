#pragma once
#include <string>

namespace cs {
// Lower-case hex SHA-256 of `data` (OpenSSL).
std::string sha256_hex(const std::string& data);
}  // namespace cs
