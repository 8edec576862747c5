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
# Built with CUDA or not is chosen by engine/CMakeLists.txt (each layer's CUDA half or its
# cuda_absent.cpp); only the backends (engine/comm) and the tests may test the macro.
cuda=$(git grep -n -E 'COMMSCRIPT_HAVE_NCCL' -- 'engine/*.cpp' 'engine/*.hpp' 'engine/*.h' 'bindings/*.cpp' \
  'bindings/*.hpp' 'bindings/*.h' ':!engine/comm/*' || true)
if [ -n "$cuda" ]; then
  echo "check-layers: COMMSCRIPT_HAVE_NCCL outside the backends (let engine/CMakeLists.txt pick a CUDA half or cuda_absent.cpp):" >&2
  printf '  %s\n' "$cuda" >&2
  exit 1
fi
echo "check-layers: no engine include leaves its layer's folder; no CUDA switch outside the backends"
