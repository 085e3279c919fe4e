#!/usr/bin/env bash
# Installs what the runner, its tests and the sandbox cluster need on Debian 12:
# Ceph 16.2 (mon, mgr, osd, radosgw, CLI), fio, iperf3, an OCI registry, and helpers.
# Idempotent: does nothing when everything is present.
set -euo pipefail

# docker-registry, skopeo and apache2-utils (htpasswd): the OCI registry tests
# start a real registry on 127.0.0.1 and read what we push with skopeo.
# procps (pgrep, pkill): the multi-client tests look for workers on the hosts.
# debootstrap: the release matrix builds Debian roots carrying Ceph 18.2 and 20.2.
packages=(ceph ceph-mon ceph-osd ceph-mgr radosgw ceph-common fio iperf3 uuid-runtime curl git
  openssh-server openssh-client iproute2 docker-registry skopeo apache2-utils procps debootstrap)
# libxml2-utils (xmllint): the tests validate `compare --format junit`
# against the JUnit schema (scripts/junit-xsd.sh, below).
packages+=(libxml2-utils)
# postgresql (15 on Debian 12): runner/cli/tests/postgres.rs starts its own
# server (initdb in a temporary folder, a loopback port) for `pipeline
# publish` and `history --db`, and runs the Grafana dashboard's SQL.
packages+=(postgresql)
# prometheus, prometheus-pushgateway: runner/cli/tests/prometheus.rs starts
# its own of each on loopback ports (scraping `run --metrics-listen`, taking
# `--metrics-push`); the services the packages install are stopped below.
packages+=(prometheus prometheus-pushgateway)
# tmux: the package tier (runner/cli/tests/package.rs) types `pipeline r` +
# Tab into a real interactive bash and reads the completions off the screen.
packages+=(tmux)
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  echo "installing: ${missing[*]}"
  sudo_cmd=()
  [ "$(id -u)" -eq 0 ] || sudo_cmd=(sudo)
  "${sudo_cmd[@]}" apt-get update -q
  # A postinst prints "Failed to connect to bus" without systemd; the install still succeeds.
  DEBIAN_FRONTEND=noninteractive "${sudo_cmd[@]}" apt-get install -y -q --no-install-recommends "${missing[@]}"
  if [[ " ${missing[*]} " == *" docker-registry "* ]]; then
    # Debian starts its docker-registry service on install (port 5000, every
    # interface). Nothing here needs it: the sandbox and the tests start their
    # own on 127.0.0.1. Stop and disable the one this install started.
    if [ -d /run/systemd/system ]; then
      "${sudo_cmd[@]}" systemctl disable --now docker-registry >/dev/null 2>&1 || true
    else
      "${sudo_cmd[@]}" service docker-registry stop >/dev/null 2>&1 || true
      "${sudo_cmd[@]}" update-rc.d docker-registry disable >/dev/null 2>&1 || true
    fi
  fi
  for service in prometheus prometheus-pushgateway; do
    # Debian starts them on install (ports 9090 and 9091, every interface).
    [[ " ${missing[*]} " == *" $service "* ]] || continue
    if [ -d /run/systemd/system ]; then
      "${sudo_cmd[@]}" systemctl disable --now "$service" >/dev/null 2>&1 || true
    else
      "${sudo_cmd[@]}" service "$service" stop >/dev/null 2>&1 || true
      "${sudo_cmd[@]}" update-rc.d "$service" disable >/dev/null 2>&1 || true
    fi
  done
  if [[ " ${missing[*]} " == *" postgresql "* ]]; then
    # Debian's postinst creates and starts a cluster 15/main on port 5432.
    # The tests start their own; stop this one and keep it from booting.
    "${sudo_cmd[@]}" pg_ctlcluster 15 main stop >/dev/null 2>&1 || true
    if [ -d /run/systemd/system ]; then
      "${sudo_cmd[@]}" systemctl disable --now postgresql >/dev/null 2>&1 || true
    else
      "${sudo_cmd[@]}" service postgresql stop >/dev/null 2>&1 || true
      "${sudo_cmd[@]}" update-rc.d postgresql disable >/dev/null 2>&1 || true
    fi
  fi
fi
command -v cargo >/dev/null || { echo "error: cargo not found; install Rust 1.95+ (rustup)" >&2; exit 1; }

# cargo-deb: scripts/build-deb.sh packages the runner (the package tier
# installs that .deb). Pinned and --locked so it builds the same with rustc
# 1.95; about 2 minutes, once. Checked locally: no network when present.
cargo deb --version >/dev/null 2>&1 || cargo install cargo-deb --locked --version 3.8.0

# WASM plugins: the Rust guest target and the Python component builder.
# Both checks are local (no network when all is there: the README's block runs
# this offline, scripts/readme-using-it.sh). grep reads the whole list (not -q,
# which may stop reading first and fail the pipe under pipefail, and then
# `rustup target add` would be asked to download).
rustup target list --installed | grep -x wasm32-wasip2 >/dev/null || rustup target add wasm32-wasip2
command -v componentize-py >/dev/null || python3 -m pip install --quiet componentize-py==0.25.1

# The JUnit schema CI servers read reports with (junit-10.xsd), for the
# integrations tier: fetched once from PyPI (a pinned pytest sdist), a no-op
# when it is in place (the README's block runs this offline).
scripts_dir="$(dirname "$0")"
"$scripts_dir/junit-xsd.sh" >/dev/null
