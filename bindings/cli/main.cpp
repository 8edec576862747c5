#include "cli.hpp"

int main(int argc, char** argv) { return cs::cli_main(argc, argv); }
