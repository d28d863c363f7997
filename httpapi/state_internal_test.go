package httpapi

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/actorflow/actorflow"
)

type account struct {
	Balance int64 `json:"balance"`
}

// State's answer to each of Get's outcomes, as its doc says: a key owned
// elsewhere is a 307 to the owner's endpoint (same path, the query kept,
// redirected=1 added) when it advertises one, else 421; a redirected
// request that is not the owner's either is 503 with Retry-After (no second
// redirect: no loop while the assignment moves), as is ErrUnavailable and
// this handler's own bound; every non-200 answer names the error, and the
// owner when there is one.
func TestStateAnswers(t *testing.T) {
	owner := actorflow.Member{MemberID: "m-b", ClientID: "kgo;query=worker-b:8080", Endpoint: "worker-b:8080"}
	noEndpoint := actorflow.Member{MemberID: "m-c", ClientID: "kgo"}
	owner6 := actorflow.Member{MemberID: "m-d", ClientID: "kgo;query=[2001:db8::1]:8080", Endpoint: "[2001:db8::1]:8080"}
	notOwner := func(m actorflow.Member) error {
		return fmt.Errorf("wrapped: %w", &actorflow.NotOwnerError{Key: "acct-1", Topic: "in", Partition: 3, Owner: m})
	}
	for _, c := range []struct {
		name       string
		method     string
		target     string
		err        error
		code       int
		location   string
		retryAfter string
		owner      *actorflow.Member
		opts       []Option
		asked      *string // the key Get is asked, when not acct-1
		errorHas   string
	}{
		{name: "local", target: "/state?key=acct-1", code: http.StatusOK},
		{name: "HEAD", method: http.MethodHead, target: "/state?key=acct-1", code: http.StatusOK},
		{name: "POST", method: http.MethodPost, target: "/state?key=acct-1", code: http.StatusMethodNotAllowed},
		{name: "absent", target: "/state?key=acct-1", err: actorflow.ErrKeyNotFound, code: http.StatusNotFound},
		{name: "missing key", target: "/state", code: http.StatusBadRequest},
		// Kafka's records may have an empty key, and Get answers it.
		{name: "empty key", target: "/state?key=", code: http.StatusOK, asked: new("")},
		// r.URL.Query drops a pair with a semicolon: not a missing key.
		{name: "unescaped semicolon", target: "/state?key=a;b", code: http.StatusBadRequest, errorHas: "url.QueryEscape"},
		{name: "malformed escape", target: "/state?key=a%zz", code: http.StatusBadRequest, errorHas: "url.QueryEscape"},
		{name: "redirected=0 is no redirect", target: "/state?key=acct-1&redirected=0", err: notOwner(owner), code: http.StatusTemporaryRedirect,
			location: "http://worker-b:8080/state?key=acct-1&redirected=1", owner: &owner},
		// Stopped for good: no Retry-After (ask another worker).
		{name: "run returned", target: "/state?key=acct-1", err: fmt.Errorf("%w: worker stopped: %w", actorflow.ErrUnavailable, actorflow.ErrRunReturned), code: http.StatusServiceUnavailable},
		{name: "owned elsewhere", target: "/state?key=acct-1", err: notOwner(owner), code: http.StatusTemporaryRedirect,
			location: "http://worker-b:8080/state?key=acct-1&redirected=1", owner: &owner},
		{name: "owned elsewhere, https", target: "/state?key=acct-1", err: notOwner(owner), code: http.StatusTemporaryRedirect,
			location: "https://worker-b:8080/state?key=acct-1&redirected=1", owner: &owner, opts: []Option{WithScheme("https")}},
		{name: "owned elsewhere, key escaped", target: "/state?key=a+b%26c", err: notOwner(owner), code: http.StatusTemporaryRedirect,
			location: "http://worker-b:8080/state?key=a+b%26c&redirected=1", owner: &owner, asked: new("a b&c")},
		{name: "owned elsewhere, escaped path", target: "/api/st%2Fate?key=acct-1", err: notOwner(owner), code: http.StatusTemporaryRedirect,
			location: "http://worker-b:8080/api/st%2Fate?key=acct-1&redirected=1", owner: &owner},
		{name: "owned elsewhere, IPv6 endpoint", target: "/state?key=acct-1", err: notOwner(owner6), code: http.StatusTemporaryRedirect,
			location: "http://[2001:db8::1]:8080/state?key=acct-1&redirected=1", owner: &owner6},
		{name: "owner advertises no endpoint", target: "/state?key=acct-1", err: notOwner(noEndpoint), code: http.StatusMisdirectedRequest, owner: &noEndpoint},
		{name: "redirected to a non-owner", target: "/state?key=acct-1&redirected=1", err: notOwner(owner), code: http.StatusServiceUnavailable,
			retryAfter: "1", owner: &owner},
		{name: "unavailable", target: "/state?key=acct-1", err: fmt.Errorf("%w: rebalancing", actorflow.ErrUnavailable), code: http.StatusServiceUnavailable, retryAfter: "1"},
		// The key's answer waited behind its current batch past the handler's
		// bound: transient, not a server error.
		{name: "timed out", target: "/state?key=acct-1", err: fmt.Errorf("query: %w", context.DeadlineExceeded), code: http.StatusServiceUnavailable, retryAfter: "1"},
		{name: "other error", target: "/state?key=acct-1", err: errors.New("decode"), code: http.StatusInternalServerError},
	} {
		t.Run(c.name, func(t *testing.T) {
			var asked string
			var called bool
			h := stateHandler(func(_ context.Context, key string) (*account, actorflow.QueryInfo, error) {
				asked, called = key, true
				if c.err != nil {
					return nil, actorflow.QueryInfo{Partition: 3}, c.err
				}
				return &account{Balance: 7}, actorflow.QueryInfo{Partition: 3, Local: true}, nil
			}, newConfig(c.opts))
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, httptest.NewRequest(cmp.Or(c.method, http.MethodGet), c.target, nil))
			if got := rec.Header().Get("Content-Type"); got != "application/json" {
				t.Errorf("Content-Type %q", got)
			}
			var ans StateAnswer[account]
			if err := json.NewDecoder(rec.Body).Decode(&ans); err != nil {
				t.Fatal(err)
			}
			if rec.Code != c.code || rec.Header().Get("Location") != c.location || rec.Header().Get("Retry-After") != c.retryAfter {
				t.Fatalf("%d Location %q Retry-After %q, want %d %q %q (body %+v)", rec.Code, rec.Header().Get("Location"),
					rec.Header().Get("Retry-After"), c.code, c.location, c.retryAfter, ans)
			}
			switch {
			case c.owner == nil && ans.Owner != nil, c.owner != nil && (ans.Owner == nil || *ans.Owner != *c.owner):
				t.Errorf("owner %+v, want %+v", ans.Owner, c.owner)
			case c.code == http.StatusOK && (ans.State == nil || ans.State.Balance != 7 || !ans.Info.Local || (c.asked == nil && ans.Key != "acct-1")):
				t.Errorf("200 body %+v", ans)
			case c.code != http.StatusOK && ans.Error == "":
				t.Errorf("%d without an error in the body", c.code)
			case c.code != http.StatusOK && ans.State != nil:
				t.Errorf("%d with a state: %+v", c.code, ans)
			case !strings.Contains(ans.Error, c.errorHas):
				t.Errorf("error %q, want it to say %q", ans.Error, c.errorHas)
			case c.code == http.StatusBadRequest && (ans.Info != nil || called):
				t.Errorf("400 after asking Get (%v) or with its info %+v", called, ans.Info)
			}
			want := "acct-1"
			if c.asked != nil {
				want = *c.asked
			}
			if called && asked != want {
				t.Errorf("asked key %q, want %q", asked, want)
			}
		})
	}
}

// A handler mounted under a prefix (http.StripPrefix) redirects to the
// path the client asked for, prefix included: the owner serves the same
// mount.
func TestStateRedirectKeepsTheMountsPrefix(t *testing.T) {
	owner := actorflow.Member{MemberID: "m-b", Endpoint: "worker-b:8080"}
	h := stateHandler(func(context.Context, string) (*account, actorflow.QueryInfo, error) {
		return nil, actorflow.QueryInfo{}, &actorflow.NotOwnerError{Key: "k", Owner: owner}
	}, newConfig(nil))
	mux := http.NewServeMux()
	mux.Handle("/api/", http.StripPrefix("/api", h))
	srv := httptest.NewServer(mux)
	defer srv.Close()
	cl := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err := cl.Get(srv.URL + "/api/state?key=k")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if loc, want := resp.Header.Get("Location"), "http://worker-b:8080/api/state?key=k&redirected=1"; resp.StatusCode != http.StatusTemporaryRedirect || loc != want {
		t.Fatalf("%d to %q, want 307 to %q", resp.StatusCode, loc, want)
	}
}

// A request that came over TLS is redirected to https by default; an
// explicit WithScheme wins.
func TestStateRedirectSchemeFollowsTheRequest(t *testing.T) {
	owner := actorflow.Member{MemberID: "m-b", Endpoint: "worker-b:8443"}
	get := func(context.Context, string) (*account, actorflow.QueryInfo, error) {
		return nil, actorflow.QueryInfo{}, &actorflow.NotOwnerError{Key: "k", Owner: owner}
	}
	for _, c := range []struct {
		name string
		opts []Option
		want string
	}{
		{"default", nil, "https://worker-b:8443/state?key=k&redirected=1"},
		{"WithScheme(http)", []Option{WithScheme("http")}, "http://worker-b:8443/state?key=k&redirected=1"},
	} {
		srv := httptest.NewTLSServer(stateHandler(get, newConfig(c.opts)))
		cl := srv.Client()
		cl.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
		resp, err := cl.Get(srv.URL + "/state?key=k")
		srv.Close()
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if loc := resp.Header.Get("Location"); loc != c.want {
			t.Errorf("%s: Location %q, want %q", c.name, loc, c.want)
		}
	}
}

// A state encoding/json cannot encode (a mean of no samples, 0/0) is a 500
// naming the key and why, which the Client returns as the error. The body
// was encoded after the status line went out: a 200 with an empty body, its
// cause said nowhere (a lint sweep).
func TestAStateThatDoesNotEncodeIsA500NamingWhy(t *testing.T) {
	type mean struct {
		Avg float64 `json:"avg"`
	}
	h := stateHandler(func(context.Context, string) (*mean, actorflow.QueryInfo, error) {
		return &mean{Avg: math.NaN()}, actorflow.QueryInfo{Topic: "in", Partition: 2}, nil
	}, newConfig(nil))
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/state?key=acct-1", nil))
	var ans StateAnswer[mean]
	if err := json.NewDecoder(rec.Body).Decode(&ans); err != nil {
		t.Fatalf("%d, body does not decode: %v", rec.Code, err)
	}
	if rec.Code != http.StatusInternalServerError || ans.Key != "acct-1" || ans.State != nil || ans.Info == nil || ans.Info.Partition != 2 ||
		!strings.Contains(ans.Error, "NaN") || !strings.Contains(ans.Error, `"acct-1"`) {
		t.Fatalf("%d %+v, want a 500 naming the key and the NaN, with the query's info", rec.Code, ans)
	}

	srv := httptest.NewServer(h)
	defer srv.Close()
	cl, err := NewClient[mean](srv.URL + "/state")
	if err != nil {
		t.Fatal(err)
	}
	_, _, err = cl.Get(context.Background(), "acct-1")
	if re := (*ResponseError)(nil); !errors.As(err, &re) || re.Code != http.StatusInternalServerError || !strings.Contains(re.Message, "NaN") {
		t.Fatalf("the client's error %v, want a *ResponseError, 500, saying NaN", err)
	}
}

// An answer other than a state that does not encode is a 500 saying so,
// not a status line with an empty body.
func TestWriteJSONOfAValueThatDoesNotEncode(t *testing.T) {
	rec := httptest.NewRecorder()
	writeJSON(rec, http.StatusOK, map[string]any{"c": make(chan int)})
	var body map[string]string
	if err := json.NewDecoder(rec.Body).Decode(&body); err != nil || rec.Code != http.StatusInternalServerError || !strings.Contains(body["error"], "chan") {
		t.Fatalf("%d %v (%v), want a 500 whose error names the chan", rec.Code, body, err)
	}
}
