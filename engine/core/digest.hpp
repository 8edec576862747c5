#pragma once
#include <string>

namespace cs {
// Lower-case hex SHA-256 of `data` (OpenSSL).
std::string sha256_hex(const std::string& data);
// Lower-case hex SHA-256 of the file at `path` into *hex, its size into *size, read in 1 MiB
// pieces; false (and *why: "cannot open PATH" or "cannot read PATH") when it cannot be read.
bool sha256_file(const std::string& path, std::string* hex, unsigned long long* size, std::string* why);
}  // namespace cs
