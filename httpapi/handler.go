package httpapi

import (
	"context"
	"encoding/json"
	"net/http"

	"github.com/actorflow/actorflow"
)

// Handler serves w's routes, each answering JSON to GET and HEAD (405
// otherwise):
//   - /healthz: Live — 200 while Run runs, else 503 (before Run, and once
//     it has returned: Health.Stopped, with Run's error in run_error); the
//     body is the worker's Health either way, so a probe's log says why.
//     Serve it only once Run is started (or give the probe an initial
//     delay): before, a liveness probe would restart the process;
//   - /readyz: Ready — 200 when the worker processes everything it owns,
//     else 503 (not running, shutting down, brokers unreachable, not joined,
//     a partition starting, recovering, stopping, failed or late to
//     answer). A partition failing at a record again and again keeps its
//     worker unready (and a rolling update waiting on it) until the record
//     is dealt with: the fold error policies, or WithFailFast — or define
//     readiness without it (WithReadyWhen);
//   - /status: the worker's Status (partitions, lag, failed partitions):
//     200 once Run has joined the group, else 503 (starting: Running, no
//     generation yet; not running; Stopped with Run's error once Run has
//     returned);
//   - /state?key=K: the key's state, an interactive query (State).
//
// S is the flow's state type (keyflow.New's); the worker must run a flow
// over it, else /state answers 500 naming both types.
func Handler[S any](w *actorflow.Worker, opts ...Option) http.Handler {
	mux := http.NewServeMux()
	mux.Handle("/healthz", Live(w, opts...))
	mux.Handle("/readyz", Ready(w, opts...))
	mux.Handle("/status", Status(w, opts...))
	mux.Handle("/state", State[S](w, opts...))
	return mux
}

// Live answers 200 while Health.Live holds (Run in progress, shutting down
// included), else 503, with the Health as the body. Point a liveness probe
// here: an outage of the brokers does not fail it (a restart would not
// bring them back).
func Live(w *actorflow.Worker, opts ...Option) http.Handler {
	return probe(w, newConfig(opts), actorflow.Health.Live)
}

// Ready answers 200 while Health.Ready holds (or WithReadyWhen's
// condition), else 503, with the Health as the body. Point a readiness
// probe (and a load balancer sending queries) here.
func Ready(w *actorflow.Worker, opts ...Option) http.Handler {
	c := newConfig(opts)
	return probe(w, c, c.ready)
}

func probe(w *actorflow.Worker, c config, ok func(actorflow.Health) bool) http.Handler {
	return getOnly(func(rw http.ResponseWriter, r *http.Request) {
		ctx, cancel := context.WithTimeout(r.Context(), c.probeTimeout)
		defer cancel()
		h := w.Health(ctx)
		code := http.StatusOK
		if !ok(h) {
			code = http.StatusServiceUnavailable
		}
		writeJSON(rw, code, h)
	})
}

// Status answers the worker's Status: each running partition's offsets
// and lag, the failed ones with theirs, the group generation — with 200
// once Run has joined the group (Status.Generation above 0), else 503: a
// worker starting, not started or stopped (with Run's error) owns nothing
// yet or any more, and a scraper reading its empty list of partitions with
// a 200 took it for a member owning none.
func Status(w *actorflow.Worker, opts ...Option) http.Handler {
	c := newConfig(opts)
	return getOnly(func(rw http.ResponseWriter, r *http.Request) {
		ctx, cancel := context.WithTimeout(r.Context(), c.probeTimeout)
		defer cancel()
		st := w.Status(ctx)
		writeJSON(rw, statusCode(st), st)
	})
}

// statusCode is Status's answer's code: 200 once joined.
func statusCode(st actorflow.Status) int {
	if !st.Running || st.Generation < 1 {
		return http.StatusServiceUnavailable
	}
	return http.StatusOK
}

// getOnly answers 405 to methods other than GET and HEAD: every route
// only reads.
func getOnly(h http.HandlerFunc) http.Handler {
	return http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			rw.Header().Set("Allow", "GET, HEAD")
			writeJSON(rw, http.StatusMethodNotAllowed, map[string]string{"error": r.Method + " not allowed: GET or HEAD"})
			return
		}
		h(rw, r)
	})
}

// writeJSON answers code with v as JSON; a v that does not encode is a
// 500 naming why.
func writeJSON(rw http.ResponseWriter, code int, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		code = http.StatusInternalServerError
		b = mustJSON(map[string]string{"error": "encode the answer as JSON: " + err.Error()})
	}
	writeBody(rw, code, b)
}

// writeBody answers code with the JSON b. The body is encoded before the
// status line goes out: encoding/json builds the whole value first, so an
// error after the line left a 200 with an empty body (a state holding a
// NaN), its cause said nowhere (a lint sweep).
func writeBody(rw http.ResponseWriter, code int, b []byte) {
	rw.Header().Set("Content-Type", "application/json")
	rw.WriteHeader(code)
	// A write error is the client gone: nobody to tell.
	_, _ = rw.Write(append(b, '\n'))
}

// mustJSON encodes a value that holds no user type (strings, the
// runtime's own structs), which cannot fail.
func mustJSON(v any) []byte {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return b
}
