#!/usr/bin/env bash
# Builds (or reuses) a Debian root that carries another Ceph release, for the
# release matrix (scripts/test-ceph-release.sh) and for client roots
# (`client: {root: PATH}` in a suite).
#
#   scripts/ceph-root.sh RELEASE      RELEASE: 18.2 (Debian trixie) or 20.2 (Debian sid)
#
# Prints the root's path on stdout (progress on stderr). The roots live in
# $PIPELINE_ROOTS (default /var/cache/pipeline/roots), one folder per Debian
# suite; a root is reused when its stamp names the same package list, and
# rebuilt when it is missing or incomplete (about 3 minutes each here).
# Needs root (debootstrap, chroot).
set -euo pipefail

release="${1:?usage: scripts/ceph-root.sh 18.2|20.2}"
case "$release" in
  18.2 | reef | trixie) suite=trixie ;;
  20.2 | tentacle | sid) suite=sid ;;
  *)
    echo "error: no Debian suite carries Ceph $release here; known: 18.2 (trixie), 20.2 (sid)" >&2
    exit 2
    ;;
esac
[ "$(id -u)" -eq 0 ] || { echo "error: building a Debian root needs root (debootstrap, chroot)" >&2; exit 1; }

cache="${PIPELINE_ROOTS:-/var/cache/pipeline/roots}"
root="$cache/$suite"
mirror="${PIPELINE_DEBIAN_MIRROR:-http://deb.debian.org/debian}"
# What the release tests run inside the root: the Ceph daemons and clients, the
# benchmark tools, sshd and ssh for the multi-client tests, and the helpers the
# tests call (pgrep, ip, curl). librados/librbd come with ceph-common.
# bash-completion: the package test (tests/package.rs) installs the .deb into
# an overlay of the trixie root and logs in there as a user, whose bash loads
# the package's completion only through bash-completion.
packages=(ceph ceph-mon ceph-osd ceph-mgr radosgw ceph-common fio iperf3 procps
  openssh-server openssh-client iproute2 curl uuid-runtime ca-certificates bash-completion)
stamp_text="suite=$suite packages=${packages[*]}"
stamp="$root/.pipeline-root"

if [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$stamp_text" ]; then
  echo "$root"
  exit 0
fi

command -v debootstrap >/dev/null || {
  echo "installing debootstrap" >&2
  apt-get update -q >&2
  DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends debootstrap >&2
}

mkdir -p "$cache"
work="$root.building"
rm -rf "$work"
started=$(date +%s)
echo "building the $suite root for Ceph $release in $root (debootstrap, then apt inside)" >&2
# sid's Release file can be past its Valid-Until on a machine whose clock runs
# ahead of the archive's last signature: apt inside the root is told not to
# check it (debootstrap itself does not).
debootstrap --variant=minbase "$suite" "$work" "$mirror" >&2
echo 'Acquire::Check-Valid-Until "false";' >"$work/etc/apt/apt.conf.d/99pipeline-valid-until"
# Package scripts try to start services; without systemd they must be told not to.
printf '#!/bin/sh\nexit 101\n' >"$work/usr/sbin/policy-rc.d"
chmod +x "$work/usr/sbin/policy-rc.d"

mounted=()
cleanup_mounts() {
  local m
  for ((i = ${#mounted[@]} - 1; i >= 0; i--)); do umount -l "${mounted[$i]}" 2>/dev/null || true; done
}
trap cleanup_mounts EXIT
mount -t proc proc "$work/proc" && mounted+=("$work/proc")
mount --bind /dev "$work/dev" && mounted+=("$work/dev")
cp /etc/resolv.conf "$work/etc/resolv.conf" 2>/dev/null || true
chroot "$work" apt-get update -q >&2
DEBIAN_FRONTEND=noninteractive chroot "$work" apt-get install -y -q --no-install-recommends "${packages[@]}" >&2
chroot "$work" apt-get clean
cleanup_mounts
mounted=()
trap - EXIT

version=$(chroot "$work" ceph --version 2>/dev/null || true)
case "$version" in
  "ceph version $release"*) ;;
  *)
    echo "error: the $suite root's ceph says '$version', not $release" >&2
    exit 1
    ;;
esac
echo "$stamp_text" >"$work/.pipeline-root"
rm -rf "$root"
mv "$work" "$root"
echo "root ready: $version ($(($(date +%s) - started)) s)" >&2
echo "$root"
