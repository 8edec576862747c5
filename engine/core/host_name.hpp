#pragma once
// This machine's host name as the OS reports it ("unknown" when it cannot be read).
#include <string>

namespace cs {
std::string host_name();
}  // namespace cs
