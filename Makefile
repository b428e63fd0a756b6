# roam — the two commands a newcomer needs are `make demo` and `make test`.
GO      ?= go
BIN     := bin
# Integration tests bring up emulated clusters; give them room on 2 cores.
TESTTIMEOUT ?= 19m

.PHONY: all build deps test unit demo bench-agent bench-jobs clean

all: build

# Installs what is missing (iproute2, CRIU >= 4.2, Go modules); quiet when
# there is nothing to do.
deps:
	@bash scripts/deps.sh

build: deps $(BIN)/roam-init
	@$(GO) build -o $(BIN)/ ./cmd/...

# PID 1 of every job's namespaces; static, so CRIU sees no shared libraries.
$(BIN)/roam-init: cinit/roam-init.c
	@mkdir -p $(BIN)
	@gcc -O2 -Wall -Wextra -static -o $@ $<

# Every test: unit tests of the pure core and integration tests on emulated
# clusters with real agents (root required).
test: build
	$(GO) test -count=1 -timeout $(TESTTIMEOUT) ./...

# Only the tests that need no root and no cluster.
unit:
	$(GO) test -count=1 ./internal/load/ ./internal/sched/ ./internal/secret/ ./internal/agent/

demo: build
	@bash scripts/demo.sh

# Agent cost on an idle 8-node cluster (CPU per agent, gossip bytes per node).
bench-agent: build
	@$(BIN)/roam bench agent-cost

# roam run -d of 1,000 true jobs on 4 nodes vs a local shell loop, same run.
bench-jobs: build
	@$(BIN)/roam bench job-start

clean:
	rm -rf $(BIN)
