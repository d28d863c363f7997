package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/actorflow/actorflow/internal/ledger"
	"github.com/actorflow/actorflow/keyflow"
	"github.com/actorflow/actorflow/snapshotstore"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// report is the verifier's result.
type report struct {
	Mode     string `json:"mode"`
	Accounts int    `json:"accounts"`
	Events   int    `json:"events"`
	// InputGaps counts the jumps in the input's sequence numbers
	// (ledger.State.Gaps of the verifier's fold: one per jump, whatever its
	// length): events lost before any worker read them.
	InputGaps        int64    `json:"input_gaps"`
	Mismatches       int      `json:"mismatches"`
	Examples         []string `json:"mismatch_examples,omitempty"`
	Outputs          int      `json:"outputs"`
	OutputDuplicates int      `json:"output_duplicates"`
	MissingOutputs   int      `json:"missing_outputs"`
	// OutputsOutOfOrder counts outputs of an account read after one with a
	// higher sequence number (per key, in partition order).
	OutputsOutOfOrder int `json:"outputs_out_of_order"`
	// AcknowledgedMissing counts the events the producer had acknowledged
	// (--produced) that the input lacks: per account, the sequence numbers
	// past its last one in the input. A count of events alone let repeats
	// of a retried batch hide a lost tail.
	AcknowledgedMissing int64 `json:"acknowledged_missing"`
	// WrongBalances counts outputs whose balance is none the verifier's fold
	// gives their account after their sequence number: an output emitted
	// from a state that diverged (an event lost or folded twice through a
	// handover) even when the final snapshot came out right.
	WrongBalances         int `json:"wrong_balances"`
	KeysWithWrongBalances int `json:"keys_with_wrong_balances"`
	// Per key: how many accounts have duplicates, missing outputs, and a
	// line for the first of them.
	KeysWithDuplicates int      `json:"keys_with_duplicates"`
	KeysWithMissing    int      `json:"keys_with_missing"`
	OutputExamples     []string `json:"output_examples,omitempty"`
	// DuplicateCopies places every copy of the first duplicated outputs
	// (up to 20): partition, offset, the producer ID and epoch of the batch
	// (which transaction wrote it) and its timestamp, so that a duplicate
	// seen once in a chaos run can be traced in the workers' logs.
	DuplicateCopies []string `json:"duplicate_copies,omitempty"`
	// BalanceExamples places the first outputs with a wrong balance (up to
	// 20), with the balances their sequence number should carry.
	BalanceExamples []string `json:"balance_examples,omitempty"`
	// Traces is the history of the first failed accounts (up to 3 with a
	// duplicated output, then up to 3 mismatched): every input event,
	// snapshot write and output of the key, read_uncommitted, with the
	// transaction that wrote it and its outcome (trace.go).
	Traces []string `json:"traces,omitempty"`
	// TxnAudit: whether the broker kept the workers' transactions atomic on
	// the snapshot and output topics (txnaudit.go); nil when it could not
	// be read (AuditError says why).
	TxnAudit   *txnAudit `json:"txn_audit,omitempty"`
	AuditError string    `json:"txn_audit_error,omitempty"`
	// traceKeys: the accounts Traces follows.
	traceKeys []string
	// ExactlyOnce: the outputs were checked as exactly-once (the
	// transactional mode): a duplicate, a missing or an out-of-order output
	// fails the verification.
	ExactlyOnce bool `json:"exactly_once"`
	// Transactional: the workers' mode is transactional, so every dead
	// letter is written once (in the transaction of the snapshot that
	// passes its record), with or without an output topic.
	Transactional bool    `json:"transactional"`
	DrainSeconds  float64 `json:"drain_seconds"`

	// SkippedInputs counts the input records that are no ledger event (no
	// key, or undecodable: keyflow.ErrUndecodable), which the workers'
	// Skip or DeadLetter policy leaves without effect and the verifier's own
	// fold skips too; Skipped names each of them.
	SkippedInputs int            `json:"skipped_inputs"`
	Skipped       []skippedInput `json:"skipped,omitempty"`
	// DeadLetterTopic is the dead-letter topic read (read_committed), ""
	// when it does not exist (the workers' policies are not DeadLetter).
	// Each skipped input should be in it once (DeadLetterDuplicates counts
	// the extra copies, which fail only the exactly-once check),
	// DeadLettersMissing counts skipped inputs without a dead letter and
	// DeadLettersUnexpected dead letters of no skipped input (an event that
	// was valid, or of another topic).
	DeadLetterTopic       string       `json:"dead_letter_topic,omitempty"`
	DeadLettersTotal      int          `json:"dead_letters_total"`
	DeadLetters           []deadLetter `json:"dead_letters,omitempty"`
	DeadLetterDuplicates  int          `json:"dead_letter_duplicates"`
	DeadLettersMissing    int          `json:"dead_letters_missing"`
	DeadLettersUnexpected int          `json:"dead_letters_unexpected"`
}

// skippedInput is an input record the verifier's fold skipped, and why.
type skippedInput struct {
	inputRef
	Key string `json:"key,omitempty"`
	Why string `json:"why"`
}

// deadLetter is a record of the dead-letter topic: the source its KIP-1034
// headers name, its kind (__streams.errors.exception) and where it is.
type deadLetter struct {
	Source    inputRef `json:"source"`
	Exception string   `json:"exception"`
	Partition int32    `json:"dlq_partition"`
	Offset    int64    `json:"dlq_offset"`
}

// failed reports whether the verification fails: no input event at all,
// gaps in the input, a mismatch (an account's snapshot differs from the
// fold of its input, or exists without input), outputs that break the
// mode's guarantee, or dead letters that do not match the skipped inputs
// (when there is a dead-letter topic).
func (r *report) failed() bool {
	if r.Events == 0 || r.InputGaps > 0 || r.Mismatches > 0 || r.outputsFailed() || r.AcknowledgedMissing > 0 {
		return true // no input verifies nothing; an input with gaps lost events before any worker saw them
	}
	if r.DeadLetterTopic == "" {
		return false
	}
	return r.DeadLettersMissing > 0 || r.DeadLettersUnexpected > 0 || (r.Transactional && r.DeadLetterDuplicates > 0)
}

// matchDeadLetters counts, per skipped input, its dead letters.
func (r *report) matchDeadLetters() {
	n := map[inputRef]int{}
	for _, dl := range r.DeadLetters {
		n[dl.Source]++
	}
	skipped := map[inputRef]bool{}
	for _, s := range r.Skipped {
		skipped[s.inputRef] = true
		switch c := n[s.inputRef]; {
		case c == 0:
			r.DeadLettersMissing++
		case c > 1:
			r.DeadLetterDuplicates += c - 1
		}
	}
	for src, c := range n {
		if !skipped[src] {
			r.DeadLettersUnexpected += c
		}
	}
}

// outputsFailed reports whether the outputs break the mode's guarantee:
// exactly-once and in order (transactional) or at-least-once (plain:
// nothing missing; a replay repeats outputs, out of order too).
func (r *report) outputsFailed() bool {
	if r.ExactlyOnce {
		return r.OutputDuplicates > 0 || r.MissingOutputs > 0 || r.OutputsOutOfOrder > 0 || r.WrongBalances > 0
	}
	return r.MissingOutputs > 0 || r.WrongBalances > 0
}

// runVerify waits until the group has committed the whole input, folds the
// input itself, and compares every account's snapshot (read_committed).
func runVerify(args []string) int {
	fs := flag.NewFlagSet("verify", flag.ExitOnError)
	brokers := fs.String("brokers", env("ACTORFLOW_BROKERS", "localhost:9092"), "seed brokers (ACTORFLOW_BROKERS)")
	group := fs.String("group", env("ACTORFLOW_GROUP", "ledger"), "consumer group (ACTORFLOW_GROUP)")
	input := fs.String("input", env("ACTORFLOW_INPUT", "ledger"), "input topic (ACTORFLOW_INPUT)")
	snaps := fs.String("snapshots", env("ACTORFLOW_SNAPSHOTS", "ledger-snapshots"), "snapshot topic (ACTORFLOW_SNAPSHOTS)")
	output := fs.String("output", env("ACTORFLOW_OUTPUT", ""), "output topic to check for duplicates and missing outputs (ACTORFLOW_OUTPUT)")
	dlq := fs.String("dead-letter-topic", env("ACTORFLOW_DEAD_LETTER_TOPIC", ""), "dead-letter topic to match with the skipped inputs, default <input>.dlq; ignored when missing (ACTORFLOW_DEAD_LETTER_TOPIC)")
	mode := fs.String("mode", env("ACTORFLOW_MODE", "transactional"), "the workers' mode (ACTORFLOW_MODE): transactional checks the outputs as exactly-once, plain as at-least-once")
	timeout := fs.Duration("timeout", envDuration("ACTORFLOW_VERIFY_TIMEOUT", 5*time.Minute), "how long to wait for the group to drain")
	asJSON := fs.Bool("json", false, "print the report as JSON")
	produced := fs.Int("produced", envInt("ACTORFLOW_PRODUCED", 0), "events the producer had acknowledged, round-robin over --accounts from a fresh start: each account's are checked present in the input; 0: not checked (ACTORFLOW_PRODUCED)")
	accounts := fs.Int("accounts", envInt("ACTORFLOW_ACCOUNTS", 1000), "the producer's accounts, for --produced (ACTORFLOW_ACCOUNTS)")
	_ = fs.Parse(args)
	ctx, cancel := context.WithTimeout(context.Background(), *timeout+5*time.Minute)
	defer cancel()
	bl := splitBrokers(*brokers)
	if _, err := parseMode(*mode); err != nil {
		fmt.Fprintln(os.Stderr, "verify:", err)
		return 2
	}
	r, err := verify(ctx, bl, *group, *input, *snaps, *output, *dlq, *timeout, acknowledged{*produced, *accounts})
	if err != nil {
		fmt.Fprintln(os.Stderr, "verify:", err)
		return 2
	}
	r.Mode = *mode
	r.Transactional = *mode == "transactional"
	r.ExactlyOnce = r.Transactional && *output != ""
	if *asJSON {
		_ = json.NewEncoder(os.Stdout).Encode(r)
	} else {
		for _, e := range r.Examples {
			fmt.Println("MISMATCH", e)
		}
		for _, e := range r.OutputExamples {
			fmt.Println("OUTPUT", e)
		}
		for _, e := range r.DuplicateCopies {
			fmt.Println("DUPLICATE", e)
		}
		for _, e := range r.BalanceExamples {
			fmt.Println("BALANCE", e)
		}
		for _, e := range r.Traces {
			fmt.Println("TRACE", e)
		}
		switch {
		case r.TxnAudit != nil:
			fmt.Println("transaction audit (snapshots and outputs):", r.TxnAudit)
			for _, e := range r.TxnAudit.Examples {
				fmt.Println("TXN-AUDIT", e)
			}
		case r.AuditError != "":
			fmt.Println("transaction audit failed:", r.AuditError)
		}
		guarantee := "at-least-once"
		if r.ExactlyOnce {
			guarantee = "exactly-once"
		}
		fmt.Printf("outputs %d (%s, read_committed): duplicates %d in %d accounts, missing %d in %d accounts, out of order %d, wrong balances %d in %d accounts\n",
			r.Outputs, guarantee, r.OutputDuplicates, r.KeysWithDuplicates, r.MissingOutputs, r.KeysWithMissing, r.OutputsOutOfOrder,
			r.WrongBalances, r.KeysWithWrongBalances)
		for _, s := range r.Skipped {
			fmt.Printf("SKIPPED %s key %q: %s\n", s.inputRef, s.Key, s.Why)
		}
		if r.DeadLetterTopic != "" {
			fmt.Printf("dead letters %d in %s (read_committed): %d duplicates, %d skipped inputs missing, %d unexpected\n",
				r.DeadLettersTotal, r.DeadLetterTopic, r.DeadLetterDuplicates, r.DeadLettersMissing, r.DeadLettersUnexpected)
		}
	}
	if r.failed() {
		if r.Events == 0 {
			fmt.Printf("FAIL: the input %s holds no event: nothing was verified\n", *input)
		}
		if r.AcknowledgedMissing > 0 {
			fmt.Printf("FAIL: %d events the producer acknowledged are not in the input (the tail of some accounts' sequences)\n", r.AcknowledgedMissing)
		}
		if r.InputGaps > 0 {
			fmt.Printf("FAIL: the input's sequence numbers jump %d times: events were lost before any worker read them (the producer's or the broker's fault)\n", r.InputGaps)
		}
		fmt.Printf("FAIL: %d of %d accounts differ from the fold of their %d input events; outputs: %d duplicates, %d missing, %d out of order, %d wrong balances; dead letters: %d duplicates, %d missing, %d unexpected (%s mode)\n",
			r.Mismatches, r.Accounts, r.Events, r.OutputDuplicates, r.MissingOutputs, r.OutputsOutOfOrder, r.WrongBalances,
			r.DeadLetterDuplicates, r.DeadLettersMissing, r.DeadLettersUnexpected, r.Mode)
		return 1
	}
	what := "every snapshot equals the fold of its input"
	if r.ExactlyOnce {
		what += ", every output exactly once and in order"
	}
	if r.SkippedInputs > 0 {
		what += fmt.Sprintf("; %d input records no event, skipped", r.SkippedInputs)
		if r.DeadLetterTopic != "" {
			what += ", each in " + r.DeadLetterTopic
		}
	}
	fmt.Printf("PASS: %d accounts, %d events: %s\n", r.Accounts, r.Events, what)
	return 0
}

func verify(ctx context.Context, brokers []string, group, input, snaps, output, dlq string, timeout time.Duration, ack acknowledged) (*report, error) {
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

	// The verifier's own fold of the input. A record that is no ledger
	// event (the workers' Skip or DeadLetter policies leave it without
	// effect) is skipped and named; any other fold error is the verifier's.
	exp := map[string]*ledger.State{}
	wantOut := map[string]map[int64][]int64{}
	var events int
	if err := readAll(ctx, brokers, input, func(rec *kgo.Record) error {
		ref := inputRef{rec.Topic, rec.Partition, rec.Offset}
		if rec.Key == nil {
			r.Skipped = append(r.Skipped, skippedInput{inputRef: ref, Why: "record has no key"})
			return nil
		}
		s, err := ledger.Fold(nil, exp[string(rec.Key)], rec)
		if errors.Is(err, keyflow.ErrUndecodable) {
			r.Skipped = append(r.Skipped, skippedInput{inputRef: ref, Key: string(rec.Key), Why: err.Error()})
			return nil
		}
		if err != nil {
			return fmt.Errorf("input %s key %q: %w", ref, rec.Key, err)
		}
		exp[string(rec.Key)] = s
		if wantOut[string(rec.Key)] == nil {
			wantOut[string(rec.Key)] = map[int64][]int64{}
		}
		// What the flow emits for it (ledger.FlowWithOutput): the state's
		// last sequence number and balance.
		wantOut[string(rec.Key)][s.LastSeq] = append(wantOut[string(rec.Key)][s.LastSeq], s.Balance)
		events++
		return nil
	}); err != nil {
		return nil, err
	}
	r.Accounts, r.Events, r.SkippedInputs = len(exp), events, len(r.Skipped)
	r.AcknowledgedMissing = ack.missing(exp)
	for _, s := range exp {
		r.InputGaps += s.Gaps
	}
	if err := readDeadLetters(ctx, brokers, adm, input, dlq, r); err != nil {
		return nil, err
	}

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
		if err := checkOutputs(ctx, brokers, output, wantOut, r); err != nil {
			return nil, err
		}
	}
	topics := []string{snaps}
	if output != "" {
		topics = append(topics, output)
	}
	// Bounded: a transaction left open would hold its read_committed read.
	actx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	r.TxnAudit, err = auditTxns(actx, brokers, topics...)
	cancel()
	if err != nil {
		r.AuditError = err.Error()
	}
	for i := 0; i < len(mm) && i < 3; i++ {
		r.traceKeys = append(r.traceKeys, mm[i].Account)
	}
	if len(r.traceKeys) > 0 {
		// A failed trace does not hide the verdict: it is reported in its place.
		if r.Traces, err = traceKeys(ctx, brokers, input, snaps, output, r.traceKeys); err != nil {
			r.Traces = []string{"trace failed: " + err.Error()}
		}
	}
	return r, nil
}

// checkOutputs reads the output topic read_committed, with a client of its
// own, and counts per account the outputs seen more often than the flow
// emits them, those missing (an applied event whose output is absent),
// those out of order and those whose balance is wrong. want is the
// verifier's own model of the outputs: per account and sequence number,
// the balances the flow emits under it, one per event (the ledger flow's
// output carries the state's last sequence number and balance, so an input
// event repeated — a producer's retry that landed twice — is emitted again
// under the same number with the balance it then gives, and a sequence
// number the input skipped is never emitted). A balance not among its
// number's is wrong: a copy a replay emitted again repeats one of them.
func checkOutputs(ctx context.Context, brokers []string, output string, want map[string]map[int64][]int64, r *report) error {
	// seen: each output's copies, where they sit (reported for duplicates).
	seen := map[string]map[int64][]outputCopy{}
	last := map[string]int64{}
	outOfOrder := map[string]int{}
	if err := readAll(ctx, brokers, output, func(rec *kgo.Record) error {
		var o ledger.Output
		if err := json.Unmarshal(rec.Value, &o); err != nil {
			return fmt.Errorf("output %s[%d]@%d: %w", rec.Topic, rec.Partition, rec.Offset, err)
		}
		r.Outputs++
		if seen[o.Account] == nil {
			seen[o.Account] = map[int64][]outputCopy{}
		}
		seen[o.Account][o.Seq] = append(seen[o.Account][o.Seq], outputCopy{rec.Topic, rec.Partition, rec.Offset, rec.ProducerID, rec.ProducerEpoch, rec.Timestamp, o.Balance})
		if o.Seq < last[o.Account] {
			outOfOrder[o.Account]++
			r.OutputsOutOfOrder++
		}
		last[o.Account] = max(last[o.Account], o.Seq)
		return nil
	}); err != nil {
		return err
	}
	accounts := make([]string, 0, len(want))
	for acct := range want {
		accounts = append(accounts, acct)
	}
	for acct := range seen {
		if want[acct] == nil {
			accounts = append(accounts, acct) // outputs of an account with no event: all extra
		}
	}
	sort.Strings(accounts)
	for _, acct := range accounts {
		var dups, missing, wrong []int64
		seqs := make([]int64, 0, len(want[acct]))
		events := 0
		for seq, w := range want[acct] {
			seqs = append(seqs, seq)
			events += len(w)
		}
		for seq := range seen[acct] {
			if len(want[acct][seq]) == 0 {
				seqs = append(seqs, seq)
			}
		}
		sort.Slice(seqs, func(i, j int) bool { return seqs[i] < seqs[j] })
		for _, seq := range seqs {
			for _, c := range seen[acct][seq] {
				if len(want[acct][seq]) > 0 && !slices.Contains(want[acct][seq], c.balance) {
					if len(wrong) == 0 || wrong[len(wrong)-1] != seq {
						wrong = append(wrong, seq)
					}
					r.WrongBalances++
					if len(r.BalanceExamples) < 20 {
						r.BalanceExamples = append(r.BalanceExamples, fmt.Sprintf("%s seq %d: balance %d at %s, want one of %v",
							acct, seq, c.balance, c, want[acct][seq]))
					}
				}
			}
			switch n, w := len(seen[acct][seq]), len(want[acct][seq]); {
			case n < w:
				missing = append(missing, seq)
				r.MissingOutputs += w - n
			case n > w:
				if len(dups) == 0 && len(r.traceKeys) < 3 {
					r.traceKeys = append(r.traceKeys, acct)
				}
				dups = append(dups, seq)
				r.OutputDuplicates += n - w
				if len(r.DuplicateCopies) < 20 {
					copies := make([]string, 0, n)
					for _, c := range seen[acct][seq] {
						copies = append(copies, c.String())
					}
					r.DuplicateCopies = append(r.DuplicateCopies, fmt.Sprintf("%s seq %d: %s", acct, seq, strings.Join(copies, "; ")))
				}
			}
		}
		if len(dups) > 0 {
			r.KeysWithDuplicates++
		}
		if len(missing) > 0 {
			r.KeysWithMissing++
		}
		if len(wrong) > 0 {
			r.KeysWithWrongBalances++
			if len(r.traceKeys) < 3 && len(dups) == 0 {
				r.traceKeys = append(r.traceKeys, acct)
			}
		}
		if (len(dups) > 0 || len(missing) > 0 || outOfOrder[acct] > 0 || len(wrong) > 0) && len(r.OutputExamples) < 20 {
			r.OutputExamples = append(r.OutputExamples, fmt.Sprintf("%s: %d outputs for %d events; duplicated seqs %s; missing seqs %s; %d out of order; wrong balances at seqs %s",
				acct, sum(seen[acct]), events, firstSeqs(dups), firstSeqs(missing), outOfOrder[acct], firstSeqs(wrong)))
		}
	}
	return nil
}

func sum(m map[int64][]outputCopy) int {
	n := 0
	for _, v := range m {
		n += len(v)
	}
	return n
}

// outputCopy is where one output record sits: its producer ID and epoch
// name the transaction that wrote it.
type outputCopy struct {
	topic     string
	partition int32
	offset    int64
	producer  int64
	epoch     int16
	ts        time.Time
	balance   int64
}

func (c outputCopy) String() string {
	return fmt.Sprintf("%s[%d]@%d (producer %d epoch %d, %s)", c.topic, c.partition, c.offset, c.producer, c.epoch, c.ts.UTC().Format("15:04:05.000"))
}

// firstSeqs names up to 5 sequence numbers.
func firstSeqs(s []int64) string {
	if len(s) == 0 {
		return "none"
	}
	if len(s) > 5 {
		return fmt.Sprint(s[:5]) + fmt.Sprintf("... (%d)", len(s))
	}
	return fmt.Sprint(s)
}

// readDeadLetters reads the dead-letter topic (default <input>.dlq)
// read_committed, if it exists, and matches its records with r.Skipped.
func readDeadLetters(ctx context.Context, brokers []string, adm *kadm.Client, input, dlq string, r *report) error {
	if dlq == "" {
		dlq = keyflow.DefaultDeadLetterTopic(input)
	}
	td, err := adm.ListTopics(ctx, dlq)
	if err != nil {
		return fmt.Errorf("dead-letter topic %s: %w", dlq, err)
	}
	if !td.Has(dlq) {
		return nil
	}
	r.DeadLetterTopic = dlq
	if err := readAll(ctx, brokers, dlq, func(rec *kgo.Record) error {
		dl := deadLetter{Partition: rec.Partition, Offset: rec.Offset}
		for _, h := range rec.Headers {
			switch h.Key {
			case keyflow.HeaderErrorTopic:
				dl.Source.Topic = string(h.Value)
			case keyflow.HeaderErrorPartition:
				p, _ := strconv.ParseInt(string(h.Value), 10, 32)
				dl.Source.Partition = int32(p)
			case keyflow.HeaderErrorOffset:
				dl.Source.Offset, _ = strconv.ParseInt(string(h.Value), 10, 64)
			case keyflow.HeaderErrorException:
				dl.Exception = string(h.Value)
			}
		}
		r.DeadLetters = append(r.DeadLetters, dl)
		return nil
	}); err != nil {
		return fmt.Errorf("dead-letter topic %s: %w", dlq, err)
	}
	r.DeadLettersTotal = len(r.DeadLetters)
	r.matchDeadLetters()
	return nil
}

// readAll reads every partition of topic from the start to its end offset
// (high watermark) at the time of the call, read_committed. Control records
// are kept to track the position: on a transactional topic the last offset
// is usually a commit marker, which a consumer never sees as a record.
func readAll(ctx context.Context, brokers []string, topic string, fn func(*kgo.Record) error) error {
	var ferr error
	err := scanTopic(ctx, brokers, topic, kgo.ReadCommitted(), func(rec *kgo.Record) {
		if !rec.Attrs.IsControl() && ferr == nil { // a marker only moves the position
			ferr = fn(rec)
		}
	})
	if err != nil {
		return err
	}
	return ferr
}

// acknowledged is what the producer acknowledged (verify --produced): events
// produced round-robin over accounts from a fresh start (ledger.Generator);
// produced 0 checks nothing.
type acknowledged struct{ produced, accounts int }

// missing counts the acknowledged events the input lacks, given the
// verifier's fold of the input: account i's sequence numbers run to
// produced/accounts, one more for the first produced%accounts accounts.
func (a acknowledged) missing(exp map[string]*ledger.State) (n int64) {
	if a.produced <= 0 || a.accounts < 1 {
		return 0
	}
	for i := range a.accounts {
		want := int64(a.produced / a.accounts)
		if i < a.produced%a.accounts {
			want++
		}
		var got int64
		if s := exp[ledger.AccountKey(i)]; s != nil {
			got = s.LastSeq
		}
		if got < want {
			n += want - got
		}
	}
	return n
}
