package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"slices"
	"testing"
	"time"

	"github.com/actorflow/actorflow"
	"github.com/actorflow/actorflow/internal/ledger"
	"github.com/actorflow/actorflow/internal/testkit"
)

func freeAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}

func getJSON(url string, v any) (int, error) {
	resp, err := getWith(http.DefaultClient, url, v)
	if err != nil {
		return 0, err
	}
	return resp.StatusCode, nil
}

// noRedirects answers a redirect itself instead of following it.
var noRedirects = &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}

// getWith GETs url with cl and decodes the JSON body into v.
func getWith(cl *http.Client, url string, v any) (*http.Response, error) {
	resp, err := cl.Get(url)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	return resp, json.NewDecoder(resp.Body).Decode(v)
}

// Two demo workers of one group, each advertising its --http address:
// /state?key=K answers 200 with the account's state on the worker owning
// its partition and, on the other, 307 to the same path on the owner's
// address, naming its member and endpoint (a client following it gets the
// owner's 200); an account without state is 404 on its owner; a missing
// key is 400.
func TestWorkerServesStateFromTheKeysOwner(t *testing.T) {
	_, brokers := testkit.Kfake(t)
	common := []string{"--brokers", brokers[0], "--input", "in", "--partitions", "2"}
	if rc := produceCmd(context.Background(), append(common, "--events", "200", "--rate", "100000", "--accounts", "20")); rc != 0 {
		t.Fatalf("produce exited %d", rc)
	}
	addrs := []string{freeAddr(t), freeAddr(t)}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan int, 2)
	for _, a := range addrs {
		go func() {
			done <- worker(ctx, append(common, "--group", "g", "--snapshots", "snaps", "--http", a, "--persist-every", "50ms", "--session-timeout", "6s"))
		}()
	}
	defer func() {
		cancel()
		for range addrs {
			if rc := <-done; rc != 0 {
				t.Errorf("worker exited %d", rc)
			}
		}
	}()
	members := make([]string, 2)
	testkit.Eventually(t, 60*time.Second, "both workers ready, one partition each", func() (bool, string) {
		for i, a := range addrs {
			var st workerStatus
			if code, err := getJSON("http://"+a+"/status", &st); code != 200 || err != nil || len(st.Partitions) != 1 {
				return false, fmt.Sprint(a, code, err, st.Partitions)
			}
			var h map[string]any
			if code, _ := getJSON("http://"+a+"/readyz", &h); code != 200 {
				return false, fmt.Sprint(a, " not ready: ", h)
			}
			members[i] = st.MemberID
		}
		return true, ""
	})
	testkit.Eventually(t, 60*time.Second, "every account answered by its owner, 307 to it elsewhere", func() (bool, string) {
		var total int64
		for i := range 20 {
			key := ledger.AccountKey(i)
			var answers [2]stateAnswer
			var resps [2]*http.Response
			var codes [2]int
			for j, a := range addrs {
				resp, err := getWith(noRedirects, "http://"+a+"/state?key="+key, &answers[j])
				if err != nil {
					return false, err.Error()
				}
				resps[j], codes[j] = resp, resp.StatusCode
			}
			owner := slices.Index(codes[:], http.StatusOK)
			other := 1 - owner
			if owner < 0 || codes[other] != http.StatusTemporaryRedirect {
				return false, fmt.Sprintf("%s: codes %v, answers %+v", key, codes, answers)
			}
			if loc, want := resps[other].Header.Get("Location"), "http://"+addrs[owner]+"/state?key="+key+"&redirected=1"; loc != want {
				t.Fatalf("%s: 307 to %q, want %q", key, loc, want)
			}
			if o := answers[other].Owner; o == nil || o.MemberID != members[owner] || o.Endpoint != addrs[owner] {
				t.Fatalf("%s: 307 names %+v, want the owner's member %s at %s", key, o, members[owner], addrs[owner])
			}
			if s := answers[owner].State; s == nil || !answers[owner].Info.Local {
				t.Fatalf("%s: 200 without a local state: %+v", key, answers[owner])
			}
			// A client following the redirect gets the owner's answer.
			var followed stateAnswer
			if code, err := getJSON("http://"+addrs[other]+"/state?key="+key, &followed); err != nil || code != http.StatusOK ||
				followed.State == nil || *followed.State != *answers[owner].State {
				return false, fmt.Sprintf("%s followed from the other worker: %d %v %+v", key, code, err, followed)
			}
			total += answers[owner].State.Count
		}
		return total == 200, fmt.Sprintf("%d events folded", total)
	})
	// /status shows each partition's lag (high watermark − committed),
	// 0 once caught up. A partition taken over after its records were
	// processed has fetched nothing (kgo hands no empty fetch over): its
	// high watermark is not known (0), but one partition kept its owner.
	testkit.Eventually(t, 30*time.Second, "lag 0 in /status", func() (bool, string) {
		known := 0
		for _, a := range addrs {
			var st workerStatus
			if code, err := getJSON("http://"+a+"/status", &st); code != 200 || err != nil {
				return false, fmt.Sprint(code, err)
			}
			for _, p := range st.Partitions {
				if p.HighWatermark == 0 {
					continue
				}
				known++
				if p.Lag != 0 || p.Committed != p.HighWatermark {
					return false, fmt.Sprintf("%+v", p)
				}
			}
		}
		return known > 0, "no partition fetched"
	})
	var codes []int
	for _, a := range addrs {
		var ans stateAnswer
		resp, err := getWith(noRedirects, "http://"+a+"/state?key=nobody", &ans)
		if err != nil {
			t.Fatal(err)
		}
		codes = append(codes, resp.StatusCode)
		if code, err := getJSON("http://"+a+"/state?key=nobody", &ans); err != nil || code != http.StatusNotFound {
			t.Errorf("absent account through %s, redirects followed: %d, %v; want the owner's 404", a, code, err)
		}
	}
	slices.Sort(codes)
	if !slices.Equal(codes, []int{http.StatusTemporaryRedirect, http.StatusNotFound}) {
		t.Errorf("absent account: codes %v, want 404 from its owner and 307 from the other", codes)
	}
	var ans stateAnswer
	if code, _ := getJSON("http://"+addrs[0]+"/state", &ans); code != http.StatusBadRequest {
		t.Errorf("missing key: %d, want 400", code)
	}
}

// stateHandler's answer to each of Get's outcomes, as its doc says: a key
// owned elsewhere is a 307 to the owner's endpoint (same path, the query
// kept, redirected=1 added) when it advertises one, else 421; a redirected
// request that is not the owner's either is 503 with Retry-After (no
// second redirect: no loop while the assignment moves), as is
// ErrUnavailable; every non-200 answer names the owner when there is one.
func TestStateHandlerAnswers(t *testing.T) {
	owner := actorflow.Member{MemberID: "m-b", ClientID: "kgo;query=worker-b:8080", Endpoint: "worker-b:8080"}
	noEndpoint := actorflow.Member{MemberID: "m-c", ClientID: "kgo"}
	notOwner := func(m actorflow.Member) error {
		return fmt.Errorf("wrapped: %w", &actorflow.NotOwnerError{Key: "acct-1", Topic: "in", Partition: 3, Owner: m})
	}
	for _, c := range []struct {
		name       string
		target     string
		err        error
		code       int
		location   string
		retryAfter string
		owner      *actorflow.Member
	}{
		{name: "local", target: "/state?key=acct-1", code: http.StatusOK},
		{name: "absent", target: "/state?key=acct-1", err: actorflow.ErrKeyNotFound, code: http.StatusNotFound},
		{name: "missing key", target: "/state", code: http.StatusBadRequest},
		{name: "owned elsewhere", target: "/state?key=acct-1", err: notOwner(owner), code: http.StatusTemporaryRedirect,
			location: "http://worker-b:8080/state?key=acct-1&redirected=1", owner: &owner},
		{name: "owned elsewhere, key escaped", target: "/state?key=a+b%26c", err: notOwner(owner), code: http.StatusTemporaryRedirect,
			location: "http://worker-b:8080/state?key=a+b%26c&redirected=1", owner: &owner},
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
			h := stateHandler(func(_ context.Context, key string) (*ledger.State, actorflow.QueryInfo, error) {
				asked = key
				if c.err != nil {
					return nil, actorflow.QueryInfo{Partition: 3}, c.err
				}
				return &ledger.State{Balance: 7, Count: 2}, actorflow.QueryInfo{Partition: 3, Local: true}, nil
			})
			rec := httptest.NewRecorder()
			h(rec, httptest.NewRequest(http.MethodGet, c.target, nil))
			var ans stateAnswer
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
			case c.code == http.StatusOK && (ans.State == nil || ans.State.Balance != 7 || !ans.Info.Local || ans.Key != "acct-1"):
				t.Errorf("200 body %+v", ans)
			case c.code != http.StatusOK && ans.Error == "":
				t.Errorf("%d without an error in the body", c.code)
			}
			if c.name == "owned elsewhere, key escaped" && asked != "a b&c" {
				t.Errorf("asked key %q, want the unescaped %q", asked, "a b&c")
			}
		})
	}
}

// The advertised endpoint: --advertise if set, else the --http address
// when its host is dialable as it is.
func TestAdvertised(t *testing.T) {
	for _, c := range []struct{ flag, listen, want string }{
		{"", "127.0.0.1:8080", "127.0.0.1:8080"},
		{"", "worker-1:8080", "worker-1:8080"},
		{"", ":8080", ""},
		{"", "0.0.0.0:8080", ""},
		{"", "[::]:8080", ""},
		{"w1.example:80", ":8080", "w1.example:80"},
		{"w1.example:80", "127.0.0.1:8080", "w1.example:80"},
	} {
		if got := advertised(c.flag, c.listen); got != c.want {
			t.Errorf("advertised(%q, %q) = %q, want %q", c.flag, c.listen, got, c.want)
		}
	}
}
