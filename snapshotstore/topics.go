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

// EnsureOutputTopic checks (and creates, if spec.Create, with partitions
// partitions and the broker's default cleanup policy) a flow's default
// output topic on the cluster of cl: a missing output topic is an
// ErrTopicSetup at start, not a failed transaction (or a stuck output) at
// the first Emit.
func EnsureOutputTopic(ctx context.Context, cl *kgo.Client, topic string, partitions int32, spec TopicSpec) error {
	adm := kadm.NewClient(cl)
	details, err := adm.ListTopics(ctx, topic)
	if err != nil {
		return fmt.Errorf("%w: list output topic %q: %w", ErrTopicSetup, topic, err)
	}
	if d, ok := details[topic]; ok && d.Err == nil && len(d.Partitions) > 0 {
		return nil
	}
	if !spec.Create {
		return fmt.Errorf("%w: output topic %q does not exist (create it, or enable topic creation)", ErrTopicSetup, topic)
	}
	resp, err := adm.CreateTopic(ctx, max(partitions, 1), spec.ReplicationFactor, nil, topic)
	if err == nil {
		err = resp.Err
	}
	if err != nil && !errors.Is(err, kerr.TopicAlreadyExists) {
		return fmt.Errorf("%w: create output topic %q: %w", ErrTopicSetup, topic, err)
	}
	return nil
}

// TopicPartitions returns the partition count of topic on the cluster of
// cl (0 when it does not exist).
func TopicPartitions(ctx context.Context, cl *kgo.Client, topic string) (int32, error) {
	details, err := kadm.NewClient(cl).ListTopics(ctx, topic)
	if err != nil {
		return 0, fmt.Errorf("%w: list topic %q: %w", ErrTopicSetup, topic, err)
	}
	d, ok := details[topic]
	if !ok || d.Err != nil {
		return 0, nil
	}
	return int32(len(d.Partitions)), nil
}
