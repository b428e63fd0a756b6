# roam — the two commands a newcomer needs are `make demo` and `make test`.
GO      ?= go
BIN     := bin
# Integration tests bring up emulated clusters; give them room on 2 cores.
# A guard against a hung test, not the 25-minute budget: the end-to-end
# package alone took 24.8 minutes on this 2-core machine at load average 60.
TESTTIMEOUT ?= 45m

.PHONY: test-long fuzz-until all build deps test fuzz unit demo bench bench-agent bench-jobs bench-sweep bench-migrate bench-checkpoint bench-balance bench-chaos bench-slurm-array bench-slurm-neighbor clean release install deb

# The version every binary reports (roam --version, roamd --version) and
# the package carries: the last commit's date and hash.
VERSION ?= $(shell git log -1 --format=0.2.0+git%cd.%h --date=format:%Y%m%d 2>/dev/null || echo 0.2.0)
LDFLAGS := -X roam/internal/api.Version=$(VERSION)

# make install: PREFIX and DESTDIR as usual; the config goes to
# SYSCONFDIR/roam, the systemd unit to UNITDIR.
PREFIX     ?= /usr/local
DESTDIR    ?=
SYSCONFDIR ?= /etc
UNITDIR    ?= $(PREFIX)/lib/systemd/system
DOCDIR     ?= $(PREFIX)/share/doc/roam

all: build

# Installs what is missing (iproute2, CRIU >= 4.2, Go modules); quiet when
# there is nothing to do.
deps:
	@bash scripts/deps.sh

WORKLOADS := $(BIN)/migjob $(BIN)/burn $(BIN)/bgload $(BIN)/dkg $(BIN)/usercode $(BIN)/syscode $(BIN)/matmul $(BIN)/mgs $(BIN)/startloop $(BIN)/sweepjob

build: deps $(BIN)/roam-init $(WORKLOADS)
	@$(GO) build -ldflags "$(LDFLAGS)" -o $(BIN)/ ./cmd/...

# The workloads the migration tests and benchmarks move around.
$(BIN)/migjob: workloads/migjob.c
	@mkdir -p $(BIN)
	@gcc -O2 -Wall -pthread -o $@ $<

$(BIN)/burn: workloads/burn.c workloads/common.h
	@mkdir -p $(BIN)
	@gcc -O2 -Wall -o $@ $<

$(BIN)/bgload: workloads/bgload.c
	@mkdir -p $(BIN)
	@gcc -O2 -Wall -o $@ $<

$(BIN)/sweepjob: workloads/sweepjob.c workloads/common.h
	@mkdir -p $(BIN)
	@gcc -O2 -Wall -o $@ $<

# The benchmark framework's workloads (roam bench list); deterministic given
# a seed, each prints its result and its own CPU and elapsed time.
$(BIN)/dkg: workloads/dkg.c workloads/common.h
	@mkdir -p $(BIN)
	@gcc -O2 -Wall -o $@ $< -lcrypto

$(BIN)/usercode $(BIN)/syscode $(BIN)/matmul $(BIN)/mgs $(BIN)/startloop: $(BIN)/%: workloads/%.c workloads/common.h
	@mkdir -p $(BIN)
	@gcc -O2 -Wall -o $@ $< -lm

# PID 1 of every job's namespaces; static, so CRIU sees no shared libraries,
# and with musl, whose start-up asks the CPU nothing: glibc's asks CPUID
# dozens of times, each a trap to the hypervisor on a virtual machine,
# and roam-init starts twice a job (docs/benchmarks.md, job-start).
INITCC ?= musl-gcc
$(BIN)/roam-init: cinit/roam-init.c
	@mkdir -p $(BIN)
	@$(INITCC) -O2 -Wall -Wextra -static -o $@ $<

# Every test: unit tests of the pure core and integration tests on emulated
# clusters with real agents (root required).
# With the lock-order checker (lockcheck: internal/lockorder): a lock the
# agent takes out of the order of internal/agent/doc.go fails the test.
# The fuzz targets' short runs go beside the tests (one worker each), not
# after them: the end-to-end package is the critical path and leaves a core
# partly idle while its clusters wait.
test: build
	@FUZZTIME=2s FUZZFLAGS="-parallel 1" TMPDIR=/dev/shm bash scripts/fuzz.sh > $(BIN)/fuzz.log 2>&1 & fuzz=$$!; \
	$(GO) test -tags lockcheck -count=1 -timeout $(TESTTIMEOUT) ./...; rc=$$?; \
	wait $$fuzz; frc=$$?; cat $(BIN)/fuzz.log; \
	if [ $$frc -ne 0 ]; then echo "make test: a fuzz target failed (above)"; fi; \
	[ $$rc -eq 0 ] && [ $$frc -eq 0 ]

# make test, and the end-to-end checks too long for it (ROAM_TEST_LONG=1:
# every experiment of the benchmark framework in its quick form, balance
# against static under background load), which `make test` skips.
test-long: build
	ROAM_TEST_LONG=1 $(GO) test -tags lockcheck -count=1 -timeout 60m ./...
	@FUZZTIME=2s TMPDIR=/dev/shm bash scripts/fuzz.sh

# Every fuzz target for FUZZTIME each (go's -fuzztime; `make test` gives
# each 2 s after running their corpora as tests); a failure keeps its input
# under the package's testdata/fuzz/, which plain `go test` then runs.
# Each run's count goes to docs/results/fuzz-execs.tsv, whose sums
# FUZZLOG=docs/results/fuzz-execs.tsv scripts/fuzz.sh -s prints
# (docs/testing.md); `make fuzz-until N=10000000`
# runs each target, in chunks, until the log holds N executions for it.
# Both run at idle priority (SCHED_IDLE), taking only CPU nothing else
# wants: at nice 19 a campaign slowed the throttled jobs of an emulated
# cluster beside it ten times (4 processes in a 0.2-CPU group: 5.0 s
# alone, 50.9 s beside it; 5.5 s beside one at SCHED_IDLE).
FUZZTIME ?= 60s
FUZZLOG ?= docs/results/fuzz-execs.tsv
IDLE := $(shell command -v chrt >/dev/null 2>&1 && echo chrt -i 0)
fuzz:
	@FUZZLOG=$(FUZZLOG) FUZZTIME=$(FUZZTIME) TMPDIR=/dev/shm $(IDLE) bash scripts/fuzz.sh
N ?= 10000000
fuzz-until:
	@FUZZLOG=$(FUZZLOG) FUZZFLAGS="-fuzzminimizetime 100x $(FUZZFLAGS)" TMPDIR=/dev/shm $(IDLE) bash scripts/fuzz.sh -u $(N)

# Only the tests that need no root and no cluster: the pure core (load,
# sched, migrate: its golden tables and 10,000 random migrations with
# faults), the simulator (same seed, same results; the supermarket
# model), the agent's in-process harness (four whole agents on a fake
# clock and network: 10,000 migrations under faults, herding, reservation
# expiry), the layout rules.
unit:
	$(GO) test -count=1 ./internal/load/ ./internal/sched/ ./internal/sim/ ./internal/migrate/ ./internal/ckpt/ ./internal/cgroup/ ./internal/secret/ ./internal/agent/... ./internal/bench/ ./internal/api/ ./internal/emu/ ./cmd/roam/ ./test/layout/

demo: build
	@bash scripts/demo.sh

# Agent cost on an idle 8-node cluster (CPU per agent, gossip bytes per node).
bench-agent: build
	@$(BIN)/roam bench agent-cost

# Jobs started a second: a user's roam run -d of 1,000 /bin/true on 4 nodes
# vs a local loop doing the same kernel work, in 6 interleaved rounds.
bench-jobs: build
	@$(BIN)/roam bench job-start

# A user's sweep of 600 jobs of heavy-tailed lengths on make demo's cluster
# with a background load on node 2: roam's queue and migration vs the same
# queue with static placement, in 2 interleaved rounds (each side's ideal
# is 251 s; on a shared machine a side took 10 minutes).
bench-sweep: build
	@$(BIN)/roam bench sweep --reps 2

# Freeze and total time of eager and lazy migrations of 16 MiB, 128 MiB and
# 1 GiB processes, next to a raw copy of the same bytes and a local CRIU
# dump and restore, same run (3 repetitions).
bench-migrate: build
	@$(BIN)/roam bench migrate --reps 3

# Checkpoints: freeze time and file size of 16 MiB, 128 MiB and 1 GiB
# processes, and the slowdown of a CPU-bound job checkpointed every 10 s,
# 60 s and 600 s next to an unbroken run (about 13 minutes).
bench-checkpoint: build
	@$(BIN)/roam bench checkpoint --reps 1 --out docs/results/checkpoint

# Every experiment of the benchmark framework (roam bench list), 6
# repetitions each, one report in bench-results/.
bench: build
	@$(BIN)/roam bench all

# Makespan of 12 equal jobs typed on the slowest of 4 heterogeneous nodes:
# balance vs static vs the ideal, without and with a background load.
bench-balance: build
	@$(BIN)/roam bench balance --both

# Issue 46's sweep against Slurm alone: the same 96 jobs as a Slurm job
# array and as roam run inside one allocation of the same nodes, with a
# load on node 2 taking three quarters of it in spells of 10-30 s, in 24
# interleaved rounds (about 95 minutes; ROUNDS=N for fewer).
bench-slurm-array: build
	@BG_SHARE=0.75 BG_MIN=10 BG_MAX=30 bash scripts/bench-slurm-array.sh $${ROUNDS:-24} 96

# Issue 46's fourth node: another user's Slurm job timed alone, beside
# Slurm's own load and beside a roam allocation on the other nodes, in 8
# interleaved rounds (about 10 minutes).
bench-slurm-neighbor: build
	@bash scripts/bench-slurm-neighbor.sh 8 3

# The chaos run: 1,000 migrations, 100 checkpoint/restart cycles and 100
# faults (agents SIGKILLed, links cut, state directories filled, CRIU
# killed mid-dump) on 4 real agents, every invariant checked after every
# step; it prints its seed (SEED=N replays one). A third of its link cuts
# last past the fence's kill (docs/benchmarks.md).
bench-chaos: build
	@$(BIN)/roam bench chaos $(if $(SEED),--seed $(SEED))

clean:
	rm -rf $(BIN) build

# What a node needs, built without cgo (static: no libc version to depend
# on) and with the tag node (no emulated cluster, no benchmarks: bin/roam
# keeps them for the tests), with its man pages and shell completions
# generated from the commands themselves. The sample config is installed
# only where none is.
REL ?= build/release
release: $(BIN)/roam-init
	@mkdir -p $(REL)
	@CGO_ENABLED=0 $(GO) build -trimpath -tags node -ldflags "-s -w $(LDFLAGS)" -o $(REL)/ ./cmd/roam ./cmd/roamd
	@strip --remove-section=.comment --remove-section=.note -o $(REL)/roam-init $(BIN)/roam-init
	@rm -rf $(REL)/docs && $(REL)/roam gendocs $(REL)/docs && $(REL)/roamd gendocs $(REL)/docs

install: release
	install -D -m 0755 $(REL)/roam $(DESTDIR)$(PREFIX)/bin/roam
	install -D -m 0755 $(REL)/roamd $(DESTDIR)$(PREFIX)/sbin/roamd
	install -D -m 0755 $(REL)/roam-init $(DESTDIR)$(PREFIX)/libexec/roam/roam-init
	install -D -m 0755 scripts/install-criu.sh $(DESTDIR)$(PREFIX)/libexec/roam/install-criu
	install -d $(DESTDIR)$(PREFIX)/libexec/roam/criu-patches
	install -m 0644 scripts/criu-patches/*.patch $(DESTDIR)$(PREFIX)/libexec/roam/criu-patches/
	install -d $(DESTDIR)$(PREFIX)/share/man/man1 $(DESTDIR)$(PREFIX)/share/man/man8
	install -m 0644 $(REL)/docs/man/man1/*.1 $(DESTDIR)$(PREFIX)/share/man/man1/
	install -m 0644 $(REL)/docs/man/man8/*.8 $(DESTDIR)$(PREFIX)/share/man/man8/
	install -D -m 0644 $(REL)/docs/completions/bash/roam $(DESTDIR)$(PREFIX)/share/bash-completion/completions/roam
	install -D -m 0644 $(REL)/docs/completions/zsh/_roam $(DESTDIR)$(PREFIX)/share/zsh/vendor-completions/_roam
	install -D -m 0644 $(REL)/docs/completions/fish/roam.fish $(DESTDIR)$(PREFIX)/share/fish/vendor_completions.d/roam.fish
	install -d $(DESTDIR)$(UNITDIR)
	sed -e 's|@SBINDIR@|$(PREFIX)/sbin|g' -e 's|@DOCDIR@|$(DOCDIR)|g' packaging/roamd.service > $(DESTDIR)$(UNITDIR)/roamd.service
	chmod 0644 $(DESTDIR)$(UNITDIR)/roamd.service
	install -D -m 0644 README.md $(DESTDIR)$(DOCDIR)/README.md
	install -D -m 0644 LICENSE $(DESTDIR)$(DOCDIR)/LICENSE
	bash scripts/copyright.sh $(REL)/roam $(REL)/roamd > $(DESTDIR)$(DOCDIR)/copyright
	chmod 0644 $(DESTDIR)$(DOCDIR)/copyright
	install -D -m 0644 docs/deploy.md $(DESTDIR)$(DOCDIR)/deploy.md
	install -D -m 0644 docs/security.md $(DESTDIR)$(DOCDIR)/security.md
	install -d -m 0755 $(DESTDIR)$(SYSCONFDIR)/roam
	test -e $(DESTDIR)$(SYSCONFDIR)/roam/roamd.yaml || install -m 0644 packaging/roamd.yaml $(DESTDIR)$(SYSCONFDIR)/roam/roamd.yaml

# The Debian package, built with dpkg-deb from a staged install.
DEBROOT ?= build/deb/root
DEBOUT  ?= $(BIN)
DEBARCH := $(shell dpkg --print-architecture 2>/dev/null || echo amd64)
deb:
	@command -v dpkg-deb >/dev/null || { echo "make deb: dpkg-deb is missing (apt-get install dpkg)" >&2; exit 1; }
	rm -rf $(DEBROOT)
	$(MAKE) --no-print-directory install DESTDIR=$(abspath $(DEBROOT)) PREFIX=/usr SYSCONFDIR=/etc UNITDIR=/lib/systemd/system DOCDIR=/usr/share/doc/roam
	gzip -9n $(DEBROOT)/usr/share/man/man*/*
	install -d $(DEBROOT)/DEBIAN
	install -m 0755 packaging/deb/postinst packaging/deb/prerm packaging/deb/postrm $(DEBROOT)/DEBIAN/
	install -m 0644 packaging/deb/conffiles $(DEBROOT)/DEBIAN/
	sed -e 's|@VERSION@|$(VERSION)|' -e 's|@ARCH@|$(DEBARCH)|' \
	    -e "s|@SIZE@|$$(du -sk --exclude=DEBIAN $(DEBROOT) | cut -f1)|" packaging/deb/control.in > $(DEBROOT)/DEBIAN/control
	install -D -m 0644 packaging/deb/lintian-overrides $(DEBROOT)/usr/share/lintian/overrides/roam
	printf 'roam (%s) unstable; urgency=medium\n\n  * Built from commit %s.\n\n -- roam developers <roam-dev@example.org>  %s\n' \
	    '$(VERSION)' "$$(git rev-parse HEAD 2>/dev/null || echo unknown)" \
	    "$$(date -R -d @$$(git log -1 --format=%ct 2>/dev/null || date +%s))" | gzip -9n > $(DEBROOT)/usr/share/doc/roam/changelog.gz
	mkdir -p $(DEBOUT)
	dpkg-deb --root-owner-group --build $(DEBROOT) $(DEBOUT)/roam_$(VERSION)_$(DEBARCH).deb
	@command -v lintian >/dev/null || DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends lintian >/dev/null
	@lintian --fail-on error $(DEBOUT)/roam_$(VERSION)_$(DEBARCH).deb
