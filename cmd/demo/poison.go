package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/actorflow/actorflow/keyflow"
	"github.com/twmb/franz-go/pkg/kgo"
)

// The poison records the poison subcommand can write, each a record the
// ledger flow cannot fold (issue 9): a non-JSON value and an amount past
// int64 for an existing account (keyflow.ErrUndecodable), and a valid event
// without key.
var poisonKinds = []string{"undecodable", "overflow", "nil-key"}

// HeaderPoison marks a record written by the poison subcommand (kept in its
// dead letter, for whoever reads the dead-letter topic).
const HeaderPoison = "actorflow.demo.poison"

// inputRef names an input record.
type inputRef struct {
	Topic     string `json:"topic"`
	Partition int32  `json:"partition"`
	Offset    int64  `json:"offset"`
}

func (r inputRef) String() string { return fmt.Sprintf("%s[%d]@%d", r.Topic, r.Partition, r.Offset) }

// injectedPoison is one record written by poison, with the dead-letter kind
// a worker under the dead-letter policy gives it.
type injectedPoison struct {
	Kind string `json:"kind"`
	inputRef
	Key       string `json:"key,omitempty"`
	Exception string `json:"exception"`
}

// runPoison writes one poison record of each --kinds to the input topic and
// prints each as a JSON line (kind, topic, partition, offset, key and the
// expected dead-letter kind). Exit 2 when a record is not acknowledged.
func runPoison(args []string) int {
	fs := flag.NewFlagSet("poison", flag.ExitOnError)
	brokers := fs.String("brokers", env("ACTORFLOW_BROKERS", "localhost:9092"), "seed brokers (ACTORFLOW_BROKERS)")
	input := fs.String("input", env("ACTORFLOW_INPUT", "ledger"), "input topic (ACTORFLOW_INPUT)")
	key := fs.String("key", "acct-0", "the account of the keyed poison records (an existing one: its partition must keep going)")
	kinds := fs.String("kinds", strings.Join(poisonKinds, ","), "comma-separated: undecodable (non-JSON), overflow (amount past int64), nil-key (a valid event without key)")
	timeout := fs.Duration("timeout", time.Minute, "how long to try to produce")
	_ = fs.Parse(args)
	ctx, cancel := context.WithTimeout(context.Background(), *timeout)
	defer cancel()
	out, err := poison(ctx, splitBrokers(*brokers), *input, *key, strings.Split(*kinds, ","))
	if err != nil {
		fmt.Fprintln(os.Stderr, "poison:", err)
		return 2
	}
	enc := json.NewEncoder(os.Stdout)
	for _, p := range out {
		_ = enc.Encode(p)
	}
	return 0
}

// poison produces one record of each kind to input (acknowledged, acks=all,
// the default partitioner: a keyed one lands on its account's partition) and
// returns where each landed.
func poison(ctx context.Context, brokers []string, input, key string, kinds []string) ([]injectedPoison, error) {
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...), kgo.DefaultProduceTopic(input))
	if err != nil {
		return nil, err
	}
	defer cl.Close()
	var out []injectedPoison
	for _, kind := range kinds {
		rec := &kgo.Record{Key: []byte(key), Headers: []kgo.RecordHeader{{Key: HeaderPoison, Value: []byte(kind)}}}
		exc := keyflow.KindUndecodable
		switch kind {
		case "undecodable":
			rec.Value = []byte("poison: not a JSON ledger event")
		case "overflow":
			rec.Value = []byte(fmt.Sprintf(`{"account":%q,"seq":1,"amount":99999999999999999999}`, key))
		case "nil-key":
			rec.Key, exc = nil, keyflow.KindNilKey
			rec.Value = []byte(fmt.Sprintf(`{"account":%q,"seq":1,"amount":1}`, key))
		default:
			return out, fmt.Errorf("unknown poison kind %q (want %s)", kind, strings.Join(poisonKinds, ", "))
		}
		res, err := cl.ProduceSync(ctx, rec).First()
		if err != nil {
			return out, fmt.Errorf("produce %s poison to %s: %w", kind, input, err)
		}
		p := injectedPoison{Kind: kind, inputRef: inputRef{res.Topic, res.Partition, res.Offset}, Exception: string(exc)}
		if res.Key != nil {
			p.Key = string(res.Key)
		}
		out = append(out, p)
	}
	return out, nil
}
