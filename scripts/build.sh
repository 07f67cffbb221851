#!/usr/bin/env bash
# Builds main packages into bin/ with one `go build`, so that the packages
# they share (the Firestore client, gRPC, …) compile once, and shows that
# it is working: a cold build compiles some 700 packages, minutes on a
# small machine, and `go build` alone prints nothing until it is done.
# On a terminal one line counts the packages as they compile; elsewhere (CI
# logs) a line every tenth of them.
#
#   scripts/build.sh ./cmd/snapwriter ./emulator/withemulator
#
# GO (go) is the toolchain, LDFLAGS the linker flags (the Makefile's).
set -euo pipefail
go=${GO:-go}
export CGO_ENABLED=0
began=$SECONDS
# What the build may compile: every package in the import graph (the
# standard library too, on a cold cache). Those already in the build cache
# are not compiled, and so not counted.
total=$("$go" list -deps "$@" | wc -l)
tty=0
[ -t 1 ] && tty=1
"$go" build -v -trimpath -ldflags "${LDFLAGS:-}" -o bin/ "$@" 2>&1 | {
  # A shell loop, not awk: mawk (Debian's awk) reads a pipe in blocks and
  # would hold the lines back until one fills.
  n=0
  while IFS= read -r line; do
    case $line in
      # go build -v names each package as it compiles it; anything else
      # (a "# pkg" header, file:line: messages) is an error to show as it is.
      "" | *[[:space:]:]*)
        if [ "$tty" = 1 ] && [ "$n" -gt 0 ]; then printf '\r\033[K'; fi
        printf '%s\n' "$line"
        ;;
      *)
        n=$((n + 1))
        if [ "$tty" = 1 ]; then
          printf '\r\033[K  compiling [%d/%d] %s' "$n" "$total" "$line"
        elif [ "$n" = 1 ] || [ $((n * 10 / total)) -gt $(((n - 1) * 10 / total)) ]; then
          printf '  compiled %d of up to %d packages (%s)\n' "$n" "$total" "$line"
        fi
        ;;
    esac
  done
  if [ "$tty" = 1 ] && [ "$n" -gt 0 ]; then printf '\r\033[K'; fi
}
printf '  built %s in %ds\n' "$(printf '%s ' "$@" | sed 's#\./[^ ]*/\([^/ ]*\) #bin/\1 #g; s/ $//')" $((SECONDS - began))
