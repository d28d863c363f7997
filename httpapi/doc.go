// Package httpapi serves a Worker over HTTP: liveness and readiness probes,
// its Status, and interactive queries of key state that send a client to the
// key's owner (a 307 to the owner's WithQueryEndpoint) — what every
// deployment of a worker otherwise writes itself (the demo's worker is
// built on it).
//
// Mount it whole with Handler, or its parts on routes of your own (Live,
// Ready, Status, State). Handler has no metrics route: serve the registry
// the worker's WithMetrics registered on (promhttp.HandlerFor).
//
// Client is the State route's Go client: it follows the redirect to a
// key's owner and waits out a partition moving.
package httpapi
