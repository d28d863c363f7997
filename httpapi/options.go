package httpapi

import "time"

// Option configures a handler of this package.
type Option func(*config)

type config struct {
	probeTimeout time.Duration
	queryTimeout time.Duration
	scheme       string
}

func newConfig(opts []Option) config {
	c := config{probeTimeout: 2 * time.Second, queryTimeout: 5 * time.Second}
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
