// Package scenarios holds the integration scenarios of actorflow as
// functions of a broker address list, so the same scenario runs on the
// embedded kfake cluster (root package tests) and on a real Apache Kafka
// broker (itest/). Each function is a whole test: call it from a Test
// function with t and the seed brokers.
package scenarios
