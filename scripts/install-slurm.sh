#!/usr/bin/env bash
# install-slurm.sh — installs what `roam cluster up --slurm` runs on a Debian
# host: Debian's Slurm (slurmctld, slurmd, its clients, slurmdbd), munge and
# MariaDB, whose server holds the accounting database sacct reads. Idempotent
# and quiet when there is nothing to do; deps.sh runs it, so that the Slurm
# test (test/e2e/slurm_test.go) runs on a fresh machine.
#
# It starts none of their system services: an emulated cluster starts its own
# daemons, with its own key, configuration and database, in its nodes'
# namespaces (internal/emu/slurm.go). Where no policy-rc.d says otherwise, one
# is put in place for the install and removed after it, so that the packages'
# scripts neither start a system munged or MariaDB nor enable them.
set -euo pipefail

ROAM_SAY=${ROAM_SAY:-install-slurm}
# shellcheck source=scripts/install-criu.sh
. "$(dirname "${BASH_SOURCE[0]}")/install-criu.sh"

slurm_packages=(slurmctld slurmd slurm-client slurmdbd munge mariadb-server mariadb-client)

install_slurm() {
  local missing=() p
  for p in "${slurm_packages[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
  done
  [ ${#missing[@]} -eq 0 ] && return 0
  local policy=/usr/sbin/policy-rc.d placed=0
  if [ ! -e "$policy" ]; then
    printf '#!/bin/sh\nexit 101\n' >"$policy"
    chmod 755 "$policy"
    placed=1
  fi
  local rc=0
  apt_install "${missing[@]}" || rc=$?
  [ $placed -eq 1 ] && rm -f "$policy"
  return $rc
}

if [ "${BASH_SOURCE[0]}" = "$0" ]; then
  install_slurm
fi
