package httpapi

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"net/url"
	"strconv"

	"github.com/actorflow/actorflow"
)

// StateAnswer is the body of every State answer.
type StateAnswer[S any] struct {
	Key string `json:"key"`
	// State is the key's state (encoding/json's encoding of S: give S a
	// MarshalJSON to shape it), on a 200 only.
	State *S `json:"state,omitempty"`
	// Info says where the query was answered and how stale the state can
	// be; absent when the request was refused before asking (a 400).
	Info *actorflow.QueryInfo `json:"info,omitempty"`
	// Owner is the member owning the key's partition when another does (a
	// 307, 421 or 503 after a redirect).
	Owner *actorflow.Member `json:"owner,omitempty"`
	// Error is Get's error, on every answer but a 200.
	Error string `json:"error,omitempty"`
	// UndecodableState: the key's persisted state does not decode
	// (actorflow.ErrUndecodableState): a 500 under the flow's default Fail
	// policy, a 404 under one that drops the state.
	UndecodableState bool `json:"undecodable_state,omitempty"`
}

// RedirectedParam is the query parameter State adds to a redirect to the
// key's owner ("redirected=1"): a redirected request that reaches a worker
// owning the key no more is answered 503, not redirected again, so two
// workers whose views of the assignment differ while it moves cannot send a
// client back and forth.
const RedirectedParam = "redirected"

// State answers /state?key=K with actorflow.Get[S] on w. K is the key
// URL-escaped (url.QueryEscape: a "+" is a space, a ";" or a malformed
// escape makes the query a 400); "?key=" asks for the empty key.
//   - 200 with the key's state and how stale it can be (info), when this
//     worker owns the key's partition;
//   - 404 when the key has no state;
//   - 307 Temporary Redirect to the same path and query parameters
//     (RedirectedParam added) on the owner's query endpoint, when another
//     worker owns the partition and advertises one
//     (actorflow.WithQueryEndpoint: an address the clients can reach, as
//     they follow the redirect; mount the handler at the same path on every
//     worker). The body names the owner and info the key's partition: a
//     client can send the partition's keys to that endpoint directly until
//     it answers other than 200 or 404. A redirect, not a proxied answer:
//     this worker holds no connection to the others;
//   - 421 Misdirected Request naming the owner when it advertises no
//     endpoint;
//   - 503 with Retry-After: 1 when Get says actorflow.ErrUnavailable (a
//     rebalance moving the partition, a recovery, a partition catching up,
//     a busy key whose answer waited past WithQueryTimeout), and for a
//     redirected request that lands on a worker not owning the key either;
//   - 503 without Retry-After once this worker's Run has returned
//     (actorflow.ErrRunReturned): it answers no query again — ask another;
//   - 400 for a query without a key, or one that does not parse; 500 for
//     any other error (the flow's state is not S; the key's persisted state
//     does not decode, actorflow.ErrUndecodableState, under the flow's
//     default Fail policy — a 404 under Skip or DeadLetter, where the key
//     starts from no state; a state encoding/json cannot encode, such as
//     a NaN float), named in the body.
//
// A client following redirects should retry a connection error after a
// 307 too: a crashed owner is named until the group coordinator notices
// (the group's session timeout), its endpoint refusing connections. A
// retry goes to the URL the client first asked (or to owner.endpoint
// without RedirectedParam): the redirected URL answers 503 on a non-owner
// until the assignment settles.
func State[S any](w *actorflow.Worker, opts ...Option) http.Handler {
	return stateHandler(func(ctx context.Context, key string) (*S, actorflow.QueryInfo, error) {
		return actorflow.Get[S](ctx, w, key)
	}, newConfig(opts))
}

// stateHandler is State over any get: the seam its tests answer through.
func stateHandler[S any](get func(context.Context, string) (*S, actorflow.QueryInfo, error), c config) http.Handler {
	return getOnly(func(rw http.ResponseWriter, r *http.Request) {
		// Parsed here, not with r.URL.Query, which drops a pair it cannot
		// parse ("key=a;b": a semicolon) and then read as a missing key.
		q, err := url.ParseQuery(r.URL.RawQuery)
		if err != nil {
			writeJSON(rw, http.StatusBadRequest, StateAnswer[S]{Error: "query " + strconv.Quote(r.URL.RawQuery) + ": " + err.Error() + " (escape the key: url.QueryEscape)"})
			return
		}
		if !q.Has("key") { // an empty key is a key: Kafka's records may have one
			writeJSON(rw, http.StatusBadRequest, StateAnswer[S]{Error: "missing ?key="})
			return
		}
		key := q.Get("key")
		ctx, cancel := context.WithTimeout(r.Context(), c.queryTimeout)
		defer cancel()
		s, info, err := get(ctx, key)
		ans := StateAnswer[S]{Key: key, State: s, Info: &info}
		if err != nil {
			ans.State = nil
			ans.Error = err.Error()
			ans.UndecodableState = errors.Is(err, actorflow.ErrUndecodableState)
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
			case q.Get(RedirectedParam) == "1":
				rw.Header().Set("Retry-After", "1")
				code = http.StatusServiceUnavailable
			case notOwner.Owner.Endpoint != "":
				rw.Header().Set("Location", redirect(r, q, c.scheme, notOwner.Owner.Endpoint))
				code = http.StatusTemporaryRedirect
			default:
				code = http.StatusMisdirectedRequest
			}
		case errors.Is(err, actorflow.ErrRunReturned):
			// This worker stopped for good: no Retry-After, ask another.
			code = http.StatusServiceUnavailable
		case errors.Is(err, actorflow.ErrUnavailable),
			// This handler's bound, not the client's: try again.
			errors.Is(err, context.DeadlineExceeded) && r.Context().Err() == nil:
			rw.Header().Set("Retry-After", "1")
			code = http.StatusServiceUnavailable
		default:
			code = http.StatusInternalServerError
		}
		b, err := json.Marshal(ans)
		if err != nil {
			// The state does not encode as JSON (a NaN or ±Inf float, a
			// chan, a MarshalJSON that fails): /state encodes S with
			// encoding/json whatever the flow's codec.
			code = http.StatusInternalServerError
			b = mustJSON(StateAnswer[S]{Key: key, Info: &info,
				Error: fmt.Sprintf("encode key %s's state as JSON (/state's encoding, whatever the flow's codec): %v", strconv.Quote(key), err)})
		}
		writeBody(rw, code, b)
	})
}

// redirect is r's URL on the owner's endpoint, with RedirectedParam added.
// The path is the one the client asked for (RequestURI), not the handler's
// view of it, which http.StripPrefix shortens.
func redirect(r *http.Request, q url.Values, scheme, endpoint string) string {
	if scheme == "" {
		scheme = "http"
		if r.TLS != nil {
			scheme = "https"
		}
	}
	path := r.URL.EscapedPath()
	if u, err := url.ParseRequestURI(r.RequestURI); err == nil && r.RequestURI != "" {
		path = u.EscapedPath()
	}
	q = maps.Clone(q)
	q.Set(RedirectedParam, "1")
	to := url.URL{Scheme: scheme, Host: endpoint, RawQuery: q.Encode()}
	// Opaque keeps the escaped path as the client sent it ("//" + host +
	// path: url.URL's form for it).
	to.Opaque = "//" + endpoint + path
	return to.String()
}
