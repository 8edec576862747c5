#pragma once
// SHA-256, the one implementation (OpenSSL): of bytes in memory and of a file read in 1 MiB
// pieces (host/topology.cpp hashes the executables it finds with the file one).
#include <cstddef>
#include <string>
#include <string_view>

namespace cs {
// Lower-case hex SHA-256 of `data`.
std::string sha256_hex(std::string_view data);
// Lower-case hex SHA-256 of the file at `path` into *hex, its size into *size; false (and *why:
// "cannot open PATH" or "cannot read PATH") when it cannot be read.
bool sha256_file(const std::string& path, std::string* hex, unsigned long long* size, std::string* why);
}  // namespace cs
