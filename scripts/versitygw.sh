#!/usr/bin/env bash
# Makes sure the S3-compatible server the tests run (versitygw, pinned below)
# is built, and prints the path of its binary.
#
# The binary lives outside the clone, in $XDG_CACHE_HOME/wasmkeep/bin (else
# $HOME/.cache/wasmkeep/bin), so that it is built once per machine, not once
# per checkout; $WASMKEEP_VERSITYGW names another binary instead. The tests
# (internal/s3test) look in the same places, take the same lock, and build
# it themselves when it is missing; this script only moves the slow first
# build (minutes) out of the first test's time.
set -euo pipefail

module=github.com/versity/versitygw
version=v1.8.0

if [[ -n "${WASMKEEP_VERSITYGW:-}" ]]; then
	if [[ ! -x "$WASMKEEP_VERSITYGW" ]]; then
		echo "versitygw.sh: \$WASMKEEP_VERSITYGW=$WASMKEEP_VERSITYGW is not an executable" >&2
		exit 1
	fi
	echo "$WASMKEEP_VERSITYGW"
	exit 0
fi

cache="${XDG_CACHE_HOME:-$HOME/.cache}/wasmkeep/bin"
bin="$cache/versitygw"

# pinned: the cached binary exists and was built from the pinned module
# version (go records it in the binary).
pinned() {
	[[ -x "$bin" ]] && go version -m "$bin" 2>/dev/null |
		awk -v m="$module" -v v="$version" '$1 == "mod" && $2 == m && $3 == v { found = 1 } END { exit !found }'
}

if pinned; then
	echo "$bin"
	exit 0
fi

mkdir -p "$cache"
# One build at a time per cache, shared with the tests' lock on the same
# file; whoever waited finds the binary built.
exec 9>"$cache/versitygw.lock"
if command -v flock >/dev/null; then
	flock 9
fi
if pinned; then
	echo "$bin"
	exit 0
fi

tmp="$(mktemp -d "$cache/.build-XXXXXX")"
trap 'rm -rf "$tmp"' EXIT
echo "versitygw.sh: building $module $version into $cache (this takes minutes)" >&2
# Outside any module or workspace, so only the pinned version's go.mod counts;
# into a private directory first, so the cache never holds half a binary.
(cd "$tmp" && GOBIN="$tmp" GOWORK=off GOFLAGS= go install -trimpath -ldflags="-s -w" "$module/cmd/versitygw@$version")
mv "$tmp/versitygw" "$bin"
if ! pinned; then
	echo "versitygw.sh: built $bin, but it does not report $module $version" >&2
	exit 1
fi
echo "$bin"
