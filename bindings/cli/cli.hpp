#pragma once
namespace cs {
// The whole `commscript` command; returns the process exit code (DESIGN.md "Exit codes").
int cli_main(int argc, char** argv);
}  // namespace cs
