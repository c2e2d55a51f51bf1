#!/bin/sh
# Fetch the Sereal test data that Debian's source package of Sereal::Decoder ships
# (t/lib/Sereal/TestSet.pm, t/data/corpus, t/195_backcompat.t) into
# .cache/sereal-testdata/, for tests/interop/test_sereal_testdata.py.
#
# Uses apt-get's own "source" command against the machine's configured Debian archive
# (deb-src entries derived from its deb entries, in a private apt state directory, so
# the system's apt configuration is untouched), for the very version of
# libsereal-decoder-perl that is installed. Idempotent: does nothing once fetched.
set -eu

root=$(cd "$(dirname "$0")/../.." && pwd)
dest="$root/.cache/sereal-testdata"
[ -f "$dest/ready" ] && exit 0

version=$(dpkg-query -W -f='${source:Version}' libsereal-decoder-perl 2>/dev/null) || {
  echo "libsereal-decoder-perl is not installed: run make test" >&2; exit 1; }

work="$dest/apt"
rm -rf "$dest" && mkdir -p "$work/lists/partial" "$work/sources.list.d" "$work/download"

# deb-src twins of the configured deb entries (deb822 and one-line formats)
for f in /etc/apt/sources.list.d/*.sources; do
  [ -f "$f" ] && sed 's/^Types:.*\bdeb\b.*$/Types: deb-src/' "$f" > "$work/sources.list.d/$(basename "$f")"
done
for f in /etc/apt/sources.list /etc/apt/sources.list.d/*.list; do
  [ -f "$f" ] && sed -n 's/^deb \(.*\)$/deb-src \1/p' "$f" >> "$work/sources.list.d/src.list"
done

apt_opts="-o Dir::Etc::SourceList=/dev/null -o Dir::Etc::SourceParts=$work/sources.list.d \
  -o Dir::State::Lists=$work/lists -o Dir::Cache=$work/cache -o APT::Sandbox::User=root -qq"
# shellcheck disable=SC2086
apt-get $apt_opts update
# shellcheck disable=SC2086
(cd "$work/download" && apt-get $apt_opts source --download-only "libsereal-decoder-perl=$version")

orig=$(ls "$work/download"/libsereal-decoder-perl_*.orig.tar.* | head -n 1)
tar -xf "$orig" -C "$dest" --wildcards '*/t/*' '*/lib/*'
rm -rf "$work"
touch "$dest/ready"
echo "Sereal test data from libsereal-decoder-perl $version in $dest"
