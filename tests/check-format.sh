#!/bin/sh
# Fails when any tracked C file differs from what .clang-format asks for.
set -eu
cd "$1"
if git rev-parse --git-dir >/dev/null 2>&1; then
    files=$(git ls-files '*.c' '*.h' '*.cu' | grep -v '^subprojects/' || true)
else
    files=$(find . -name '*.c' -o -name '*.h' | grep -v -e '/build' -e '^./subprojects/')
fi
[ -n "$files" ] || exit 0
# shellcheck disable=SC2086
clang-format --dry-run --Werror $files
