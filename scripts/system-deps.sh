#!/usr/bin/env bash
# Installs the Debian packages Faultline needs on the host, only those missing.
# mmdebstrap builds the node image; chromium drives the web-view test;
# iproute2/iptables/faketime serve the local (netns) backend; openjdk runs Spark; fuse3 (fusermount3)
# mounts the disk layer.
set -euo pipefail
pkgs=(mmdebstrap iproute2 iptables chromium openssh-client procps faketime fuse3)
command -v java >/dev/null 2>&1 || pkgs+=(openjdk-17-jre-headless)
missing=()
for p in "${pkgs[@]}"; do
  dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p")
done
[ ${#missing[@]} -eq 0 ] && exit 0
if [ "$(id -u)" -ne 0 ]; then
  if command -v sudo >/dev/null 2>&1 && sudo -n true 2>/dev/null; then SUDO=(sudo -n); else
    echo "system-deps: missing Debian packages: ${missing[*]} (run as root, or install them yourself)" >&2
    exit 1
  fi
else SUDO=(); fi
echo "system-deps: installing ${missing[*]}"
# sudo drops the environment: DEBIAN_FRONTEND goes through `env`, so debconf never asks or chatters.
# apt's and debconf's output goes to a log shown only on failure (VERBOSE=1 shows it as it comes).
apt=("${SUDO[@]}" env DEBIAN_FRONTEND=noninteractive DEBCONF_NOWARNINGS=yes apt-get -qq -o Dpkg::Use-Pty=0)
if [ -n "${VERBOSE:-}" ]; then
  "${apt[@]}" update
  "${apt[@]}" install -y --no-install-recommends "${missing[@]}"
  exit 0
fi
log=$(mktemp)
trap 'rm -f "$log"' EXIT
if ! { "${apt[@]}" update && "${apt[@]}" install -y --no-install-recommends "${missing[@]}"; } >"$log" 2>&1; then
  cat "$log" >&2
  echo "system-deps: installing ${missing[*]} failed (output above)" >&2
  exit 1
fi
