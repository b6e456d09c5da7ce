#!/bin/sh
# wasm-c.sh makes sure clang can build the C guests (the C SDK in
# wasmhost/sdk/c, the classes examples/*-c) as WASI reactors, and prints
# the path of clang.
#
# Idempotent: if clang already builds a wasm32-wasi reactor against
# wasi-libc it only prints the path. Otherwise it installs Debian's
# clang-16, lld-16 (wasm-ld), wasi-libc and libclang-rt-16-dev-wasm32 (the
# wasm32 builtins) with apt-get, non-interactively, using sudo only when
# not run as root. With --check it installs nothing: it prints the path,
# or says what is missing on stderr and exits 1 (make examples and the C
# guest test ask it so).
#
# Debian's wasi-libc is in /usr (lib/wasm32-wasi, include/wasm32-wasi):
# the sysroot is /usr.
set -eu

packages="clang-16 lld-16 wasi-libc libclang-rt-16-dev-wasm32"
sysroot=/usr

check=""
case "${1:-}" in
"") ;;
--check) check=1 ;;
*)
	echo "usage: wasm-c.sh [--check]" >&2
	exit 2
	;;
esac

# find_clang prints the first clang that links a reactor using libc, the
# way the C classes are built; nothing if none does.
find_clang() {
	dir=$(mktemp -d)
	printf '#include <string.h>\n__attribute__((export_name("f"))) int f(const char *s) { return (int)strlen(s); }\n' >"$dir/probe.c"
	found=""
	for cc in clang-16 clang; do
		path=$(command -v "$cc" 2>/dev/null) || continue
		if "$path" --target=wasm32-wasi --sysroot="$sysroot" -mexec-model=reactor -O2 \
			-o "$dir/probe.wasm" "$dir/probe.c" >/dev/null 2>&1; then
			found=$path
			break
		fi
	done
	rm -rf "$dir"
	if [ -n "$found" ]; then
		echo "$found"
	fi
}

path=$(find_clang)
if [ -n "$path" ]; then
	echo "$path"
	exit 0
fi

if [ -n "$check" ]; then
	echo "wasm-c.sh: no clang builds a wasm32-wasi reactor here (needs Debian's $packages; scripts/wasm-c.sh installs them)" >&2
	exit 1
fi

if [ "$(id -u)" -eq 0 ]; then
	sudo=""
elif command -v sudo >/dev/null 2>&1; then
	sudo="sudo"
else
	echo "wasm-c.sh: $packages are not installed and installing them needs root or sudo" >&2
	exit 1
fi

# Progress goes to stderr so that stdout carries only the path. env passes
# DEBIAN_FRONTEND through sudo, which would drop it.
$sudo env DEBIAN_FRONTEND=noninteractive apt-get update -q >&2
# shellcheck disable=SC2086 # the list is words
$sudo env DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends $packages >&2

path=$(find_clang)
if [ -z "$path" ]; then
	echo "wasm-c.sh: apt-get installed $packages but clang still cannot build a wasm32-wasi reactor" >&2
	exit 1
fi
echo "$path"
