#!/usr/bin/env bash
# Builds volt's API reference with Doxygen (docs/Doxyfile), without CMake.
#
#   tools/build-docs.sh [OUTPUT_DIR]     (default: build/docs; the HTML lands in OUTPUT_DIR/html)
#
# Prints every Doxygen warning and exits non-zero when there is any (CI runs it this way).
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
output="${1:-$root/build/docs}"

if ! command -v doxygen >/dev/null 2>&1; then
  echo "build-docs: doxygen not found (Debian: apt-get install --no-install-recommends doxygen)" >&2
  exit 2
fi

mkdir -p "$output"
output="$(cd "$output" && pwd)"
log="$output/doxygen-warnings.log"

cd "$root"
status=0
VOLT_DOCS_OUTPUT="$output" doxygen docs/Doxyfile >"$log" 2>&1 || status=$?
warnings=$(grep -c -E '(warning|error):' "$log" || true)
if [[ $status -ne 0 || $warnings -ne 0 ]]; then
  cat "$log" >&2
  echo "build-docs: doxygen $(doxygen --version): $warnings warning(s), exit status $status; see $log" >&2
  exit 1
fi
echo "build-docs: no warnings; open $output/html/index.html"
