package keyactor

import (
	"errors"
	"testing"
	"time"

	"github.com/actorflow/actorflow/snapshotstore"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
)

// CheckOutput refuses an output to a missing topic, unless the plain
// mode's output producer creates topics; the transactional mode's outputs
// go through the store, whose rules say Missing only when its own
// producers would not create it.
func TestCheckOutputOfAMissingTopic(t *testing.T) {
	rules := func(string) snapshotstore.TopicRules { return snapshotstore.TopicRules{Missing: true} }
	client := func(opts ...kgo.Opt) *kgo.Client {
		cl, err := kgo.NewClient(append(opts, kgo.SeedBrokers("127.0.0.1:1"))...) // never connects: only its options are read
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(cl.Close)
		return cl
	}
	for _, c := range []struct {
		name    string
		txn     bool
		output  *kgo.Client
		refused bool
	}{
		{"transactional", true, nil, true},
		{"plain, kgo's defaults", false, client(), true},
		{"plain, a producer creating topics", false, client(kgo.AllowAutoTopicCreation()), false},
	} {
		t.Run(c.name, func(t *testing.T) {
			k := &Core{env: &Env{TopicRules: rules, TxnOutputs: c.txn}, cfg: &Config{Output: c.output}}
			err := k.CheckOutput(&kgo.Record{Topic: "nope", Key: []byte("k"), Timestamp: time.Now()})
			if refused := errors.Is(err, kerr.UnknownTopicOrPartition); refused != c.refused {
				t.Fatalf("CheckOutput: %v, want refused %v", err, c.refused)
			}
		})
	}
}
