package httpapi

import (
	"context"
	"errors"
	"net/http"
	"net/url"

	"github.com/actorflow/actorflow"
)

// StateAnswer is the body of every State answer.
type StateAnswer[S any] struct {
	Key string `json:"key"`
	// State is the key's state (encoding/json's encoding of S: give S a
	// MarshalJSON to shape it), on a 200 only.
	State *S                  `json:"state,omitempty"`
	Info  actorflow.QueryInfo `json:"info"`
	// Owner is the member owning the key's partition when another does (a
	// 307, 421 or 503 after a redirect).
	Owner *actorflow.Member `json:"owner,omitempty"`
	// Error is Get's error, on every answer but a 200.
	Error string `json:"error,omitempty"`
}

// RedirectedParam is the query parameter State adds to a redirect to the
// key's owner ("redirected=1"): a redirected request that reaches a worker
// owning the key no more is answered 503, not redirected again, so two
// workers whose views of the assignment differ while it moves cannot send a
// client back and forth.
const RedirectedParam = "redirected"

// State answers /state?key=K with actorflow.Get[S] on w:
//   - 200 with the key's state and how stale it can be (info), when this
//     worker owns the key's partition;
//   - 404 when the key has no state;
//   - 307 Temporary Redirect to the same path and query (RedirectedParam
//     added) on the owner's query endpoint, when another worker owns the
//     partition and advertises one (actorflow.WithQueryEndpoint; mount the
//     handler at the same path on every worker); the body names the owner
//     for a client that does not follow redirects. A redirect, not a
//     proxied answer: the client learns the owner and asks it next time,
//     and this worker holds no connection to it;
//   - 421 Misdirected Request naming the owner when it advertises no
//     endpoint;
//   - 503 with Retry-After: 1 when Get says actorflow.ErrUnavailable (a
//     rebalance, a recovery, a partition catching up; a busy key whose
//     answer waited past WithQueryTimeout), and for a redirected request
//     that lands on a worker not owning the key either;
//   - 400 without a key; 500 for any other error (the flow's state is not
//     S, the state does not decode), named in the body.
func State[S any](w *actorflow.Worker, opts ...Option) http.Handler {
	return stateHandler(func(ctx context.Context, key string) (*S, actorflow.QueryInfo, error) {
		return actorflow.Get[S](ctx, w, key)
	}, newConfig(opts))
}

// stateHandler is State over any get: the seam its tests answer through.
func stateHandler[S any](get func(context.Context, string) (*S, actorflow.QueryInfo, error), c config) http.Handler {
	return getOnly(func(rw http.ResponseWriter, r *http.Request) {
		key := r.URL.Query().Get("key")
		if key == "" {
			writeJSON(rw, http.StatusBadRequest, StateAnswer[S]{Error: "missing ?key="})
			return
		}
		ctx, cancel := context.WithTimeout(r.Context(), c.queryTimeout)
		defer cancel()
		s, info, err := get(ctx, key)
		ans := StateAnswer[S]{Key: key, State: s, Info: info}
		if err != nil {
			ans.State = nil
			ans.Error = err.Error()
		}
		code := http.StatusOK
		var notOwner *actorflow.NotOwnerError
		switch {
		case err == nil:
		case errors.Is(err, actorflow.ErrKeyNotFound):
			code = http.StatusNotFound
		case errors.As(err, &notOwner):
			ans.Owner = &notOwner.Owner
			switch {
			case r.URL.Query().Has(RedirectedParam):
				rw.Header().Set("Retry-After", "1")
				code = http.StatusServiceUnavailable
			case notOwner.Owner.Endpoint != "":
				rw.Header().Set("Location", redirect(r, c.scheme, notOwner.Owner.Endpoint))
				code = http.StatusTemporaryRedirect
			default:
				code = http.StatusMisdirectedRequest
			}
		case errors.Is(err, actorflow.ErrUnavailable),
			// This handler's bound, not the client's: try again.
			errors.Is(err, context.DeadlineExceeded) && r.Context().Err() == nil:
			rw.Header().Set("Retry-After", "1")
			code = http.StatusServiceUnavailable
		default:
			code = http.StatusInternalServerError
		}
		writeJSON(rw, code, ans)
	})
}

// redirect is r's URL on the owner's endpoint, with RedirectedParam added.
// The path is the one the client asked for (RequestURI), not the handler's
// view of it, which http.StripPrefix shortens.
func redirect(r *http.Request, scheme, endpoint string) string {
	path := r.URL.EscapedPath()
	if u, err := url.ParseRequestURI(r.RequestURI); err == nil && r.RequestURI != "" {
		path = u.EscapedPath()
	}
	q := r.URL.Query()
	q.Set(RedirectedParam, "1")
	to := url.URL{Scheme: scheme, Host: endpoint, RawQuery: q.Encode()}
	// Opaque keeps the escaped path as the client sent it ("//" + host +
	// path: url.URL's form for it).
	to.Opaque = "//" + endpoint + path
	return to.String()
}
