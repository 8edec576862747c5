#!/usr/bin/env bash
# Fails (exit 1) when a tracked C++ file differs from .clang-format, and names the files.
# Fix with: git ls-files '*.cpp' '*.hpp' | xargs clang-format -i
set -euo pipefail
cd "$(dirname "$0")/.."
command -v clang-format >/dev/null || { echo "check-format: clang-format not installed" >&2; exit 1; }
bad=()
while IFS= read -r f; do
  clang-format --style=file --dry-run -Werror "$f" >/dev/null 2>&1 || bad+=("$f")
done < <(git ls-files '*.cpp' '*.hpp' '*.h' '*.cc')
if [ ${#bad[@]} -gt 0 ]; then
  echo "check-format: ${#bad[@]} file(s) differ from .clang-format:" >&2
  printf '  %s\n' "${bad[@]}" >&2
  exit 1
fi
echo "check-format: all C++ files match .clang-format"
