#!/usr/bin/env bash
# Puts the JUnit schema that Jenkins' xunit plugin validates reports against
# (junit-10.xsd, MIT licence, Gregory Boissinot) where the tests look for it:
# $PIPELINE_JUNIT_XSD, default /var/cache/pipeline/junit/junit-10.xsd. The
# tests (tier integrations) check `pipeline compare --format junit` against
# it with xmllint. No Debian package carries it; pytest validates its own
# junitxml output against a copy it ships in its source distribution on
# PyPI, so it comes from there: one pinned sdist, its sha256 checked.
# Prints the schema's path. Does nothing when it is there.
set -euo pipefail

xsd="${PIPELINE_JUNIT_XSD:-/var/cache/pipeline/junit/junit-10.xsd}"
if [ -s "$xsd" ]; then
  echo "$xsd"
  exit 0
fi
version=8.3.4
sha256=965370d062bce11e73868e0335abac31b4d3de0e82f4007408d242b4f8610761
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
python3 -m pip download --quiet --no-deps --no-binary :all: -d "$work" "pytest==$version" >&2
sdist="$work/pytest-$version.tar.gz"
echo "$sha256  $sdist" | sha256sum --check --quiet - >&2 || {
  echo "error: $sdist is not the pytest $version sdist this script pins (sha256 differs)" >&2
  exit 1
}
tar -xzf "$sdist" -C "$work" "pytest-$version/testing/example_scripts/junit-10.xsd"
mkdir -p "$(dirname "$xsd")"
cp "$work/pytest-$version/testing/example_scripts/junit-10.xsd" "$xsd.tmp"
mv "$xsd.tmp" "$xsd"
echo "$xsd"
