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

## bench-real: Experiments A and B against the integration suite's real broker.
bench-real:
	ACTORFLOW_ITEST_BENCH=1 scripts/itest.sh -run TestBenchOnRealBroker

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

## cluster3-test: issue 16's node kills on a 3-node KRaft cluster on loopback (scripts/kafka-cluster.sh:
## Java 17 and the cached Maven jars, no container engine; ~10 min). KAFKA_VERSION=4.1.2 for the older broker;
## ACTORFLOW_CLUSTER_* knobs in itest/cluster. Not part of `make test`.
.PHONY: cluster3-test
cluster3-test:
	ACTORFLOW_ITEST_CLUSTER=1 $(GO) test -race -count=1 -v -timeout 40m -run TestCluster ./itest/cluster/
