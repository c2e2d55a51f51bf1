#!/bin/sh
# Build the root filesystem of the local base image, with no registry:
#
#   sudo deploy/images/base.sh /var/tmp/riak-events-base.tar
#   docker import /var/tmp/riak-events-base.tar localhost/riak-events-base:bookworm
#   # or: podman import ...; `riak-events cluster build` does both and caches the tarball
#
# A minimal Debian (debootstrap --variant=minbase) with the point-release and security
# archives enabled and apt's caches emptied. Needs root (debootstrap mounts /proc and
# creates device nodes) and debootstrap; MIRROR and SUITE may be overridden.
set -eu

out=${1:?usage: base.sh OUTPUT.tar}
suite=${SUITE:-bookworm}
mirror=${MIRROR:-http://deb.debian.org/debian}

if [ "$(id -u)" != 0 ]; then
    echo "base.sh: debootstrap needs root: run it with sudo" >&2
    exit 2
fi
command -v debootstrap >/dev/null || { echo "base.sh: apt-get install debootstrap" >&2; exit 2; }

root=$(mktemp -d "${TMPDIR:-/var/tmp}/riak-events-rootfs.XXXXXX")
trap 'rm -rf "$root"' EXIT
debootstrap --variant=minbase "$suite" "$root" "$mirror" >"$root.log" 2>&1 || {
    tail -20 "$root.log" >&2
    echo "base.sh: debootstrap $suite from $mirror failed (log: $root.log)" >&2
    exit 1
}
rm -f "$root.log"
cat >"$root/etc/apt/sources.list" <<SOURCES
deb $mirror $suite main
deb $mirror $suite-updates main
deb http://deb.debian.org/debian-security $suite-security main
SOURCES
# Images stay small: no apt lists or package caches, no documentation of later installs.
cat >"$root/etc/dpkg/dpkg.cfg.d/01-riak-events-nodoc" <<NODOC
path-exclude /usr/share/doc/*
path-exclude /usr/share/man/*
path-exclude /usr/share/locale/*
NODOC
rm -rf "$root"/var/lib/apt/lists/* "$root"/var/cache/apt/*.bin "$root"/var/cache/apt/archives/*.deb
tmp="$out.partial"
tar --numeric-owner -C "$root" -cf "$tmp" .
mv "$tmp" "$out"
echo "base.sh: $out"
