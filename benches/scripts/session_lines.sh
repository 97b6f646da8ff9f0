#!/usr/bin/env bash
# Non-test, non-blank lines of the session code (issue 42): the .rs files
# under actors/src/session/ (or DIR), without the test-only files
# (model_test.rs, test_support.rs) and without each file's
# `#[cfg(test)] mod tests { ... }` (from that line to the end of the file).
# Usage: benches/scripts/session_lines.sh [DIR]   (per file, then the total)
set -euo pipefail
dir=${1:-actors/src/session}
find "$dir" -name '*.rs' ! -name model_test.rs ! -name test_support.rs | sort |
  xargs awk 'FNR == 1 { skip = 0 }
    /^#\[cfg\(test\)\]$/ { getline after; if (after ~ /^mod [a-z_]+ \{/) skip = 1; else n[FILENAME] += 2; next }
    !skip && !/^[ \t]*$/ { n[FILENAME]++ }
    END { for (f in n) { printf "%6d %s\n", n[f], f; total += n[f] } printf "%6d total\n", total }' |
  sort -n
