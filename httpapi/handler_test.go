package httpapi_test

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/actorflow/actorflow"
	"github.com/actorflow/actorflow/httpapi"
	"github.com/actorflow/actorflow/internal/testkit"
	"github.com/actorflow/actorflow/keyflow"
	"github.com/twmb/franz-go/pkg/kgo"
)

// A worker not running: both probes answer 503 with the Health saying so,
// /status answers (no partitions), and a /state of a type the flow is not
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
	if code := get("/status", &st); code != http.StatusOK || len(st.Partitions) != 0 {
		t.Errorf("/status: %d %+v", code, st)
	}
	var ans httpapi.StateAnswer[other]
	if code := get("/state?key=k", &ans); code != http.StatusInternalServerError || !strings.Contains(ans.Error, "other") || !strings.Contains(ans.Error, "Count") {
		t.Errorf("/state of the wrong type: %d %+v, want 500 naming both types", code, ans)
	}
}
