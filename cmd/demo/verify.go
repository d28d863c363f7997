package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"sort"
	"time"

	"github.com/actorflow/actorflow/internal/ledger"
	"github.com/actorflow/actorflow/snapshotstore"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// report is the verifier's result.
type report struct {
	Accounts         int      `json:"accounts"`
	Events           int      `json:"events"`
	Mismatches       int      `json:"mismatches"`
	Examples         []string `json:"mismatch_examples,omitempty"`
	Outputs          int      `json:"outputs"`
	OutputDuplicates int      `json:"output_duplicates"`
	MissingOutputs   int      `json:"missing_outputs"`
	DrainSeconds     float64  `json:"drain_seconds"`
}

// runVerify waits until the group has committed the whole input, folds the
// input itself, and compares every account's snapshot (read_committed).
func runVerify(args []string) int {
	fs := flag.NewFlagSet("verify", flag.ExitOnError)
	brokers := fs.String("brokers", env("ACTORFLOW_BROKERS", "localhost:9092"), "seed brokers (ACTORFLOW_BROKERS)")
	group := fs.String("group", env("ACTORFLOW_GROUP", "ledger"), "consumer group (ACTORFLOW_GROUP)")
	input := fs.String("input", env("ACTORFLOW_INPUT", "ledger"), "input topic (ACTORFLOW_INPUT)")
	snaps := fs.String("snapshots", env("ACTORFLOW_SNAPSHOTS", "ledger-snapshots"), "snapshot topic (ACTORFLOW_SNAPSHOTS)")
	output := fs.String("output", env("ACTORFLOW_OUTPUT", ""), "output topic to check for duplicates (ACTORFLOW_OUTPUT)")
	timeout := fs.Duration("timeout", envDuration("ACTORFLOW_VERIFY_TIMEOUT", 5*time.Minute), "how long to wait for the group to drain")
	asJSON := fs.Bool("json", false, "print the report as JSON")
	_ = fs.Parse(args)
	ctx, cancel := context.WithTimeout(context.Background(), *timeout+5*time.Minute)
	defer cancel()
	bl := splitBrokers(*brokers)
	r, err := verify(ctx, bl, *group, *input, *snaps, *output, *timeout)
	if err != nil {
		fmt.Fprintln(os.Stderr, "verify:", err)
		return 2
	}
	if *asJSON {
		_ = json.NewEncoder(os.Stdout).Encode(r)
	} else {
		for _, e := range r.Examples {
			fmt.Println("MISMATCH", e)
		}
		fmt.Printf("outputs %d, duplicates %d (at-least-once), missing %d\n", r.Outputs, r.OutputDuplicates, r.MissingOutputs)
	}
	if r.Mismatches > 0 {
		fmt.Printf("FAIL: %d of %d accounts differ from the fold of their %d input events\n", r.Mismatches, r.Accounts, r.Events)
		return 1
	}
	fmt.Printf("PASS: %d accounts, %d events: every snapshot equals the fold of its input\n", r.Accounts, r.Events)
	return 0
}

func verify(ctx context.Context, brokers []string, group, input, snaps, output string, timeout time.Duration) (*report, error) {
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...))
	if err != nil {
		return nil, err
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	start := time.Now()
	for {
		_, lag, err := progress(ctx, adm, group, input)
		if err == nil && lag == 0 {
			break
		}
		if time.Since(start) > timeout {
			return nil, fmt.Errorf("group %s still lags %d on %s after %s (err %v)", group, lag, input, timeout, err)
		}
		time.Sleep(time.Second)
	}
	r := &report{DrainSeconds: time.Since(start).Seconds()}

	// The verifier's own fold of the input.
	exp := map[string]*ledger.State{}
	var events int
	if err := readAll(ctx, brokers, input, func(rec *kgo.Record) error {
		s, err := ledger.Fold(nil, exp[string(rec.Key)], rec)
		if err != nil {
			return fmt.Errorf("input %s[%d]@%d: %w", rec.Topic, rec.Partition, rec.Offset, err)
		}
		exp[string(rec.Key)] = s
		events++
		return nil
	}); err != nil {
		return nil, err
	}
	r.Accounts, r.Events = len(exp), events

	got := map[string]*ledger.State{}
	parts, err := adm.ListEndOffsets(ctx, snaps)
	if err != nil {
		return nil, err
	}
	var snapParts []int32
	parts.Each(func(o kadm.ListedOffset) { snapParts = append(snapParts, o.Partition) })
	for _, p := range snapParts {
		latest, err := snapshotstore.ReadLatest(ctx, brokers, snaps, p, true)
		if err != nil {
			return nil, err
		}
		for k, s := range latest {
			if s.Tombstone() {
				continue
			}
			var st ledger.State
			if err := json.Unmarshal(s.Value, &st); err != nil {
				return nil, fmt.Errorf("snapshot %s key %q: %w", s.Source, k, err)
			}
			got[k] = &st
		}
	}
	expected := ledger.Expected{}
	for k, s := range exp {
		expected[k] = *s
	}
	mm := ledger.Compare(expected, got)
	r.Mismatches = len(mm)
	for i, m := range mm {
		if i == 20 {
			break
		}
		r.Examples = append(r.Examples, m.String())
	}

	if output != "" {
		seen := map[string]map[int64]bool{}
		if err := readAll(ctx, brokers, output, func(rec *kgo.Record) error {
			var o ledger.Output
			if err := json.Unmarshal(rec.Value, &o); err != nil {
				return fmt.Errorf("output %s[%d]@%d: %w", rec.Topic, rec.Partition, rec.Offset, err)
			}
			r.Outputs++
			if seen[o.Account] == nil {
				seen[o.Account] = map[int64]bool{}
			}
			if seen[o.Account][o.Seq] {
				r.OutputDuplicates++
			}
			seen[o.Account][o.Seq] = true
			return nil
		}); err != nil {
			return nil, err
		}
		for acct, s := range exp {
			for seq := int64(1); seq <= s.LastSeq; seq++ {
				if !seen[acct][seq] {
					r.MissingOutputs++
				}
			}
		}
	}
	return r, nil
}

// readAll reads every partition of topic from the start to its end offset
// at the time of the call.
func readAll(ctx context.Context, brokers []string, topic string, fn func(*kgo.Record) error) error {
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...))
	if err != nil {
		return err
	}
	defer cl.Close()
	ends, err := kadm.NewClient(cl).ListEndOffsets(ctx, topic)
	if err != nil {
		return err
	}
	if err := ends.Error(); err != nil {
		return err
	}
	parts := map[int32]kgo.Offset{}
	remaining := map[int32]int64{}
	ends.Each(func(o kadm.ListedOffset) {
		if o.Offset > 0 {
			parts[o.Partition] = kgo.NewOffset().AtStart()
			remaining[o.Partition] = o.Offset
		}
	})
	if len(parts) == 0 {
		return nil
	}
	rd, err := kgo.NewClient(kgo.SeedBrokers(brokers...),
		kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: parts}), kgo.FetchIsolationLevel(kgo.ReadCommitted()))
	if err != nil {
		return err
	}
	defer rd.Close()
	for len(remaining) > 0 {
		fs := rd.PollFetches(ctx)
		if err := ctx.Err(); err != nil {
			return err
		}
		var ferr error
		fs.EachError(func(_ string, _ int32, err error) { ferr = err })
		if ferr != nil {
			return ferr
		}
		keys := make([]int32, 0)
		fs.EachRecord(func(rec *kgo.Record) {
			if end, ok := remaining[rec.Partition]; ok && rec.Offset < end {
				if err := fn(rec); err != nil && ferr == nil {
					ferr = err
				}
				if rec.Offset+1 >= end {
					keys = append(keys, rec.Partition)
				}
			}
		})
		if ferr != nil {
			return ferr
		}
		sort.Slice(keys, func(i, j int) bool { return keys[i] < keys[j] })
		for _, p := range keys {
			delete(remaining, p)
		}
	}
	return nil
}
