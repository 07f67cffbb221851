#!/usr/bin/env bash
# make deps-check: which modules in go.mod have a newer version on the module proxy.
# Informational: exits 0 however many are outdated; non-zero only when the list itself cannot
# be made (go missing, the proxy unreachable, go.mod unreadable), so CI can tell "behind" from
# "could not check".
set -euo pipefail
cd "$(dirname "$0")/.."
GO=${GO:-go}

# `all`, not the go.mod paths as arguments: with explicit paths `go list -m -u` reports a failed
# proxy lookup as "no update" and exits 0; with `all` it fails.
listing=$("$GO" list -m -u -f '{{if not .Main}}{{.Path}}	{{.Version}}	{{with .Update}}{{.Version}}{{end}}	{{if .Indirect}}indirect{{else}}direct{{end}}	{{if .Retracted}}retracted {{end}}{{if .Deprecated}}deprecated{{end}}{{end}}' all) || {
	echo "deps-check: could not list the modules and their updates (go says why above)" >&2
	exit 1
}

# go.mod's require paths (go mod tidy keeps them one per line, in blocks or single lines):
# since module graph pruning these are exactly the modules that provide a package to the build or
# its tests. The rest of `all` only appears in some dependency's go.mod.
required=$(awk '$1 == "require" && $2 == "(" { block = 1; next }
	block && $1 == ")" { block = 0; next }
	block && NF { print $1; next }
	$1 == "require" { print $2 }' go.mod)

printf '%s\n' "$listing" | awk -F '\t' -v required="$required" '
	BEGIN {
		n = split(required, r, "\n")
		for (i = 1; i <= n; i++) inmod[r[i]] = 1
		rows = 0; others = 0
		w1 = length("module"); w2 = length("version"); w3 = length("latest")
	}
	NF == 0 { next }
	!($1 in inmod) { if ($3 != "") others++; next }
	$3 == "" && $5 == "" { next }
	{
		rows++; p[rows] = $1; v[rows] = $2; u[rows] = ($3 == "" ? "-" : $3); k[rows] = $4; note[rows] = $5
		if (length($1) > w1) w1 = length($1)
		if (length($2) > w2) w2 = length($2)
		if (length(u[rows]) > w3) w3 = length(u[rows])
	}
	END {
		if (rows == 0) {
			print "deps-check: every module in go.mod is at its latest version."
		} else {
			printf "deps-check: %d module(s) in go.mod are behind (informational; `go get MODULE@VERSION`, then make lint test):\n", rows
			printf "%-" w1 "s  %-" w2 "s  %-" w3 "s  %s\n", "module", "version", "latest", "kind"
			# Direct requirements first: they are the ones the code imports.
			for (pass = 1; pass <= 2; pass++)
				for (i = 1; i <= rows; i++)
					if ((k[i] == "direct") == (pass == 1))
						printf "%-" w1 "s  %-" w2 "s  %-" w3 "s  %s%s\n", p[i], v[i], u[i], k[i], (note[i] == "" ? "" : "  " note[i])
		}
		if (others > 0)
			printf "deps-check: %d more module(s) in the module graph have updates; none provides a package to the build (go list -m -u all shows them).\n", others
	}'
