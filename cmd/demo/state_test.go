package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"slices"
	"testing"
	"time"

	"github.com/actorflow/actorflow"
	"github.com/actorflow/actorflow/httpapi"
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
			var answers [2]httpapi.StateAnswer[ledger.State]
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
			var followed httpapi.StateAnswer[ledger.State]
			if code, err := getJSON("http://"+addrs[other]+"/state?key="+key, &followed); err != nil || code != http.StatusOK ||
				followed.State == nil || *followed.State != *answers[owner].State {
				return false, fmt.Sprintf("%s followed from the other worker: %d %v %+v", key, code, err, followed)
			}
			// As does httpapi's Client given the other worker.
			c, err := httpapi.NewClient[ledger.State]("http://" + addrs[other] + "/state")
			if err != nil {
				t.Fatal(err)
			}
			if s, info, err := c.Get(context.Background(), key); err != nil || s == nil || *s != *answers[owner].State || !info.Local {
				return false, fmt.Sprintf("%s through the Client from the other worker: %+v %+v %v", key, s, info, err)
			}
			total += answers[owner].State.Count
		}
		return total == 200, fmt.Sprintf("%d events folded", total)
	})
	// /status shows each partition's lag (high watermark − committed),
	// 0 once caught up — also of a partition taken over after its records
	// were processed, which fetches nothing (kgo hands no empty fetch
	// over): its end offset was listed at its assignment.
	testkit.Eventually(t, 30*time.Second, "lag 0 in /status", func() (bool, string) {
		n := 0
		for _, a := range addrs {
			var st workerStatus
			if code, err := getJSON("http://"+a+"/status", &st); code != 200 || err != nil {
				return false, fmt.Sprint(code, err)
			}
			for _, p := range st.Partitions {
				n++
				if p.HighWatermark <= 0 || p.Lag != 0 || p.Committed != p.HighWatermark {
					return false, fmt.Sprintf("%+v", p)
				}
			}
		}
		return n > 0, "no partition"
	})
	var codes []int
	for _, a := range addrs {
		var ans httpapi.StateAnswer[ledger.State]
		resp, err := getWith(noRedirects, "http://"+a+"/state?key=nobody", &ans)
		if err != nil {
			t.Fatal(err)
		}
		codes = append(codes, resp.StatusCode)
		if code, err := getJSON("http://"+a+"/state?key=nobody", &ans); err != nil || code != http.StatusNotFound {
			t.Errorf("absent account through %s, redirects followed: %d, %v; want the owner's 404", a, code, err)
		}
		c, err := httpapi.NewClient[ledger.State]("http://" + a + "/state")
		if err != nil {
			t.Fatal(err)
		}
		if _, _, err := c.Get(context.Background(), "nobody"); !errors.Is(err, actorflow.ErrKeyNotFound) {
			t.Errorf("absent account through the Client from %s: %v, want ErrKeyNotFound", a, err)
		}
	}
	slices.Sort(codes)
	if !slices.Equal(codes, []int{http.StatusTemporaryRedirect, http.StatusNotFound}) {
		t.Errorf("absent account: codes %v, want 404 from its owner and 307 from the other", codes)
	}
	var ans httpapi.StateAnswer[ledger.State]
	if code, _ := getJSON("http://"+addrs[0]+"/state", &ans); code != http.StatusBadRequest {
		t.Errorf("missing key: %d, want 400", code)
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
