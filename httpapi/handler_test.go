package httpapi_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/actorflow/actorflow"
	"github.com/actorflow/actorflow/httpapi"
	"github.com/actorflow/actorflow/internal/scenarios"
	"github.com/actorflow/actorflow/internal/testkit"
	"github.com/actorflow/actorflow/keyflow"
	"github.com/actorflow/actorflow/snapshotstore"
	"github.com/twmb/franz-go/pkg/kgo"
)

// A worker not running: both probes answer 503 with the Health saying so,
// /status answers 503 (not running, no partitions), and a /state of a type the flow is not
// over is a 500 naming both types, not a 404.
func TestHandlerOfAWorkerNotRunning(t *testing.T) {
	_, brokers := testkit.Kfake(t)
	flow := keyflow.New(func(_ *keyflow.Context, s *Count, _ *kgo.Record) (*Count, error) { return s, nil })
	w, err := actorflow.NewWorker(flow, actorflow.WithBrokers(brokers...), actorflow.WithGroup("g"),
		actorflow.WithInputTopic("in"), actorflow.WithSnapshotTopic("snaps"))
	if err != nil {
		t.Fatal(err)
	}
	type other struct{ S string }
	srv := httptest.NewServer(httpapi.Handler[other](w))
	defer srv.Close()
	get := func(path string, v any) int {
		t.Helper()
		resp, err := http.Get(srv.URL + path)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		if err := json.NewDecoder(resp.Body).Decode(v); err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		return resp.StatusCode
	}
	for _, p := range []string{"/healthz", "/readyz"} {
		var h actorflow.Health
		if code := get(p, &h); code != http.StatusServiceUnavailable || h.Running {
			t.Errorf("%s: %d %+v, want 503 not running", p, code, h)
		}
	}
	var st actorflow.Status
	if code := get("/status", &st); code != http.StatusServiceUnavailable || st.Running || st.Stopped || len(st.Partitions) != 0 {
		t.Errorf("/status: %d %+v, want 503 not running", code, st)
	}
	var ans httpapi.StateAnswer[other]
	if code := get("/state?key=k", &ans); code != http.StatusInternalServerError || !strings.Contains(ans.Error, "other") || !strings.Contains(ans.Error, "Count") {
		t.Errorf("/state of the wrong type: %d %+v, want 500 naming both types", code, ans)
	}
}

// A worker whose Run returned on a failure (WithFailFast): /healthz and
// /readyz say it stopped and why (their report read as one of a worker not
// started yet), and /state answers 503 without Retry-After: it will not
// answer again, ask another worker.
func TestHandlerOfAStoppedWorker(t *testing.T) {
	w := poisonedWorker(t, actorflow.WithFailFast())
	if err := w.Wait(t, time.Minute); err == nil {
		t.Fatal("Run returned nil, want the partition's failure")
	}
	srv := httptest.NewServer(httpapi.Handler[Count](w.W))
	defer srv.Close()
	for _, p := range []string{"/healthz", "/readyz", "/status"} {
		resp, err := http.Get(srv.URL + p)
		if err != nil {
			t.Fatal(err)
		}
		var h struct { // Health's and Status's fields
			Running, Stopped bool
			RunError         string `json:"run_error"`
		}
		err = json.NewDecoder(resp.Body).Decode(&h)
		resp.Body.Close()
		if err != nil || resp.StatusCode != http.StatusServiceUnavailable || h.Running || !h.Stopped || !strings.Contains(h.RunError, "fold refuses poison") {
			t.Errorf("%s: %d %+v %v, want 503 stopped with Run's error", p, resp.StatusCode, h, err)
		}
	}
	resp, err := http.Get(srv.URL + "/state?key=k")
	if err != nil {
		t.Fatal(err)
	}
	var ans httpapi.StateAnswer[Count]
	err = json.NewDecoder(resp.Body).Decode(&ans)
	resp.Body.Close()
	if err != nil || resp.StatusCode != http.StatusServiceUnavailable || resp.Header.Get("Retry-After") != "" || !strings.Contains(ans.Error, "Run returned") {
		t.Errorf("/state: %d Retry-After %q %+v %v, want 503 without Retry-After saying Run returned", resp.StatusCode, resp.Header.Get("Retry-After"), ans, err)
	}
}

// A partition failing at a record keeps /readyz at 503 by default (Health.
// Ready); WithReadyWhen defines readiness without the failed partitions,
// and the body still lists them.
func TestReadyWhenAPartitionFails(t *testing.T) {
	w := poisonedWorker(t, actorflow.WithPartitionRetryBackoff(time.Hour, time.Hour))
	testkit.Eventually(t, time.Minute, "the partition failed", func() (bool, string) {
		h := w.W.Health(t.Context())
		return len(h.Failed) == 1 && h.Joined, fmt.Sprintf("%+v", h)
	})
	servingWithout := func(h actorflow.Health) bool { return h.Running && !h.ShuttingDown && h.BrokersReachable && h.Joined }
	for _, c := range []struct {
		name string
		opts []httpapi.Option
		code int
	}{
		{"default", nil, http.StatusServiceUnavailable},
		{"WithReadyWhen", []httpapi.Option{httpapi.WithReadyWhen(servingWithout)}, http.StatusOK},
	} {
		srv := httptest.NewServer(httpapi.Ready(w.W, c.opts...))
		resp, err := http.Get(srv.URL)
		if err != nil {
			t.Fatal(err)
		}
		var h actorflow.Health
		err = json.NewDecoder(resp.Body).Decode(&h)
		resp.Body.Close()
		srv.Close()
		if err != nil || resp.StatusCode != c.code || len(h.Failed) != 1 {
			t.Errorf("%s: %d %+v %v, want %d with the failed partition in the body", c.name, resp.StatusCode, h, err, c.code)
		}
	}
}

// poisonedWorker runs a worker whose one partition's one record ("poison",
// key k) its fold refuses (the Fail policy: the partition fails).
func poisonedWorker(t *testing.T, opts ...actorflow.Option) *scenarios.Worker {
	_, brokers := testkit.Kfake(t)
	input, snaps, group := scenarios.Topics(t, brokers, 1)
	cl := testkit.Client(t, brokers, kgo.DefaultProduceTopic(input))
	if err := cl.ProduceSync(t.Context(), &kgo.Record{Key: []byte("k"), Value: []byte("poison")}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	flow := keyflow.New(func(_ *keyflow.Context, s *Count, r *kgo.Record) (*Count, error) {
		return nil, errors.New("fold refuses " + string(r.Value))
	})
	return scenarios.StartWorker(t, flow, brokers, group, input, snaps, snapshotstore.Transactional, opts...)
}

// A worker starting (Run waiting for its brokers): /status answers 503,
// running but not joined — with a 200 its empty list of partitions read as
// a member owning none (a review).
func TestStatusOfAStartingWorker(t *testing.T) {
	flow := keyflow.New(func(_ *keyflow.Context, s *Count, _ *kgo.Record) (*Count, error) { return s, nil })
	w, err := actorflow.NewWorker(flow, actorflow.WithBrokers(testkit.SilentBroker(t)), actorflow.WithGroup("g"),
		actorflow.WithInputTopic("in"), actorflow.WithSnapshotTopic("snaps"), actorflow.WithStartTimeout(time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- w.Run(ctx) }()
	defer func() { cancel(); <-done }()
	srv := httptest.NewServer(httpapi.Handler[Count](w))
	defer srv.Close()
	testkit.Eventually(t, 30*time.Second, "/status of a running worker", func() (bool, string) {
		resp, err := http.Get(srv.URL + "/status")
		if err != nil {
			return false, err.Error()
		}
		var st actorflow.Status
		err = json.NewDecoder(resp.Body).Decode(&st)
		resp.Body.Close()
		if err != nil || !st.Running {
			return false, fmt.Sprint(resp.StatusCode, st, err)
		}
		if resp.StatusCode != http.StatusServiceUnavailable || st.Generation != 0 {
			t.Fatalf("/status while starting: %d %+v, want 503, generation 0", resp.StatusCode, st)
		}
		return true, ""
	})
}
