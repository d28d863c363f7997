package snapshotstore

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"go.uber.org/zap/zaptest"
)

// The store's producers take the caller's ProducerBatchMaxBytes (through
// KafkaConfig.ClientOpts), bounded by each topic's max.message.bytes: the
// store sets its own ProducerBatchMaxBytesFn after the caller's options,
// built from theirs, which a mistake there would silently replace with
// kgo's default.
func TestTheCallersBatchLimitBoundedByTheTopic(t *testing.T) {
	f := newTxnFixture(t, true)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	small, large := "4096", "10485760"
	if _, err := f.adm.CreateTopic(ctx, 1, 1, map[string]*string{"max.message.bytes": &small}, "out"); err != nil {
		t.Fatal(err)
	}
	if _, err := f.adm.CreateTopic(ctx, 1, 1, map[string]*string{"max.message.bytes": &large}, "wide"); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		producer          int32
		wantOut, wantWide int
	}{
		{2 << 20, 4096, 2 << 20}, // the caller's limit above the topic's: the topic's
		{3000, 3000, 3000},       // below: the caller's
	} {
		cfg := KafkaConfig{ClientOpts: []kgo.Opt{kgo.ProducerBatchMaxBytes(c.producer)}}
		_, p := f.openConfig(t, f.meta, cfg)
		if got := p.MaxRecordBytes("out"); got != c.wantOut {
			t.Errorf("producer limit %d: transactional MaxRecordBytes(out) = %d, want %d", c.producer, got, c.wantOut)
		}
		if got := p.MaxRecordBytes("wide"); got != c.wantWide {
			t.Errorf("producer limit %d: transactional MaxRecordBytes(wide) = %d, want %d", c.producer, got, c.wantWide)
		}
		cfg.Mode = Plain
		k, err := NewKafka(f.brokers, f.snaps, cfg)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(k.Close)
		pp, err := k.Open(ctx, PartitionInfo{Topic: f.input, Partition: 0, Group: f.group})
		if err != nil {
			t.Fatal(err)
		}
		want := min(int(c.producer), 1_048_588) // the snapshot topic's: kfake's default max.message.bytes
		if got := pp.(*plainPartition).MaxSnapshotBytes(); got != want {
			t.Errorf("producer limit %d: plain MaxSnapshotBytes = %d, want %d", c.producer, got, want)
		}
		if got := pp.(*plainPartition).TopicRules("out"); got.MaxMessageBytes != 4096 {
			t.Errorf("plain TopicRules(out) = %+v, want max.message.bytes 4096", got)
		}
	}
}

// A topic that does not exist is Missing — unless the caller's producers
// create topics (kgo.AllowAutoTopicCreation) or wait for them
// (UnknownTopicRetries(-1)), when its rules are only unknown. Once the
// topic is created, the first use after topicRulesRetry reads it again
// itself: a stale Missing answered meanwhile refused a record for good.
func TestAMissingTopicsRules(t *testing.T) {
	f := newTxnFixture(t, true)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for _, c := range []struct {
		name        string
		opts        []kgo.Opt
		wantMissing bool
	}{
		{"kgo's defaults", nil, true},
		{"producers creating topics", []kgo.Opt{kgo.AllowAutoTopicCreation()}, false},
		{"producers waiting for topics", []kgo.Opt{kgo.UnknownTopicRetries(-1)}, false},
		{"the plain mode: the store's producers", nil, true},
		{"the plain mode: the store's producers creating topics", []kgo.Opt{kgo.AllowAutoTopicCreation()}, false},
		{"an application's producer (ProducerRules)", nil, true},
		{"an application's producer creating topics (ProducerRules)", []kgo.Opt{kgo.AllowAutoTopicCreation()}, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			cfg := KafkaConfig{ClientOpts: c.opts, TransactionalIDPrefix: "rules"}
			if strings.HasPrefix(c.name, "the plain mode") {
				cfg.Mode = Plain
			}
			rules := func(topic string) TopicRules {
				k, err := NewKafka(f.brokers, f.snaps, cfg)
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(k.Close)
				return k.rules.get(topic)
			}
			if strings.Contains(c.name, "ProducerRules") {
				cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(f.brokers...)}, c.opts...)...)
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(cl.Close)
				rules = NewProducerRules(cl, zaptest.NewLogger(t)).Get
			}
			start := time.Now()
			got := rules("nope-" + strings.Map(topicChar, c.name))
			if got.Missing != c.wantMissing || got.MaxMessageBytes != 0 {
				t.Fatalf("rules of a topic that does not exist: %+v, want Missing %v", got, c.wantMissing)
			}
			// Found missing twice, missingTopicGrace apart: a topic
			// created a moment ago may lag in a broker's metadata.
			if took := time.Since(start); c.wantMissing && took < missingTopicGrace {
				t.Fatalf("found missing after %s, within the %s grace", took, missingTopicGrace)
			}
		})
	}
	k, err := NewKafka(f.brokers, f.snaps, KafkaConfig{TransactionalIDPrefix: "rules"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(k.Close)
	var stale func()
	k.rules.after = func(d time.Duration, f func()) {
		if d != topicRulesRetry {
			t.Errorf("a missing topic read again after %s, want %s", d, topicRulesRetry)
		}
		stale = f
	}
	k.rules.spawn = func(func()) {
		t.Error("a missing topic's rules read again in the background: stale ones answered meanwhile")
	}
	if !k.rules.get("later").Missing {
		t.Fatal("topic later, not created yet: not Missing")
	}
	if _, err := f.adm.CreateTopic(ctx, 1, 1, nil, "later"); err != nil {
		t.Fatal(err)
	}
	k.rules.after = func(time.Duration, func()) {}
	stale() // topicRulesRetry passed
	if got := k.rules.get("later"); got.Missing || got.MaxMessageBytes == 0 {
		t.Fatalf("topic later, created: its first use after the retry got %+v, want the rules read from its configs", got)
	}
}

// topicChar maps a test name's characters to a topic name's.
func topicChar(r rune) rune {
	if r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-' || r == '.' || r == '_' {
		return r
	}
	return '-'
}
