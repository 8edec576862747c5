#pragma once
#include <string>
#include <vector>

namespace cs {
// The whole `commscript` command; returns the process exit code (docs/reference.md, "Exit codes").
int cli_main(int argc, char** argv);
// Phase 1 of cli_main alone (tests/fuzz/fuzz_options): the command line parsed and checked as
// cli_main does, answering neither --version nor --list. Returns the exit code when parsing ends
// the process (errors, --help), else -1 with *rest = RECIPE and its options, *sets = the --set
// values.
int cli_parse(int argc, char** argv, std::vector<std::string>* rest, std::vector<std::string>* sets);
}  // namespace cs
