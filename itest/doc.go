// Package itest holds the integration tests that run against a real Apache Kafka broker (KRaft,
// single node) started in a container by github.com/ory/dockertest/v3.
//
// Run them with scripts/itest.sh, which provisions a container engine and a broker image first.
// By hand:
//
//	eval "$(scripts/container-engine.sh start)"
//	export KAFKA_IMAGE="$(scripts/kafka-image.sh | tail -n1)"
//	go test -race -count=1 -v ./itest/...
//
// Environment:
//   - DOCKER_HOST: the Docker API endpoint (dockertest's NewPool("") honours it).
//   - KAFKA_IMAGE: broker image (default apache/kafka:4.1.0, the upstream image).
//   - ITEST_KAFKA_<NAME>=value: passed to the container as KAFKA_<NAME>=value, overriding the
//     suite's broker settings (both images turn KAFKA_FOO_BAR into foo.bar).
//   - ACTORFLOW_SKIP_ITEST=1: skip every test of the package (loudly) instead of failing when no
//     container engine is available.
//
// TestForeignReaderKcat needs kcat in PATH (scripts/itest.sh installs Debian's package with
// apt-get when it runs as root); without it that test skips with a message.
package itest
