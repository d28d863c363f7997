package partitionflow_test

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/actorflow/actorflow/keyflow"
	"github.com/actorflow/actorflow/partitionflow"
	"github.com/actorflow/actorflow/snapshotstore"
)

// encodeOnly encodes as JSON and decodes nothing: a codec that cannot read
// its own output (a map key with MarshalText but no UnmarshalText).
type encodeOnly struct{}

func (encodeOnly) Encode(s *trace) ([]byte, error) { return json.Marshal(s) }
func (encodeOnly) Decode([]byte) (*trace, error)   { return nil, errors.New("cannot decode") }

// A snapshot the partition kept in memory since the key's unload (an
// eviction) names the snapshot partition, and says it was not read from the
// log, when it cannot be decoded at the reload: its error named "[0]@0",
// and its dead letter's headers topic "" partition 0 offset 0 — a wrong
// and plausible position (found by a review).
func TestAnUndecodableSnapshotKeptInMemoryNamesItsPartition(t *testing.T) {
	mem := snapshotstore.NewMemory()
	mem.TransactionalOutputs = true
	flow := keyflow.New(traceFold, keyflow.WithCodec[trace](encodeOnly{}), keyflow.WithMaxLiveKeys(1),
		keyflow.WithUndecodableStatePolicy(keyflow.DeadLetter))
	h := newHarnessWith(t, mem, flow, 0, func(c *partitionflow.Config) { c.SnapshotTopic = "snaps" })
	h.send(rec(0, "a", ""))
	h.awaitCommitted(1)
	h.send(rec(1, "b", "")) // a's eviction hands its snapshot back to the partition
	h.awaitCommitted(2)
	h.send(rec(2, "a", "")) // a reloads from it, and cannot decode it
	h.awaitCommitted(3)
	outs := mem.Outputs(topic, 0)
	if len(outs) != 1 {
		t.Fatalf("%d dead letters, want a's undecodable state", len(outs))
	}
	hs := map[string]string{}
	for _, hd := range outs[0].Headers {
		hs[hd.Key] = string(hd.Value)
	}
	if hs[keyflow.HeaderErrorTopic] != "snaps" || hs[keyflow.HeaderErrorPartition] != "0" || hs[keyflow.HeaderErrorOffset] != "-1" ||
		!strings.Contains(hs[keyflow.HeaderErrorMessage], "snaps[0] kept in memory since the key's last unload") {
		t.Fatalf("dead letter headers %v, want the snapshot partition snaps[0], offset -1 and a message saying the snapshot was kept in memory", hs)
	}
}
