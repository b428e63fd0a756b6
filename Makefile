# roam — the two commands a newcomer needs are `make demo` and `make test`.
GO      ?= go
BIN     := bin
# Integration tests bring up emulated clusters; give them room on 2 cores.
TESTTIMEOUT ?= 19m

.PHONY: all build deps test unit demo bench bench-agent bench-jobs bench-migrate bench-balance clean

all: build

# Installs what is missing (iproute2, CRIU >= 4.2, Go modules); quiet when
# there is nothing to do.
deps:
	@bash scripts/deps.sh

WORKLOADS := $(BIN)/migjob $(BIN)/burn $(BIN)/bgload $(BIN)/dkg $(BIN)/usercode $(BIN)/syscode $(BIN)/matmul $(BIN)/mgs

build: deps $(BIN)/roam-init $(WORKLOADS)
	@$(GO) build -o $(BIN)/ ./cmd/...

# The workloads the migration tests and benchmarks move around.
$(BIN)/migjob: workloads/migjob.c
	@mkdir -p $(BIN)
	@gcc -O2 -Wall -pthread -o $@ $<

$(BIN)/burn: workloads/burn.c
	@mkdir -p $(BIN)
	@gcc -O2 -Wall -o $@ $<

$(BIN)/bgload: workloads/bgload.c
	@mkdir -p $(BIN)
	@gcc -O2 -Wall -o $@ $<

# The benchmark framework's workloads (roam bench list); deterministic given
# a seed, each prints its result and its own CPU and elapsed time.
$(BIN)/dkg: workloads/dkg.c workloads/common.h
	@mkdir -p $(BIN)
	@gcc -O2 -Wall -o $@ $< -lcrypto

$(BIN)/usercode $(BIN)/syscode $(BIN)/matmul $(BIN)/mgs: $(BIN)/%: workloads/%.c workloads/common.h
	@mkdir -p $(BIN)
	@gcc -O2 -Wall -o $@ $< -lm

# PID 1 of every job's namespaces; static, so CRIU sees no shared libraries.
$(BIN)/roam-init: cinit/roam-init.c
	@mkdir -p $(BIN)
	@gcc -O2 -Wall -Wextra -static -o $@ $<

# Every test: unit tests of the pure core and integration tests on emulated
# clusters with real agents (root required).
test: build
	$(GO) test -count=1 -timeout $(TESTTIMEOUT) ./...

# Only the tests that need no root and no cluster: the pure core (load,
# sched, migrate: its golden tables and 10,000 random migrations with
# faults), the agent's in-process harness (four whole agents on a fake
# clock and network: 10,000 migrations under faults, herding, reservation
# expiry), the layout rules.
unit:
	$(GO) test -count=1 ./internal/load/ ./internal/sched/ ./internal/migrate/ ./internal/secret/ ./internal/agent/ ./internal/bench/ ./internal/api/ ./internal/emu/ ./cmd/roam/ ./test/layout/

demo: build
	@bash scripts/demo.sh

# Agent cost on an idle 8-node cluster (CPU per agent, gossip bytes per node).
bench-agent: build
	@$(BIN)/roam bench agent-cost

# roam run -d of 1,000 true jobs on 4 nodes vs a local shell loop, same run.
bench-jobs: build
	@$(BIN)/roam bench job-start

# Freeze and total time of eager and lazy migrations of 16 MiB, 128 MiB and
# 1 GiB processes, next to a raw copy of the same bytes and a local CRIU
# dump and restore, same run (3 repetitions).
bench-migrate: build
	@$(BIN)/roam bench migrate --reps 3

# Every experiment of the benchmark framework (roam bench list), 6
# repetitions each, one report in bench-results/.
bench: build
	@$(BIN)/roam bench all

# Makespan of 12 equal jobs typed on the slowest of 4 heterogeneous nodes:
# balance vs static vs the ideal, without and with a background load.
bench-balance: build
	@$(BIN)/roam bench balance --both

clean:
	rm -rf $(BIN)
