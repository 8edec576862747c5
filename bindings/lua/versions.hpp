#pragma once
#include <string>

namespace cs {
// The lines of `commscript --version`: commscript, MPI library, LuaJIT, CUDA/NCCL when built.
std::string version_text();
// {"mpi": {...}, "luajit": ..., "nccl": ...} for report.json's commscript section.
std::string versions_json();
}  // namespace cs
