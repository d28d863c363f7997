package httpapi

import (
	"time"

	"github.com/actorflow/actorflow"
)

// Option configures a handler of this package.
type Option func(*config)

type config struct {
	probeTimeout time.Duration
	queryTimeout time.Duration
	scheme       string
	ready        func(actorflow.Health) bool
}

func newConfig(opts []Option) config {
	c := config{probeTimeout: 2 * time.Second, queryTimeout: 5 * time.Second, ready: actorflow.Health.Ready}
	for _, o := range opts {
		o(&c)
	}
	return c
}

// WithProbeTimeout bounds how long Live, Ready and Status wait for the
// worker's partitions to report (a partition busy past it is listed as late,
// and Ready is false). Default 2 s; the request's own context ending first
// ends it too.
func WithProbeTimeout(d time.Duration) Option { return func(c *config) { c.probeTimeout = d } }

// WithQueryTimeout bounds a State query: a busy key answers after the
// records already handed to it, and a query still waiting at the bound is
// answered 503 with Retry-After. Default 5 s.
func WithQueryTimeout(d time.Duration) Option { return func(c *config) { c.queryTimeout = d } }

// WithScheme is the scheme of State's redirects to a key's owner ("http"
// or "https"). Default: the request's own — "https" when it came over TLS,
// else "http" — for workers that all serve alike; set it when they do not
// (a TLS-terminating proxy in front: "https"). An empty s is the default.
func WithScheme(s string) Option { return func(c *config) { c.scheme = s } }

// WithReadyWhen replaces Ready's condition, Health.Ready by default (every
// owned partition running, none failed). A deployment whose readiness
// gates a rolling update may not want one partition failing at a record
// over and over to hold every new pod unready — e.g.
//
//	httpapi.WithReadyWhen(func(h actorflow.Health) bool {
//		return h.Running && !h.ShuttingDown && h.BrokersReachable && h.Joined
//	})
//
// and alert on the failed partitions instead (Health.Failed, the metric
// actorflow_partitions{phase="failed"}). A nil ok is the default.
func WithReadyWhen(ok func(actorflow.Health) bool) Option {
	return func(c *config) {
		if ok != nil {
			c.ready = ok
		}
	}
}
