package snapshotstore

import (
	"context"
	"errors"
	"fmt"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
)

// ErrTopicSetup is matched by every EnsureTopics failure.
var ErrTopicSetup = errors.New("actorflow: topic setup")

// TopicSpec says how to create missing topics.
type TopicSpec struct {
	// Create creates missing topics (the snapshot topic compacted). Without
	// it a missing topic is an error.
	Create bool
	// Partitions of a created input topic; a created snapshot topic gets as
	// many partitions as the input topic.
	Partitions int32
	// ReplicationFactor of created topics; -1 takes the broker default.
	ReplicationFactor int16
}

// EnsureTopics checks (and creates, if spec.Create) the input topic and the
// compacted snapshot topic. The snapshot topic needs at least as many
// partitions as the input topic: snapshot partition N serves input
// partition N.
func EnsureTopics(ctx context.Context, cl *kgo.Client, input, snapshot string, spec TopicSpec) error {
	adm := kadm.NewClient(cl)
	details, err := adm.ListTopics(ctx, input, snapshot)
	if err != nil {
		return fmt.Errorf("%w: list topics: %w", ErrTopicSetup, err)
	}
	count := func(t string) int32 {
		d, ok := details[t]
		if !ok || errors.Is(d.Err, kerr.UnknownTopicOrPartition) {
			return 0
		}
		return int32(len(d.Partitions))
	}
	create := func(t string, parts int32, cfg map[string]*string) error {
		if !spec.Create {
			return fmt.Errorf("%w: topic %q does not exist (create it, or enable topic creation)", ErrTopicSetup, t)
		}
		resp, err := adm.CreateTopic(ctx, parts, spec.ReplicationFactor, cfg, t)
		if err != nil && !errors.Is(err, kerr.TopicAlreadyExists) {
			return fmt.Errorf("%w: create topic %q: %w", ErrTopicSetup, t, err)
		}
		if resp.Err != nil && !errors.Is(resp.Err, kerr.TopicAlreadyExists) {
			return fmt.Errorf("%w: create topic %q: %w", ErrTopicSetup, t, resp.Err)
		}
		return nil
	}
	in := count(input)
	if in == 0 {
		parts := spec.Partitions
		if parts <= 0 {
			parts = 1
		}
		if err := create(input, parts, nil); err != nil {
			return err
		}
		in = parts
	}
	snap := count(snapshot)
	if snap == 0 {
		compact := "compact"
		if err := create(snapshot, in, map[string]*string{"cleanup.policy": &compact}); err != nil {
			return err
		}
		snap = in
	}
	if snap < in {
		return fmt.Errorf("%w: snapshot topic %q has %d partitions, fewer than the %d of input topic %q (snapshot partition N serves input partition N)",
			ErrTopicSetup, snapshot, snap, in, input)
	}
	return nil
}
