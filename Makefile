# actorflow — the commands a user types. `make test` is the README's test
# command and what CI (.ci/run) runs.
SHELL := /usr/bin/env bash
GO    ?= go

.PHONY: test test-fast test-itest check demo bench bench-real bench-go cluster-up cluster-down cluster-status chaos chaos-short chaos-plain

## test: everything — vet and format checks, unit and kfake tests under -race,
## then the integration suite on a real Apache Kafka broker (provisioned by
## scripts/: container engine + broker image, installed when missing).
test: check test-fast test-itest

## test-fast: unit and kfake tests only (no container engine needed). The
## itest package reports every test as SKIPPED, loudly.
test-fast:
	ACTORFLOW_SKIP_ITEST=1 $(GO) test -race -count=1 ./...

## test-itest: the dockertest integration suite on a real broker.
test-itest:
	scripts/itest.sh

## check: gofmt, go vet, and go.mod/go.sum tidy.
check:
	@unformatted="$$(gofmt -l $$(git ls-files '*.go'))"; \
	if [ -n "$$unformatted" ]; then echo "gofmt needed:"; echo "$$unformatted"; exit 1; fi
	$(GO) vet ./...
	@$(GO) mod tidy -diff || { echo "go.mod/go.sum not tidy: run go mod tidy"; exit 1; }

## demo: the ledger demo on an embedded cluster (transactional mode).
demo:
	$(GO) run ./cmd/demo

## bench: Experiments A and B of the seed (embedded broker; BROKERS=host:port for a real one).
bench:
	$(GO) run ./cmd/bench $(if $(BROKERS),--brokers $(BROKERS))

BENCH_BIN ?= $(or $(TMPDIR),/tmp)/actorflow-bench

## bench-real: on a real Kafka broker, Experiments A and B, then the E2E benchmark (1M ledger
## events, 10k and 1M keys, 8 partitions: the raw franz-go pipe, plain, transactional, each with
## outputs). Default: the integration suite's broker (a fresh container, ~30 min in all).
## BROKERS=host:port uses a running one instead (scripts/bench-broker.sh start prints one).
## BENCH_ARGS and E2E_ARGS add flags to the two runs (go run ./cmd/bench -h).
bench-real:
ifdef BROKERS
	$(GO) build -o $(BENCH_BIN) ./cmd/bench
	$(BENCH_BIN) --brokers $(BROKERS) $(BENCH_ARGS)
	$(BENCH_BIN) --brokers $(BROKERS) --experiment E2E $(E2E_ARGS)
else
	ACTORFLOW_ITEST_BENCH=1 ACTORFLOW_ITEST_BENCH_ARGS="$(BENCH_ARGS)" ACTORFLOW_ITEST_E2E_ARGS="$(E2E_ARGS)" \
		scripts/itest.sh -run TestBenchOnRealBroker -timeout 180m
endif

## bench-go: the actor-tree benchmarks (throughput; heap per key takes minutes).
bench-go:
	$(GO) test ./partitionflow -run '^$$' -bench Throughput -benchtime 2000000x -count 3
	$(GO) test ./partitionflow -run '^$$' -bench 'HeapPerKey' -benchtime 1x

## cluster-up: the demo cluster in containers: Kafka, producer, 3 workers (MODE=plain for the plain mode).
cluster-up:
	scripts/cluster.sh up $(if $(MODE),--mode $(MODE))

## cluster-down: remove the demo cluster (containers, network, demo image).
cluster-down:
	scripts/cluster.sh down

cluster-status:
	scripts/cluster.sh status

## chaos-short: 12 faults of every kind on a fresh cluster, then the verifier (~5 min).
chaos-short:
	scripts/chaos.sh --short

## chaos: the long run, 50 faults (~18 min); FAULTS=N for more.
chaos:
	scripts/chaos.sh $(if $(FAULTS),--faults $(FAULTS))

## chaos-plain: plain mode under zombies; the verifier catches #732 (exits 1 when it does). Not in CI.
chaos-plain:
	scripts/chaos.sh --mode plain --kinds zombie,zombie_handover --faults 10
