#!/usr/bin/env bash
# The engine's layers (engine/CMakeLists.txt) are enforced by include paths: a layer sees only
# its own headers and those of the layers below it, so `#include "chaos.hpp"` in core/ does not
# compile. A quoted include that climbs out of its folder ("../comm/communicator.hpp") is looked
# up next to the including file and would get past that; this check refuses it. Exit 1 naming
# each such line.
set -euo pipefail
cd "${1:-$(dirname "$0")/..}"
bad=$(git grep -n -E '^\s*#\s*include\s*"[^"]*\.\./' -- 'engine/*.cpp' 'engine/*.hpp' 'engine/*.h' || true)
if [ -n "$bad" ]; then
  echo "check-layers: an include climbs out of its layer's folder (name the header alone; the build's include paths decide what a layer may see):" >&2
  printf '  %s\n' "$bad" >&2
  exit 1
fi
echo "check-layers: no engine include leaves its layer's folder"
