package httpapi_test

import (
	"context"
	"encoding/json"
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/actorflow/actorflow"
	"github.com/actorflow/actorflow/httpapi"
)

// answer writes a State answer as the State route does.
func answer(rw http.ResponseWriter, code int, retryAfter string, ans httpapi.StateAnswer[Count]) {
	if retryAfter != "" {
		rw.Header().Set("Retry-After", retryAfter)
	}
	rw.Header().Set("Content-Type", "application/json")
	rw.WriteHeader(code)
	_ = json.NewEncoder(rw).Encode(ans)
}

// server counts its requests and answers each with the next step's
// answer (the last one repeated).
func server(t *testing.T, steps ...func(rw http.ResponseWriter, r *http.Request)) (*httptest.Server, *atomic.Int32) {
	t.Helper()
	var n atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		i := int(n.Add(1)) - 1
		steps[min(i, len(steps)-1)](rw, r)
	}))
	t.Cleanup(srv.Close)
	return srv, &n
}

func ok(n int) func(http.ResponseWriter, *http.Request) {
	return func(rw http.ResponseWriter, r *http.Request) {
		key := r.URL.Query().Get("key")
		answer(rw, http.StatusOK, "", httpapi.StateAnswer[Count]{Key: key, State: &Count{N: n},
			Info: &actorflow.QueryInfo{Topic: "in", Partition: 1, Local: true, Offset: 7}})
	}
}

func unavailable(retryAfter string) func(http.ResponseWriter, *http.Request) {
	return func(rw http.ResponseWriter, _ *http.Request) {
		answer(rw, http.StatusServiceUnavailable, retryAfter, httpapi.StateAnswer[Count]{Error: "unavailable"})
	}
}

func redirectTo(u string) func(http.ResponseWriter, *http.Request) {
	return func(rw http.ResponseWriter, r *http.Request) {
		rw.Header().Set("Location", u+"/state?"+r.URL.RawQuery+"&"+httpapi.RedirectedParam+"=1")
		answer(rw, http.StatusTemporaryRedirect, "", httpapi.StateAnswer[Count]{Owner: &actorflow.Member{MemberID: "m2", Endpoint: u}})
	}
}

func newClient(t *testing.T, base string, opts ...httpapi.ClientOption) *httpapi.Client[Count] {
	t.Helper()
	c, err := httpapi.NewClient[Count](base+"/state", append([]httpapi.ClientOption{httpapi.WithRetryBackoff(time.Millisecond)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// The Client does what the State route asks of a client: it follows the
// redirect to the owner; asks again where it began after a 503 with
// Retry-After and after the owner it was sent to failed (a crashed owner,
// still named); and answers the route's other codes with actorflow's
// errors.
func TestClientFollowsTheStateRoute(t *testing.T) {
	ctx := context.Background()
	t.Run("owner", func(t *testing.T) {
		owner, _ := server(t, func(rw http.ResponseWriter, r *http.Request) {
			if r.URL.Query().Get(httpapi.RedirectedParam) != "1" || r.URL.Query().Get("key") != "a;b +/é" {
				t.Errorf("owner asked %q", r.URL.RawQuery)
			}
			ok(3)(rw, r)
		})
		base, _ := server(t, redirectTo(owner.URL))
		s, info, err := newClient(t, base.URL).Get(ctx, "a;b +/é")
		if err != nil || s == nil || s.N != 3 || !info.Local || info.Partition != 1 || info.Offset != 7 {
			t.Fatalf("%+v %+v %v, want the owner's state", s, info, err)
		}
	})
	t.Run("retry after", func(t *testing.T) {
		base, n := server(t, unavailable("0"), unavailable("0"), ok(4))
		s, _, err := newClient(t, base.URL).Get(ctx, "k")
		if err != nil || s == nil || s.N != 4 || n.Load() != 3 {
			t.Fatalf("%+v %v after %d requests, want the third's state", s, err, n.Load())
		}
	})
	t.Run("owner crashed", func(t *testing.T) {
		dead := httptest.NewServer(http.NotFoundHandler())
		dead.Close() // refuses connections, as a crashed owner's endpoint
		base, n := server(t, redirectTo(dead.URL), ok(5))
		s, _, err := newClient(t, base.URL).Get(ctx, "k")
		if err != nil || s == nil || s.N != 5 || n.Load() != 2 {
			t.Fatalf("%+v %v after %d requests to where it began, want the second's state", s, err, n.Load())
		}
	})
	t.Run("owner not owning", func(t *testing.T) { // moved meanwhile: 503 on a redirected request
		var owner *httptest.Server
		base, n := server(t, func(rw http.ResponseWriter, r *http.Request) { redirectTo(owner.URL)(rw, r) }, ok(6))
		owner, _ = server(t, unavailable("0"))
		s, _, err := newClient(t, base.URL).Get(ctx, "k")
		if err != nil || s == nil || s.N != 6 || n.Load() != 2 {
			t.Fatalf("%+v %v after %d requests to where it began, want the second's state", s, err, n.Load())
		}
	})
	t.Run("owner stopped", func(t *testing.T) { // 503 without Retry-After there: ask where it began
		var owner *httptest.Server
		base, n := server(t, func(rw http.ResponseWriter, r *http.Request) { redirectTo(owner.URL)(rw, r) }, ok(8))
		owner, _ = server(t, unavailable(""))
		s, _, err := newClient(t, base.URL).Get(ctx, "k")
		if err != nil || s == nil || s.N != 8 || n.Load() != 2 {
			t.Fatalf("%+v %v after %d requests, want the second's state", s, err, n.Load())
		}
	})
	t.Run("proxy with no worker ready", func(t *testing.T) { // not State answers: retried, not "Run returned"
		plain := func(code int) func(http.ResponseWriter, *http.Request) {
			return func(rw http.ResponseWriter, _ *http.Request) { http.Error(rw, "no healthy upstream", code) }
		}
		base, n := server(t, plain(http.StatusServiceUnavailable), plain(http.StatusBadGateway), plain(http.StatusGatewayTimeout), ok(10))
		s, _, err := newClient(t, base.URL).Get(ctx, "k")
		if err != nil || s == nil || s.N != 10 || n.Load() != 4 {
			t.Fatalf("%+v %v after %d requests, want the fourth's state", s, err, n.Load())
		}
		base, _ = server(t, plain(http.StatusServiceUnavailable))
		_, _, err = newClient(t, base.URL, httpapi.WithRetryFor(20*time.Millisecond)).Get(ctx, "k")
		if !errors.Is(err, actorflow.ErrUnavailable) || errors.Is(err, actorflow.ErrRunReturned) {
			t.Fatalf("%v, want ErrUnavailable without ErrRunReturned", err)
		}
	})
	t.Run("not found", func(t *testing.T) {
		base, _ := server(t, func(rw http.ResponseWriter, _ *http.Request) {
			answer(rw, http.StatusNotFound, "", httpapi.StateAnswer[Count]{Key: "k", Error: "no state", Info: &actorflow.QueryInfo{Partition: 2}})
		})
		s, info, err := newClient(t, base.URL).Get(ctx, "k")
		var re *httpapi.ResponseError
		if s != nil || !errors.Is(err, actorflow.ErrKeyNotFound) || !errors.As(err, &re) || re.Code != http.StatusNotFound || info.Partition != 2 {
			t.Fatalf("%+v %+v %v, want ErrKeyNotFound with the info", s, info, err)
		}
	})
	t.Run("no endpoint", func(t *testing.T) {
		base, _ := server(t, func(rw http.ResponseWriter, _ *http.Request) {
			answer(rw, http.StatusMisdirectedRequest, "", httpapi.StateAnswer[Count]{Key: "k", Error: "not owner",
				Owner: &actorflow.Member{MemberID: "m2"}, Info: &actorflow.QueryInfo{Topic: "in", Partition: 2}})
		})
		_, _, err := newClient(t, base.URL).Get(ctx, "k")
		var nf *actorflow.NotOwnerError
		if !errors.Is(err, actorflow.ErrNotOwner) || !errors.As(err, &nf) || nf.Owner.MemberID != "m2" || nf.Key != "k" || nf.Partition != 2 {
			t.Fatalf("%v (%+v), want a NotOwnerError naming m2", err, nf)
		}
	})
	t.Run("stopped", func(t *testing.T) { // 503 without Retry-After where it began: a load balancer may send the next to another
		base, n := server(t, unavailable(""), ok(9))
		s, _, err := newClient(t, base.URL).Get(ctx, "k")
		if err != nil || s == nil || s.N != 9 || n.Load() != 2 {
			t.Fatalf("%+v %v after %d requests, want the second's state", s, err, n.Load())
		}
		base, _ = server(t, unavailable(""))
		_, _, err = newClient(t, base.URL, httpapi.WithRetryFor(30*time.Millisecond)).Get(ctx, "k")
		if !errors.Is(err, actorflow.ErrRunReturned) || !errors.Is(err, actorflow.ErrUnavailable) {
			t.Fatalf("%v, want ErrRunReturned once the retries are spent", err)
		}
	})
	t.Run("owner paused", func(t *testing.T) { // accepts and never answers: given up after the attempt's timeout
		release := make(chan struct{})
		owner, _ := server(t, func(rw http.ResponseWriter, r *http.Request) {
			select {
			case <-r.Context().Done():
			case <-release:
			}
		})
		defer close(release)
		base, n := server(t, redirectTo(owner.URL), ok(11))
		s, _, err := newClient(t, base.URL, httpapi.WithAttemptTimeout(50*time.Millisecond)).Get(ctx, "k")
		if err != nil || s == nil || s.N != 11 || n.Load() != 2 {
			t.Fatalf("%+v %v after %d requests, want the second's state", s, err, n.Load())
		}
	})
	t.Run("owner crashed, no retry", func(t *testing.T) { // the transport's error is in the chain
		dead := httptest.NewServer(http.NotFoundHandler())
		dead.Close()
		base, _ := server(t, redirectTo(dead.URL))
		_, _, err := newClient(t, base.URL, httpapi.WithRetryFor(0)).Get(ctx, "k")
		var re *httpapi.ResponseError
		var op *net.OpError
		if !errors.Is(err, actorflow.ErrUnavailable) || !errors.As(err, &re) || re.Code != 0 || !errors.As(err, &op) {
			t.Fatalf("%v, want ErrUnavailable, no answer (code 0), the transport's error", err)
		}
	})
	t.Run("redirect to itself", func(t *testing.T) { // not followed round and round
		var base *httptest.Server
		base, n := server(t, func(rw http.ResponseWriter, r *http.Request) {
			rw.Header().Set("Location", base.URL+"/state?"+r.URL.RawQuery)
			answer(rw, http.StatusTemporaryRedirect, "", httpapi.StateAnswer[Count]{})
		})
		_, _, err := newClient(t, base.URL).Get(ctx, "k")
		if err == nil || n.Load() != 1 {
			t.Fatalf("%v after %d requests, want an error at once", err, n.Load())
		}
	})
	t.Run("zero backoff", func(t *testing.T) { // floored: not thousands of requests a second
		base, n := server(t, func(rw http.ResponseWriter, _ *http.Request) { http.Error(rw, "bad gateway", http.StatusBadGateway) })
		_, _, err := newClient(t, base.URL, httpapi.WithRetryBackoff(0), httpapi.WithRetryFor(100*time.Millisecond)).Get(ctx, "k")
		if !errors.Is(err, actorflow.ErrUnavailable) || n.Load() < 2 || n.Load() > 15 {
			t.Fatalf("%v after %d requests in 100 ms, want ErrUnavailable after retries, ~10 at most", err, n.Load())
		}
	})
	t.Run("retry budget's end", func(t *testing.T) { // asked once more at the end, not given up before it
		base, n := server(t, unavailable("1"))
		_, _, err := newClient(t, base.URL, httpapi.WithRetryFor(1900*time.Millisecond)).Get(ctx, "k")
		if !errors.Is(err, actorflow.ErrUnavailable) || n.Load() != 3 {
			t.Fatalf("%v after %d requests, want 3 (at 0, 1 s and 1.9 s)", err, n.Load())
		}
	})
	t.Run("undecodable state", func(t *testing.T) {
		for _, code := range []int{http.StatusInternalServerError, http.StatusNotFound} {
			base, _ := server(t, func(rw http.ResponseWriter, _ *http.Request) {
				answer(rw, code, "", httpapi.StateAnswer[Count]{Key: "k", Error: "does not decode", UndecodableState: true})
			})
			_, _, err := newClient(t, base.URL).Get(ctx, "k")
			if !errors.Is(err, actorflow.ErrUndecodableState) || errors.Is(err, actorflow.ErrKeyNotFound) != (code == http.StatusNotFound) {
				t.Errorf("%d: %v, want ErrUndecodableState (and ErrKeyNotFound for a 404)", code, err)
			}
		}
	})
	t.Run("retry bound", func(t *testing.T) {
		base, n := server(t, unavailable("0"))
		_, _, err := newClient(t, base.URL, httpapi.WithRetryFor(20*time.Millisecond)).Get(ctx, "k")
		var re *httpapi.ResponseError
		if !errors.Is(err, actorflow.ErrUnavailable) || errors.Is(err, actorflow.ErrRunReturned) || !errors.As(err, &re) || n.Load() < 2 {
			t.Fatalf("%v after %d requests, want ErrUnavailable after retries", err, n.Load())
		}
	})
	t.Run("no retry", func(t *testing.T) {
		base, n := server(t, unavailable("0"))
		_, _, err := newClient(t, base.URL, httpapi.WithRetryFor(0)).Get(ctx, "k")
		if !errors.Is(err, actorflow.ErrUnavailable) || n.Load() != 1 {
			t.Fatalf("%v after %d requests, want ErrUnavailable at once", err, n.Load())
		}
	})
	t.Run("ctx ends the wait", func(t *testing.T) {
		answered := make(chan struct{}, 1)
		base, _ := server(t, func(rw http.ResponseWriter, r *http.Request) {
			unavailable("3600")(rw, r)
			answered <- struct{}{}
		})
		ctx, cancel := context.WithCancel(ctx)
		done := make(chan error, 1)
		go func() { _, _, err := newClient(t, base.URL).Get(ctx, "k"); done <- err }()
		<-answered // waiting out the hour's Retry-After
		cancel()
		if err := <-done; !errors.Is(err, context.Canceled) || !errors.Is(err, actorflow.ErrUnavailable) {
			t.Fatalf("%v, want context.Canceled and ErrUnavailable", err)
		}
	})
	t.Run("not a state", func(t *testing.T) { // a 200 that does not decode (S not the flow's state): not retried
		notState := func(rw http.ResponseWriter, _ *http.Request) { _, _ = rw.Write([]byte(`{"state":{"N":"x"}}`)) }
		base, n := server(t, notState)
		owner, on := server(t, notState)
		redirecting, rn := server(t, redirectTo(owner.URL))
		for _, c := range []struct {
			url string
			n   *atomic.Int32
		}{{base.URL, n}, {redirecting.URL, on}} {
			_, _, err := newClient(t, c.url, httpapi.WithRetryFor(time.Second)).Get(ctx, "k")
			if err == nil || c.n.Load() != 1 {
				t.Errorf("%v after %d requests, want an error at once", err, c.n.Load())
			}
		}
		if rn.Load() != 1 {
			t.Errorf("asked again where it began (%d requests)", rn.Load())
		}
	})
}

// NewClient refuses a URL it cannot ask a key at.
func TestNewClientRefusesAnUnusableURL(t *testing.T) {
	for _, u := range []string{"", "ledger:8080/state", "http://ledger/state?", "ftp://ledger/state", "http:///state", "http://ledger/state?key=a", "http://ledger/state#x", "http://%zz"} {
		if _, err := httpapi.NewClient[Count](u); err == nil {
			t.Errorf("%q accepted", u)
		}
	}
	if _, err := httpapi.NewClient[Count]("https://ledger:8080/api/state"); err != nil {
		t.Error(err)
	}
}
