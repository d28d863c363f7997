package keyflow_test

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/actorflow/actorflow"
	"github.com/actorflow/actorflow/keyflow"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
)

// VisitsV1 is a state as first deployed.
type VisitsV1 struct {
	Count int `json:"count"`
}

// Visits is the state redeployed: Count renamed to Events, a field added.
// With the JSON codec alone, the old snapshots' "count" would be dropped
// silently (encoding/json ignores unknown fields) and the next write would
// erase it.
type Visits struct {
	Version int    `json:"v"`
	Events  int    `json:"events"`
	Last    string `json:"last,omitempty"`
}

// visitsCodec writes Visits with a version and reads both forms: the
// state's old snapshots are read where the key is loaded (a snapshot is
// written again only at the key's next change), so the codec keeps reading
// the old form for as long as a key may still hold one.
type visitsCodec struct{}

func (visitsCodec) Encode(s *Visits) ([]byte, error) {
	v := *s
	v.Version = 2
	return json.Marshal(&v)
}

func (visitsCodec) Decode(b []byte) (*Visits, error) {
	var probe struct {
		Version int `json:"v"`
	}
	if err := json.Unmarshal(b, &probe); err != nil {
		return nil, err
	}
	switch probe.Version {
	case 0: // VisitsV1 had no version
		var old VisitsV1
		if err := json.Unmarshal(b, &old); err != nil {
			return nil, err
		}
		return &Visits{Version: 2, Events: old.Count}, nil
	case 2:
		s := new(Visits)
		return s, json.Unmarshal(b, s)
	}
	return nil, fmt.Errorf("visits: unknown state version %d", probe.Version)
}

// ExampleWithCodec changes a flow's state type across a redeploy: the
// second flow's codec reads the first one's snapshots (see also
// WithUndecodableStatePolicy, for a state no codec of the flow reads).
func ExampleWithCodec() {
	cluster, _ := kfake.NewCluster(kfake.NumBrokers(1))
	defer cluster.Close()
	brokers := cluster.ListenAddrs()
	producer, _ := kgo.NewClient(kgo.SeedBrokers(brokers...), kgo.DefaultProduceTopic("visits"))
	defer producer.Close()
	// run runs a worker of flow over pages (ann's visits), then asks it.
	run := func(flow keyflow.Handler, pages []string, ask func(context.Context, *actorflow.Worker)) {
		worker, _ := actorflow.NewWorker(flow,
			actorflow.WithBrokers(brokers...), actorflow.WithGroup("visits"),
			actorflow.WithInputTopic("visits"), actorflow.WithSnapshotTopic("visits-state"),
			actorflow.WithCreateTopics(1, -1))
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		done := make(chan error, 1)
		go func() { done <- worker.Run(ctx) }()
		for _, p := range pages {
			producer.ProduceSync(ctx, &kgo.Record{Key: []byte("ann"), Value: []byte(p)})
		}
		_ = worker.WaitCaughtUp(ctx) // every visit folded and its snapshot committed
		ask(ctx, worker)
		cancel()
		<-done
	}

	v1 := keyflow.New(func(_ *keyflow.Context, s *VisitsV1, _ *kgo.Record) (*VisitsV1, error) {
		if s == nil {
			s = &VisitsV1{}
		}
		s.Count++
		return s, nil
	})
	run(v1, []string{"/", "/about"}, func(ctx context.Context, w *actorflow.Worker) {
		s, _, _ := actorflow.Get[VisitsV1](ctx, w, "ann")
		fmt.Println("v1: count", s.Count)
	})

	v2 := keyflow.New(func(_ *keyflow.Context, s *Visits, rec *kgo.Record) (*Visits, error) {
		if s == nil {
			s = &Visits{}
		}
		s.Events++
		s.Last = string(rec.Value)
		return s, nil
	}, keyflow.WithCodec[Visits](visitsCodec{}))
	run(v2, []string{"/pricing"}, func(ctx context.Context, w *actorflow.Worker) {
		s, _, err := actorflow.Get[Visits](ctx, w, "ann")
		fmt.Printf("v2: events %d, last %q, %v\n", s.Events, s.Last, err)
	})
	// Output:
	// v1: count 2
	// v2: events 3, last "/pricing", <nil>
}
