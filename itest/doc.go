// Package itest holds the integration tests that run against a real Apache Kafka broker (KRaft,
// single node) started in a container by github.com/ory/dockertest/v3.
//
// Run them with scripts/itest.sh, which provisions a container engine and a broker image first;
// KAFKA_VERSION=4.1.2 scripts/itest.sh runs them on the oldest supported broker, and
// make test-itest-all on both the newest and the oldest (scripts/kafka-versions.env). By hand:
//
//	eval "$(scripts/container-engine.sh start)"
//	export KAFKA_VERSION=4.4.0 KAFKA_IMAGE="$(scripts/kafka-image.sh | tail -n1)"
//	go test -race -count=1 -v ./itest/...
//
// Environment:
//   - DOCKER_HOST: the Docker API endpoint (dockertest's NewPool("") honours it).
//   - KAFKA_VERSION: the broker version (default 4.4.0, the newest supported). TestBrokerVersion
//     fails when the started broker answers ApiVersions as another major.minor.
//   - KAFKA_IMAGE: broker image (default apache/kafka:$KAFKA_VERSION, the upstream image).
//   - ITEST_KAFKA_<NAME>=value: passed to the container as KAFKA_<NAME>=value, overriding the
//     suite's broker settings (both images turn KAFKA_FOO_BAR into foo.bar).
//   - ACTORFLOW_SKIP_ITEST=1: skip every test of the package (loudly) instead of failing when no
//     container engine is available.
//   - ACTORFLOW_ITEST_BENCH=1: also run the measurements (bench_test.go, rebalance_time_test.go),
//     which assert events, not times, and are not run by CI.
//
// TestForeignReaderKcat needs kcat in PATH (scripts/itest.sh installs Debian's package with
// apt-get when it runs as root); without it that test skips with a message.
package itest
