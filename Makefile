# actorflow — the commands a user types. `make test` is the README's test
# command and what CI (.ci/run) runs.
SHELL := /usr/bin/env bash
GO    ?= go
# check's linter (.golangci.yml says which linters and why), fetched through the Go module proxy.
GOLANGCI_LINT := github.com/golangci/golangci-lint/v2/cmd/golangci-lint@v2.15.0

# The supported broker versions (KAFKA_VERSION_NEWEST, KAFKA_VERSION_OLDEST), written once for the
# scripts and this file. KAFKA_VERSION is the one switch: every target that starts a broker
# (test-itest, bench-real, cluster-up, chaos*) runs this version; default the newest.
include scripts/kafka-versions.env
KAFKA_VERSION ?= $(KAFKA_VERSION_NEWEST)
export KAFKA_VERSION

.PHONY: test test-fast test-itest test-itest-all test-itest-oldest bench-rebalance check demo bench bench-real bench-go cluster-up cluster-down cluster-status chaos chaos-short chaos-plain

## test: everything — vet and format checks, unit and kfake tests under -race,
## then the integration suite on a real Apache Kafka broker (provisioned by
## scripts/: container engine + broker image, installed when missing).
test: check test-fast test-itest

## test-fast: unit and kfake tests only (no container engine needed). The
## itest package reports every test as SKIPPED, loudly.
test-fast:
	ACTORFLOW_SKIP_ITEST=1 $(GO) test -race -count=1 ./...

## test-itest: the dockertest integration suite on a real broker (KAFKA_VERSION, default the newest).
test-itest:
	scripts/itest.sh

## test-itest-oldest: the same suite on the oldest supported broker.
test-itest-oldest:
	KAFKA_VERSION=$(KAFKA_VERSION_OLDEST) scripts/itest.sh

## test-itest-all: the suite on the newest and on the oldest supported broker, one after the
## other (each on a fresh broker); fails if either fails. Not in CI (which runs the newest).
test-itest-all:
	@rc=0; for v in $(KAFKA_VERSION_NEWEST) $(KAFKA_VERSION_OLDEST); do \
	  echo "=== make test-itest-all: Kafka $$v"; \
	  KAFKA_VERSION=$$v scripts/itest.sh || { echo "=== make test-itest-all: Kafka $$v FAILED"; rc=1; }; \
	done; \
	[ $$rc = 0 ] && echo "=== make test-itest-all: passed on $(KAFKA_VERSION_NEWEST) and $(KAFKA_VERSION_OLDEST)"; exit $$rc

## check: gofmt, go vet, go.mod/go.sum tidy, and golangci-lint's nilerr and errorlint (.golangci.yml).
check:
	@unformatted="$$(gofmt -l $$(git ls-files '*.go'))"; \
	if [ -n "$$unformatted" ]; then echo "gofmt needed:"; echo "$$unformatted"; exit 1; fi
	$(GO) vet ./...
	@$(GO) mod tidy -diff || { echo "go.mod/go.sum not tidy: run go mod tidy"; exit 1; }
	$(GO) run $(GOLANGCI_LINT) run -c .golangci.yml ./...

## demo: the ledger demo on an embedded cluster (transactional mode).
demo:
	$(GO) run ./cmd/demo

## bench: Experiments A and B of the seed (embedded broker; BROKERS=host:port for a real one).
bench:
	$(GO) run ./cmd/bench $(if $(BROKERS),--brokers $(BROKERS))

BENCH_BIN ?= $(or $(TMPDIR),/tmp)/actorflow-bench

## bench-real: on a real Kafka broker (KAFKA_VERSION), Experiments A and B, then the E2E benchmark (1M ledger
## events, 10k and 1M keys, 8 partitions: the raw franz-go pipe, plain, transactional, each with
## outputs), then Experiment L (output latency at 2 000 and 20 000 events/s: the GroupTransactSession
## reference, transactional, plain; ~6 min), then L through a join and a SIGKILL (gts and transactional
## member processes, 6 s session timeout; ~3 min). Default: the integration suite's broker (a fresh
## container, ~35 min in all). BROKERS=host:port uses a running one instead (scripts/bench-broker.sh
## start prints one). BENCH_ARGS, E2E_ARGS, LAT_ARGS and LAT_REBALANCE_ARGS add flags to the four runs (go run ./cmd/bench -h).
bench-real:
ifdef BROKERS
	$(GO) build -o $(BENCH_BIN) ./cmd/bench
	$(BENCH_BIN) --brokers $(BROKERS) $(BENCH_ARGS)
	$(BENCH_BIN) --brokers $(BROKERS) --experiment E2E $(E2E_ARGS)
	$(BENCH_BIN) --brokers $(BROKERS) --experiment L $(LAT_ARGS)
	$(BENCH_BIN) --brokers $(BROKERS) --experiment L --lat-rate 2000 --lat-duration 30s --lat-warmup 10s \
		--lat-systems gts,txn --lat-rebalance --lat-session-timeout 6s $(LAT_REBALANCE_ARGS)
else
	ACTORFLOW_ITEST_BENCH=1 ACTORFLOW_ITEST_BENCH_ARGS="$(BENCH_ARGS)" ACTORFLOW_ITEST_E2E_ARGS="$(E2E_ARGS)" \
		ACTORFLOW_ITEST_LAT_ARGS="$(LAT_ARGS)" ACTORFLOW_ITEST_LAT_REBALANCE_ARGS="$(LAT_REBALANCE_ARGS)" scripts/itest.sh -run TestBenchOnRealBroker -timeout 180m
endif

## bench-rebalance: time from a worker joining or leaving until every partition processes again,
## classic cooperative-sticky vs KIP-848, on the real broker (KAFKA_VERSION; RUNS=3 rounds;
## HEARTBEAT=1s gives both protocols that heartbeat interval instead of their defaults).
bench-rebalance:
	ACTORFLOW_ITEST_BENCH=1 ACTORFLOW_ITEST_BENCH_RUNS=$(or $(RUNS),3) ACTORFLOW_ITEST_BENCH_HEARTBEAT=$(HEARTBEAT) scripts/itest.sh -timeout 60m -run TestRebalanceTime

## bench-go: the actor-tree benchmarks (throughput, the life of a key seen once, keys with several records per batch; heap per key takes minutes).
bench-go:
	$(GO) test ./partitionflow -run '^$$' -bench Throughput -benchtime 2000000x -count 3 -benchmem
	$(GO) test ./partitionflow -run '^$$' -bench FreshKeys -benchtime 1000000x -count 3
	$(GO) test ./partitionflow -run '^$$' -bench ScatteredKeys -benchtime 2000000x -count 3
	$(GO) test ./partitionflow -run '^$$' -bench 'HeapPerKey' -benchtime 1x

## cluster-up: the demo cluster in containers: Kafka, producer, 3 workers (MODE=plain for the plain mode;
## BROKERS=3 for three brokers, deploy/docker-compose.brokers3.yml).
cluster-up:
	scripts/cluster.sh up $(if $(MODE),--mode $(MODE)) $(if $(BROKERS),--brokers $(BROKERS))

## cluster-down: remove the demo cluster (containers, network, demo image).
cluster-down:
	scripts/cluster.sh down

cluster-status:
	scripts/cluster.sh status

## chaos-short: 12 faults of every kind on a fresh cluster, then the verifier (~5 min). BROKERS=3: on three
## brokers, the last fault a node_kill.
chaos-short:
	scripts/chaos.sh --short $(if $(BROKERS),--brokers $(BROKERS))

## chaos: the long run, 50 faults (~18 min); FAULTS=N for more; BROKERS=3 adds node_kill and node_pause to the kinds.
chaos:
	scripts/chaos.sh $(if $(FAULTS),--faults $(FAULTS)) $(if $(BROKERS),--brokers $(BROKERS))

## chaos-plain: plain mode under zombies; the verifier catches #732 (exits 1 when it does). Not in CI.
chaos-plain:
	scripts/chaos.sh --mode plain --kinds zombie,zombie_handover --faults 10

## chaos-cluster: the node-kill chaos on the 3-node KRaft cluster (scripts/kafka-cluster.sh, loopback JVMs):
## 3 actorflow workers (transactional, an output per event) and, as the reference, a franz-go
## GroupTransactSession pipe; three times SIGKILL of the node that coordinates transactions of the
## workers and leads input partitions, 15 s down, restart. Passes with 0 worker exits, 0 ledger
## mismatches and no output missing, duplicated or reordered (read_committed); the report (latency,
## stalls per kill, both systems) goes to $$ACTORFLOW_CACHE/cluster3/runs/<time>/report.md. Built
## without -race: it measures latency (~7 min). KILLS=N for another number of kills.
.PHONY: chaos-cluster chaos-cluster-short
chaos-cluster:
	ACTORFLOW_ITEST_CLUSTER=1 $(if $(KILLS),ACTORFLOW_CLUSTER_KILLS=$(KILLS)) $(GO) test -count=1 -v -timeout 40m -run TestClusterNodeKills ./itest/cluster/

## chaos-cluster-short: CI's version: the same three kills and pass condition, actorflow alone, a shorter
## warm-up and settle (~6 min).
chaos-cluster-short:
	ACTORFLOW_ITEST_CLUSTER=1 ACTORFLOW_CLUSTER_SYSTEMS=actorflow ACTORFLOW_CLUSTER_WARMUP=10s ACTORFLOW_CLUSTER_SETTLE=20s \
		$(GO) test -count=1 -v -timeout 30m -run TestClusterNodeKills ./itest/cluster/

## bench-cluster: performance on the 3-node loopback cluster (acks=all across three replicas, topics RF 3):
## the E2E drain (raw pipe, plain, transactional) and Experiment L (output latency, the GroupTransactSession
## reference beside), scripts/bench-cluster.sh (~10 min). E2E_ARGS / LAT_ARGS add cmd/bench flags.
.PHONY: bench-cluster
bench-cluster:
	E2E_ARGS="$(E2E_ARGS)" LAT_ARGS="$(LAT_ARGS)" scripts/bench-cluster.sh

## cluster3-test: issue 16's node kills on a 3-node KRaft cluster on loopback (scripts/kafka-cluster.sh:
## Java 17 and the cached Maven jars, no container engine; ~10 min). KAFKA_VERSION=4.1.2 for the older broker;
## ACTORFLOW_CLUSTER_* knobs in itest/cluster. Not part of `make test`.
.PHONY: cluster3-test
cluster3-test:
	ACTORFLOW_ITEST_CLUSTER=1 $(GO) test -race -count=1 -v -timeout 40m -run TestCluster ./itest/cluster/

## kgo-drop-proof: kgo's dropped commit shown deterministically (a copy of kgo that sleeps where the
## race is), and the store's transaction tests holding under it (scripts/kgo-drop-proof.sh, ~25 s).
## Run it after a kgo upgrade: it says whether kgo still has the bug. Not part of `make test`.
.PHONY: kgo-drop-proof
kgo-drop-proof:
	scripts/kgo-drop-proof.sh
