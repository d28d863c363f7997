package keyactor

import (
	"errors"
	"testing"
	"time"

	"github.com/actorflow/actorflow/snapshotstore"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
)

// CheckOutput refuses an output to a missing topic in the transactional
// mode, whose outputs go through the store that read the rules; not in the
// plain mode, whose producer (WithOutput's) may write to another cluster
// than the worker's, or create the topic.
func TestCheckOutputOfAMissingTopic(t *testing.T) {
	rules := func(string) snapshotstore.TopicRules { return snapshotstore.TopicRules{Missing: true} }
	for _, c := range []struct {
		name    string
		txn     bool
		refused bool
	}{
		{"transactional", true, true},
		{"plain", false, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			k := &Core{env: &Env{TopicRules: rules, TxnOutputs: c.txn}, cfg: &Config{}}
			err := k.CheckOutput(&kgo.Record{Topic: "nope", Key: []byte("k"), Timestamp: time.Now()})
			if refused := errors.Is(err, kerr.UnknownTopicOrPartition); refused != c.refused {
				t.Fatalf("CheckOutput: %v, want refused %v", err, c.refused)
			}
		})
	}
}
