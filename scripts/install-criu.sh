#!/usr/bin/env bash
# install-criu — installs CRIU >= 4.2 for roamd on a Debian host, where the
# distribution's is older (Debian 12 has 3.17, which fails `criu check` on
# recent kernels; 4.1.1 cannot dump inet sockets on kernels >= 6.16).
# Idempotent and quiet when there is nothing to do. Run it as root:
#
#     /usr/libexec/roam/install-criu      (from the roam package)
#     bash scripts/install-criu.sh        (from the source tree; deps.sh runs it)
#
# roam runs CRIU 4.2.1 with the patches in criu-patches/ beside this script
# (scripts/criu-patches in the source tree, /usr/libexec/roam/criu-patches
# from the package): each says in its header what it fixes. A system criu is
# used when it is >= 4.2, `criu check` says "Looks good" and it carries
# those patches (linked to PREFIX/sbin/criu). Otherwise the 4.2.1 source is
# fetched from Debian unstable's source pool (its sha256 checked against the
# Sources index), its build dependencies installed, the patches applied with
# `patch -p1`, and it is built with `make criu` into PREFIX/sbin/criu
# (ROAM_PREFIX, default /opt/roam, where roamd looks first), keeping its
# cache of kernel facts in /run/roam/criu. About a minute, once, and again
# whenever the patches change: the binary carries a mark naming them. The
# mirror is read from the machine's own apt configuration; no host name is
# written here.
set -euo pipefail

PREFIX=${ROAM_PREFIX:-/opt/roam}
CRIU_WANT=4.2.1
CRIU_BIN="$PREFIX/sbin/criu"
CRIU_RUNDIR=/run/roam/criu
CRIU_PATCHES="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)/criu-patches"

say() { echo "${ROAM_SAY:-install-criu}: $*" >&2; }

apt_updated=0
apt_install() {
  local missing=()
  for p in "$@"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
  done
  [ ${#missing[@]} -eq 0 ] && return 0
  if [ $apt_updated -eq 0 ]; then
    say "apt-get update"
    apt-get update -qq >/dev/null
    apt_updated=1
  fi
  say "installing ${missing[*]}"
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
}

# version_ge A B: true when version A >= B.
version_ge() { [ "$(printf '%s\n%s\n' "$2" "$1" | sort -V | head -n1)" = "$2" ]; }

criu_ok() {
  local bin=$1 v
  [ -x "$bin" ] || return 1
  v=$("$bin" --version 2>/dev/null | sed -n 's/^Version: *//p')
  [ -n "$v" ] && version_ge "$v" 4.2 || return 1
  "$bin" check 2>&1 | grep -q "Looks good"
}

# criu_cached BIN: BIN keeps its kernel facts in CRIU_RUNDIR (built by
# build_criu; a build of an earlier deps.sh kept them in /run).
criu_cached() { grep -a -q -F "$CRIU_RUNDIR/criu.kdat" "$1"; }

# patches_mark names the patch set: its files' names and a hash of their
# contents, which build_criu compiles into the binary.
patches_mark() {
  local p names="" found=0
  for p in "$CRIU_PATCHES"/*.patch; do
    [ -f "$p" ] || continue
    found=1
    names+="${names:+,}$(basename "$p" .patch | cut -d- -f1)"
  done
  [ $found -eq 1 ] || { say "no CRIU patches in $CRIU_PATCHES"; return 1; }
  echo "roam-criu-patches $names $(cat "$CRIU_PATCHES"/*.patch | sha256sum | cut -c1-16)"
}

# criu_patched BIN: BIN was built with today's patches.
criu_patched() {
  local mark
  mark=$(patches_mark) || return 1
  grep -a -q -F "$mark" "$1"
}

mirror_uri() {
  local f uri=""
  for f in /etc/apt/sources.list.d/debian.sources; do
    [ -f "$f" ] && uri=$(awk '/^URIs:/ {print $2; exit}' "$f")
  done
  if [ -z "$uri" ] && [ -f /etc/apt/sources.list ]; then
    uri=$(awk '$1=="deb" && $2 !~ /security/ {print $2; exit}' /etc/apt/sources.list)
  fi
  [ -n "$uri" ] || { say "no Debian mirror found in the apt configuration"; return 1; }
  echo "${uri%/}"
}

build_criu() {
  apt_install build-essential libprotobuf-dev libprotobuf-c-dev protobuf-c-compiler \
    protobuf-compiler python3-protobuf libnl-3-dev libnet1-dev libcap-dev libbsd-dev \
    pkg-config libaio-dev libgnutls28-dev uuid-dev curl xz-utils ca-certificates patch
  local uri work src_list dir line sum name
  uri=$(mirror_uri)
  work=$(mktemp -d /tmp/roam-criu.XXXXXX)
  src_list=/etc/apt/sources.list.d/roam-sid-src.list
  # A RETURN trap outlives its function: it removes itself, or it would
  # fire again at the caller's return, its locals gone (set -u).
  trap 'rm -f "$src_list"; rm -rf "$work"; trap - RETURN' RETURN
  say "building CRIU $CRIU_WANT from Debian unstable's source pool (about a minute)"
  echo "deb-src $uri sid main" >"$src_list"
  apt-get update -qq >/dev/null
  apt-cache showsrc criu >"$work/showsrc" 2>/dev/null || true
  rm -f "$src_list"
  apt-get update -qq >/dev/null
  # Pick the stanza of the wanted version.
  awk -v v="$CRIU_WANT" 'BEGIN{RS=""} $0 ~ "\nVersion: " v {print; exit}' "$work/showsrc" >"$work/stanza"
  dir=$(sed -n 's/^Directory: *//p' "$work/stanza")
  line=$(awk '/^Checksums-Sha256:/ {f=1; next} f && /^ / {print} f && !/^ / {f=0}' "$work/stanza" | grep "criu_${CRIU_WANT}.orig.tar" | head -n1)
  [ -n "$dir" ] && [ -n "$line" ] || { say "criu $CRIU_WANT not found in the unstable Sources index"; return 1; }
  sum=$(echo "$line" | awk '{print $1}')
  name=$(echo "$line" | awk '{print $3}')
  curl -fsSL -o "$work/$name" "$uri/$dir/$name"
  echo "$sum  $work/$name" | sha256sum -c --quiet - || { say "sha256 mismatch for $name"; return 1; }
  tar -C "$work" -xf "$work/$name"
  local p mark
  mark=$(patches_mark)
  for p in "$CRIU_PATCHES"/*.patch; do
    patch -d "$work/criu-$CRIU_WANT" -p1 --forward --quiet <"$p" || { say "$(basename "$p") does not apply to CRIU $CRIU_WANT"; return 1; }
  done
  # The mark criu_patched looks for (used: kept though nothing reads it).
  printf '\nstatic const char roam_criu_patches[] __attribute__((used)) = "%s";\n' "$mark" >>"$work/criu-$CRIU_WANT/criu/crtools.c"
  # RUNDIR: where CRIU caches what it learnt of the kernel (internal/ckpt/kerndat.go).
  # An empty SOURCE_DATE_EPOCH: each build stamps its cache with its own
  # time, so a rebuilt CRIU never believes an older one's.
  SOURCE_DATE_EPOCH= make -C "$work/criu-$CRIU_WANT" -j"$(nproc)" RUNDIR="$CRIU_RUNDIR" criu >"$work/build.log" 2>&1 || { tail -n 30 "$work/build.log" >&2; return 1; }
  install -D -m 0755 "$work/criu-$CRIU_WANT/criu/criu" "$CRIU_BIN"
  say "installed $CRIU_BIN"
}

# install_criu leaves a usable CRIU >= 4.2 at CRIU_BIN.
install_criu() {
  if command -v criu >/dev/null 2>&1 && criu_ok "$(command -v criu)" && criu_patched "$(command -v criu)"; then
    mkdir -p "$PREFIX/sbin"
    ln -sf "$(command -v criu)" "$CRIU_BIN" 2>/dev/null || true
  elif ! criu_ok "$CRIU_BIN" || ! criu_cached "$CRIU_BIN" || ! criu_patched "$CRIU_BIN"; then
    build_criu
    criu_ok "$CRIU_BIN" || { say "$CRIU_BIN does not pass 'criu check'"; "$CRIU_BIN" check >&2 || true; exit 1; }
    criu_patched "$CRIU_BIN" || { say "$CRIU_BIN lacks the mark of roam's CRIU patches"; exit 1; }
  fi
}

# Run, not sourced (deps.sh sources it for its functions).
if [ "${BASH_SOURCE[0]}" = "$0" ]; then
  install_criu
fi
