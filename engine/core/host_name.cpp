#include "host_name.hpp"

#include <unistd.h>

namespace cs {

std::string host_name() {
  char h[256] = {0};
  if (gethostname(h, sizeof h - 1) != 0) return "unknown";
  return h;
}

}  // namespace cs
