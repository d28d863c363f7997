package snapshotstore

import (
	"errors"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
)

// The timestamp bounds as brokers read them: Kafka 4's defaults (after 1
// hour, before unbounded), 3.6–3.9's deprecated difference where a new
// bound keeps its default, none for a LogAppendTime topic.
func TestTimestampBoundsFromConfigs(t *testing.T) {
	const unbounded = "9223372036854775807"
	cfg := func(kv ...string) []kadm.Config {
		var cs []kadm.Config
		for i := 0; i < len(kv); i += 2 {
			cs = append(cs, kadm.Config{Key: kv[i], Value: &kv[i+1]})
		}
		return cs
	}
	for _, tc := range []struct {
		name          string
		configs       []kadm.Config
		before, after time.Duration
	}{
		{"Kafka 4 defaults", cfg("message.timestamp.type", "CreateTime", "message.timestamp.before.max.ms", unbounded, "message.timestamp.after.max.ms", "3600000"), 0, time.Hour},
		{"Kafka 3.5: difference alone", cfg("message.timestamp.difference.max.ms", "600000"), 10 * time.Minute, 10 * time.Minute},
		{"Kafka 3.6: difference where the new ones keep their default", cfg("message.timestamp.before.max.ms", unbounded, "message.timestamp.after.max.ms", "7200000", "message.timestamp.difference.max.ms", "600000"), 10 * time.Minute, 2 * time.Hour},
		{"nothing bounded", cfg("message.timestamp.before.max.ms", unbounded, "message.timestamp.after.max.ms", unbounded, "message.timestamp.difference.max.ms", unbounded), 0, 0},
		{"a bound of 0", cfg("message.timestamp.before.max.ms", "0"), time.Millisecond, 0},
		{"LogAppendTime", cfg("message.timestamp.type", "LogAppendTime", "message.timestamp.before.max.ms", "1000", "message.timestamp.after.max.ms", "1000"), 0, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r, err := rulesOf("t", tc.configs)
			if err != nil {
				t.Fatal(err)
			}
			if r.TimestampBefore != tc.before || r.TimestampAfter != tc.after {
				t.Fatalf("bounds before %s after %s, want %s and %s", r.TimestampBefore, r.TimestampAfter, tc.before, tc.after)
			}
		})
	}
	bad := "soon"
	if _, err := rulesOf("t", []kadm.Config{{Key: "message.timestamp.after.max.ms", Value: &bad}}); err == nil || !strings.Contains(err.Error(), "message.timestamp.after.max.ms") {
		t.Fatalf("an unreadable bound: %v, want an error naming it", err)
	}
}

func TestCheckTimestamp(t *testing.T) {
	now := time.Date(2026, 12, 6, 12, 0, 0, 0, time.UTC)
	hour := TopicRules{TimestampBefore: time.Hour, TimestampAfter: time.Hour}
	for _, tc := range []struct {
		name    string
		rules   TopicRules
		ts      time.Time
		refused string // "": accepted; else a word of the error
	}{
		{"zero: the producer's clock", hour, time.Time{}, ""},
		{"now", hour, now, ""},
		{"unbounded", TopicRules{}, now.Add(-100 * 24 * time.Hour), ""},
		{"well within the past bound", hour, now.Add(-58 * time.Minute), ""},
		{"within the margin of the past bound", hour, now.Add(-59*time.Minute - time.Second), "before.max.ms"},
		{"beyond the past bound", hour, now.Add(-2 * time.Hour), "before.max.ms"},
		{"well within the future bound", hour, now.Add(59*time.Minute + 54*time.Second), ""},
		{"within the margin of the future bound", hour, now.Add(59*time.Minute + 56*time.Second), "after.max.ms"},
		{"beyond the future bound", hour, now.Add(2 * time.Hour), "after.max.ms"},
		{"a small bound's margin is a quarter of it", TopicRules{TimestampAfter: 4 * time.Second}, now.Add(2 * time.Second), ""},
		{"beyond a small bound's margin", TopicRules{TimestampAfter: 4 * time.Second}, now.Add(3*time.Second + time.Millisecond), "after.max.ms"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.rules.CheckTimestamp(tc.ts, now)
			switch {
			case tc.refused == "" && err != nil:
				t.Fatalf("refused: %v", err)
			case tc.refused != "" && err == nil:
				t.Fatalf("accepted, want refused (%s)", tc.refused)
			case err != nil && (!errors.Is(err, kerr.InvalidTimestamp) || !strings.Contains(err.Error(), tc.refused) || !strings.Contains(err.Error(), strconv.Itoa(tc.ts.Year()))):
				t.Fatalf("error %q: want it to match kerr.InvalidTimestamp and name %s and the timestamp", err, tc.refused)
			}
		})
	}
}
