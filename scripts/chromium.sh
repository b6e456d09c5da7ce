#!/bin/sh
# chromium.sh makes sure a Chromium browser is installed for the end-to-end
# tests (tests/e2e drives the chat page in it), and prints its path.
#
# Idempotent: if chromium (or chromium-browser) is already on PATH it only
# prints the path. Otherwise it installs Debian's chromium package with
# apt-get, non-interactively, using sudo only when not run as root.
set -eu

find_chromium() {
	command -v chromium 2>/dev/null || command -v chromium-browser 2>/dev/null || true
}

path=$(find_chromium)
if [ -n "$path" ]; then
	echo "$path"
	exit 0
fi

if [ "$(id -u)" -eq 0 ]; then
	sudo=""
elif command -v sudo >/dev/null 2>&1; then
	sudo="sudo"
else
	echo "chromium.sh: chromium is not installed and installing it needs root or sudo" >&2
	exit 1
fi

# Progress goes to stderr so that stdout carries only the path. env passes
# DEBIAN_FRONTEND through sudo, which would drop it.
$sudo env DEBIAN_FRONTEND=noninteractive apt-get update -q >&2
$sudo env DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends chromium >&2

path=$(find_chromium)
if [ -z "$path" ]; then
	echo "chromium.sh: apt-get installed chromium but it is not on PATH" >&2
	exit 1
fi
echo "$path"
