package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"slices"
	"testing"
	"time"

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
	resp, err := http.Get(url)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	return resp.StatusCode, json.NewDecoder(resp.Body).Decode(v)
}

// Two demo workers of one group: /state?key=K answers 200 with the
// account's state on the worker owning its partition and 421 naming that
// worker's member on the other; an account without state is 404 on its
// owner; a missing key is 400.
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
	testkit.Eventually(t, 60*time.Second, "every account answered by its owner, 421 naming it elsewhere", func() (bool, string) {
		var total int64
		for i := range 20 {
			key := ledger.AccountKey(i)
			var answers [2]stateAnswer
			var codes [2]int
			for j, a := range addrs {
				code, err := getJSON("http://"+a+"/state?key="+key, &answers[j])
				if err != nil {
					return false, err.Error()
				}
				codes[j] = code
			}
			owner := slices.Index(codes[:], http.StatusOK)
			other := 1 - owner
			if owner < 0 || codes[other] != http.StatusMisdirectedRequest {
				return false, fmt.Sprintf("%s: codes %v, answers %+v", key, codes, answers)
			}
			if o := answers[other].Owner; o == nil || o.MemberID != members[owner] {
				t.Fatalf("%s: 421 names %+v, want the owner's member %s", key, o, members[owner])
			}
			if s := answers[owner].State; s == nil || !answers[owner].Info.Local {
				t.Fatalf("%s: 200 without a local state: %+v", key, answers[owner])
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
		code, err := getJSON("http://"+a+"/state?key=nobody", &ans)
		if err != nil {
			t.Fatal(err)
		}
		codes = append(codes, code)
	}
	slices.Sort(codes)
	if !slices.Equal(codes, []int{http.StatusNotFound, http.StatusMisdirectedRequest}) {
		t.Errorf("absent account: codes %v, want 404 from its owner and 421 from the other", codes)
	}
	var ans stateAnswer
	if code, _ := getJSON("http://"+addrs[0]+"/state", &ans); code != http.StatusBadRequest {
		t.Errorf("missing key: %d, want 400", code)
	}
}
