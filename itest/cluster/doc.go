// Package cluster holds the integration tests that need the 3-node Apache Kafka KRaft cluster of
// scripts/kafka-cluster.sh (Java 17 and the cached Maven jars; no container engine), gated by
// ACTORFLOW_ITEST_CLUSTER=1: without it every test skips, loudly, so `go test ./...` and CI's
// default run do not need the cluster.
//
// It is a package of its own, not part of itest/, because itest's TestMain starts a single-node
// broker container for every run of that package (a container engine, the image, ~10 s): the
// cluster test needs none of it and must not fail for want of it.
//
//	ACTORFLOW_ITEST_CLUSTER=1 go test -race -count=1 -v -timeout 40m -run TestCluster ./itest/cluster/
//	make cluster3-test
//
// The test starts the cluster through the script (start --fresh) and stops it at the end; a
// reaper process stops it too if the test process dies. Member logs and the report go to
// ${ACTORFLOW_CACHE:-~/.cache/actorflow}/cluster3/runs/<time>/, the nodes' logs to
// .../cluster3/node-N/kafka.log. Knobs: KAFKA_VERSION (4.4.0; 4.1.2) and ACTORFLOW_CLUSTER_*
// (see settings in cluster_test.go).
package cluster
