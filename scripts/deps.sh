#!/usr/bin/env bash
# deps.sh — installs what roam needs on a Debian machine; idempotent and quiet
# when there is nothing to do. Both `make demo` and `make test` call it.
#
# What it installs:
#   - Debian packages: iproute2 (ip, tc), util-linux (nsenter), tmux (roam top
#     tests), gcc/make, musl-tools (roam-init is built with musl),
#     libssl-dev (the dkg workload), chromium (the web
#     view's browser test, driven by chromedp), systemd (systemd-analyze
#     verifies the unit) and the CRIU build dependencies.
#   - CRIU >= 4.2 (scripts/install-criu.sh, which the package ships as
#     /usr/libexec/roam/install-criu).
#   - Debian's Slurm, munge and MariaDB for `roam cluster up --slurm` and
#     its test (scripts/install-slurm.sh), their system services not started.
set -euo pipefail

# The CRIU part, and apt_install and say (scripts/install-criu.sh).
ROAM_SAY=deps
# shellcheck source=scripts/install-criu.sh
. "$(dirname "$0")/install-criu.sh"

# bc: make demo's arithmetic (scripts/demo.sh).
apt_install iproute2 util-linux tmux gcc make musl-tools libssl-dev bc
# The real programs the migration tests move (test/e2e/programs_test.go).
apt_install xz-utils sqlite3 python3 coreutils
# The headless browser of the web view's test (test/e2e/web_test.go), and
# systemd-analyze, which verifies the unit (test/e2e/deploy_test.go).
apt_install chromium systemd

install_criu

# shellcheck source=scripts/install-slurm.sh
. "$(dirname "$0")/install-slurm.sh"
install_slurm

# Go modules for the build (offline afterwards).
if [ -f go.mod ]; then go mod download >/dev/null 2>&1 || go mod download; fi
