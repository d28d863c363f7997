package snapshotstore

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"go.uber.org/zap"
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
	// Logger hears, at warn, of an input topic that exists with another
	// partition count than Partitions (Create creates only missing topics:
	// the existing count stands). Default nil: not said.
	Logger *zap.Logger
}

// CleanupPolicyError is EnsureTopics' error for a snapshot topic whose
// cleanup.policy does not contain compact, or contains delete with a
// retention (or could not be read, Err). It matches ErrTopicSetup. With
// delete, retention removes the snapshots of keys idle longer than
// retention.ms and their state is silently lost on the next recovery — also
// under compact,delete, and the lost-state check cannot see it there: the
// latest offset marker is in the newest segment, which retention keeps. The
// check runs last: on this error every other check passed, so a caller may
// downgrade it to a warning.
type CleanupPolicyError struct {
	Topic  string
	Policy string // the topic's cleanup.policy; empty when Err is set
	// Retention names the retention that deletes under a policy with both
	// compact and delete ("retention.ms=604800000"); empty otherwise.
	Retention string
	Err       error // why the policy could not be read (DescribeConfigs failed)
}

func (e *CleanupPolicyError) Error() string {
	if e.Err != nil {
		return fmt.Sprintf("%v: snapshot topic %q: cannot check its cleanup.policy (it must contain compact): %v", ErrTopicSetup, e.Topic, e.Err)
	}
	if e.Retention != "" {
		return fmt.Sprintf("%v: snapshot topic %q has cleanup.policy=%s with %s: retention deletes the snapshots of idle keys and their state is silently lost; use cleanup.policy=compact (or retention.ms=-1 and retention.bytes=-1)",
			ErrTopicSetup, e.Topic, e.Policy, e.Retention)
	}
	return fmt.Sprintf("%v: snapshot topic %q has cleanup.policy=%s; it must contain compact: otherwise retention deletes the snapshots of idle keys and their state is silently lost",
		ErrTopicSetup, e.Topic, e.Policy)
}

// Is makes errors.Is(err, ErrTopicSetup) true.
func (e *CleanupPolicyError) Is(target error) bool { return target == ErrTopicSetup }

// Unwrap exposes the describe error.
func (e *CleanupPolicyError) Unwrap() error { return e.Err }

// cleanupPolicyHas reports whether a cleanup.policy value (a list:
// "compact", "compact,delete", ...) includes want.
func cleanupPolicyHas(policy, want string) bool {
	for p := range strings.SplitSeq(policy, ",") {
		if strings.TrimSpace(p) == want {
			return true
		}
	}
	return false
}

// retentionDeleting names the retention that deletes old segments under a
// policy with delete ("retention.ms=604800000"), "" when neither deletes
// (both -1). Absent values are Kafka's defaults (7 days; no size bound).
func retentionDeleting(ms, bytes *string) string {
	if ms == nil {
		return "retention.ms=604800000 (the default)"
	}
	if *ms != "-1" {
		return "retention.ms=" + *ms
	}
	if bytes != nil && *bytes != "-1" {
		return "retention.bytes=" + *bytes
	}
	return ""
}

// missingTopicGrace is how long EnsureTopics and EnsureOutputTopic keep
// looking for a topic they may not create before they report it missing.
const missingTopicGrace = 2 * time.Second

// graceEnd is when a grace of d from now ends: before ctx's deadline, so
// that a start timeout within it reports what is missing, not the
// deadline (found by a user's trial with WithStartTimeout(2*time.Second)).
func graceEnd(ctx context.Context, d time.Duration) time.Time {
	end := time.Now().Add(d)
	if dl, ok := ctx.Deadline(); ok && dl.Add(-500*time.Millisecond).Before(end) {
		end = dl.Add(-500 * time.Millisecond)
	}
	return end
}

// listTopics lists topics. A topic created by someone else a moment ago
// can be missing from the broker's metadata for a while (the controller has
// committed it; the broker's cache applies it a little later): unless the
// caller will create what is missing, a missing topic is looked up again
// for missingTopicGrace before it counts as missing (a worker started right
// after its topics were created failed with "does not exist").
func listTopics(ctx context.Context, cl *kgo.Client, create bool, topics ...string) (kadm.TopicDetails, error) {
	adm := kadm.NewClient(cl)
	graceEnd := graceEnd(ctx, missingTopicGrace)
	for {
		details, err := adm.ListTopics(ctx, topics...)
		if err != nil {
			return nil, fmt.Errorf("%w: list topics %q: %w", ErrTopicSetup, topics, err)
		}
		listed := true
		for _, t := range topics {
			if d, ok := details[t]; !ok || d.Err != nil || len(d.Partitions) == 0 {
				listed = false
			}
		}
		if create || listed || !time.Now().Before(graceEnd) {
			return details, nil
		}
		select {
		case <-ctx.Done():
			if errors.Is(ctx.Err(), context.DeadlineExceeded) {
				return details, nil // the grace cut short by the deadline: what is missing is the news
			}
			return nil, fmt.Errorf("%w: list topics %q: %w", ErrTopicSetup, topics, ctx.Err())
		case <-time.After(100 * time.Millisecond):
		}
		refreshTopics(ctx, cl, topics...)
	}
}

// refreshTopics asks the cluster for topics' metadata with a request of
// its own, which kgo stores in the metadata cache that kadm's ListTopics
// reads: without it, a look again within MetadataMinAge (5 s by default)
// got kgo's cached "missing" answer back, and the grace saw nothing new.
// (PurgeTopicsFromClient would too, but also drops what a producer has
// buffered for the topic — cl may be the application's — and takes a
// consumed topic out of a consumer's subscription for good.) An error is
// left to the ListTopics that follows.
func refreshTopics(ctx context.Context, cl *kgo.Client, topics ...string) {
	_, _ = freshMetadata(ctx, cl, topics...)
}

// freshMetadata asks a broker for topics' metadata, not kgo's cache (which
// kadm reads, up to MetadataMinAge old), without creating any.
func freshMetadata(ctx context.Context, cl *kgo.Client, topics ...string) (*kmsg.MetadataResponse, error) {
	req := kmsg.NewPtrMetadataRequest()
	for _, t := range topics {
		rt := kmsg.NewMetadataRequestTopic()
		rt.Topic = kmsg.StringPtr(t)
		req.Topics = append(req.Topics, rt)
	}
	req.AllowAutoTopicCreation = false
	return req.RequestWith(ctx, cl)
}

// EnsureTopics checks (and creates, if spec.Create) the input topic and the
// compacted snapshot topic. The snapshot topic needs at least as many
// partitions as the input topic (snapshot partition N serves input partition
// N) and a cleanup.policy containing compact, and no delete with a retention:
// that check runs last and fails with a *CleanupPolicyError.
func EnsureTopics(ctx context.Context, cl *kgo.Client, input, snapshot string, spec TopicSpec) error {
	adm := kadm.NewClient(cl)
	var details kadm.TopicDetails
	count := func(t string) int32 {
		d, ok := details[t]
		if !ok || errors.Is(d.Err, kerr.UnknownTopicOrPartition) {
			return 0
		}
		return int32(len(d.Partitions))
	}
	details, err := listTopics(ctx, cl, spec.Create, input, snapshot)
	if err != nil {
		return err
	}
	// create reports whether it created t; false when someone else did
	// first (TOPIC_ALREADY_EXISTS: with their own configuration).
	create := func(t string, parts int32, cfg map[string]*string) (bool, error) {
		if !spec.Create {
			return false, fmt.Errorf("%w: topic %q does not exist (create it, or let the worker create it: actorflow.WithCreateTopics)", ErrTopicSetup, t)
		}
		resp, err := adm.CreateTopic(ctx, parts, spec.ReplicationFactor, cfg, t)
		if err == nil {
			err = resp.Err
		}
		if err != nil && !errors.Is(err, kerr.TopicAlreadyExists) {
			return false, fmt.Errorf("%w: create topic %q: %w", ErrTopicSetup, t, err)
		}
		// kgo caches the metadata answer that the topic was missing for
		// MetadataMinAge (5 s): without a fresh answer every later look at
		// the topic through this client (the worker's partition count for
		// its output and dead-letter topics) saw it missing for 5 s.
		refreshTopics(ctx, cl, t)
		return err == nil, nil
	}
	in := count(input)
	if in > 0 && spec.Create && spec.Partitions > 0 && in != spec.Partitions && spec.Logger != nil {
		// Said, not refused: a newcomer's trial read the silence as its
		// count taken (helper-112).
		spec.Logger.Warn("input topic exists with another partition count than WithCreateTopics asks; it is not changed",
			zap.String("topic", input), zap.Int32("partitions", in), zap.Int32("asked", spec.Partitions))
	}
	if in == 0 {
		parts := spec.Partitions
		if parts <= 0 {
			parts = 1
		}
		made, err := create(input, parts, nil)
		if err != nil {
			return err
		}
		in = parts
		if !made {
			// Another client created it first, with its own partitions:
			// the snapshot topic is sized (and checked) against those.
			if details, err = listTopics(ctx, cl, false, input); err != nil {
				return err
			}
			if in = count(input); in == 0 {
				return fmt.Errorf("%w: input topic %q was created by another client and is not listed yet", ErrTopicSetup, input)
			}
		}
	}
	snap := count(snapshot)
	created := false
	if snap == 0 {
		compact := "compact"
		if created, err = create(snapshot, in, map[string]*string{"cleanup.policy": &compact}); err != nil {
			return err
		}
		snap = in
		if !created {
			// Another client created it first, with its own partitions and
			// configuration: read them (listTopics waits for a topic the
			// answering broker does not list yet).
			if details, err = listTopics(ctx, cl, false, snapshot); err != nil {
				return err
			}
			snap = count(snapshot)
		}
	}
	if snap < in {
		return fmt.Errorf("%w: snapshot topic %q has %d partitions, fewer than the %d of input topic %q (snapshot partition N serves input partition N)",
			ErrTopicSetup, snapshot, snap, in, input)
	}
	if created {
		return nil // compacted by the create above; one another client won the race to create is checked
	}
	return checkCleanupPolicy(ctx, adm, snapshot)
}

func checkCleanupPolicy(ctx context.Context, adm *kadm.Client, topic string) error {
	var configs []kadm.Config
	var err error
	for graceEnd := graceEnd(ctx, missingTopicGrace); ; {
		configs, err = topicConfigs(ctx, adm, topic)
		// A topic just created (by another client) can be missing from the
		// answering broker's metadata for a moment; kgo does not retry a
		// resource's error.
		if !errors.Is(err, kerr.UnknownTopicOrPartition) || time.Now().After(graceEnd) {
			break
		}
		select {
		case <-ctx.Done():
			return &CleanupPolicyError{Topic: topic, Err: ctx.Err()}
		case <-time.After(100 * time.Millisecond):
		}
	}
	if err != nil {
		return &CleanupPolicyError{Topic: topic, Err: err}
	}
	policy := "delete" // Kafka's default, should the broker omit it
	var ms, bytes *string
	for _, c := range configs {
		switch c.Key {
		case "cleanup.policy":
			if c.Value != nil {
				policy = *c.Value
			}
		case "retention.ms":
			ms = c.Value
		case "retention.bytes":
			bytes = c.Value
		}
	}
	if !cleanupPolicyHas(policy, "compact") {
		return &CleanupPolicyError{Topic: topic, Policy: policy}
	}
	if cleanupPolicyHas(policy, "delete") {
		if r := retentionDeleting(ms, bytes); r != "" {
			return &CleanupPolicyError{Topic: topic, Policy: policy, Retention: r}
		}
	}
	return nil
}

// topicConfigs is topic's configuration as the cluster describes it: the
// resource's own error, or a response of another count of resources, is
// the error.
func topicConfigs(ctx context.Context, adm *kadm.Client, topic string) ([]kadm.Config, error) {
	rcs, err := adm.DescribeTopicConfigs(ctx, topic)
	switch {
	case err != nil:
		return nil, err
	case len(rcs) != 1:
		return nil, fmt.Errorf("describe configs: %d resources in the response", len(rcs))
	case rcs[0].Err != nil:
		return nil, rcs[0].Err
	}
	return rcs[0].Configs, nil
}

// EnsureOutputTopic checks (and creates, if spec.Create, with partitions
// partitions and the broker's default cleanup policy) a flow's default
// output topic on the cluster of cl: a missing output topic is an
// ErrTopicSetup at start, not a failed transaction (or a stuck output) at
// the first Emit.
func EnsureOutputTopic(ctx context.Context, cl *kgo.Client, topic string, partitions int32, spec TopicSpec) error {
	adm := kadm.NewClient(cl)
	details, err := listTopics(ctx, cl, spec.Create, topic)
	if err != nil {
		return err
	}
	if d, ok := details[topic]; ok && d.Err == nil && len(d.Partitions) > 0 {
		return nil
	}
	if !spec.Create {
		return fmt.Errorf("%w: output topic %q does not exist (create it, or let the worker create it: actorflow.WithCreateTopics)", ErrTopicSetup, topic)
	}
	resp, err := adm.CreateTopic(ctx, max(partitions, 1), spec.ReplicationFactor, nil, topic)
	if err == nil {
		err = resp.Err
	}
	if err != nil && !errors.Is(err, kerr.TopicAlreadyExists) {
		return fmt.Errorf("%w: create output topic %q: %w", ErrTopicSetup, topic, err)
	}
	refreshTopics(ctx, cl, topic) // the cached "missing" answer (EnsureTopics); cl may be the application's producer
	return nil
}

// TopicPartitions returns the partition count of topic on the cluster of
// cl: 0 when it does not exist or is not listed yet (a retriable error);
// any other error of the topic's metadata (INVALID_TOPIC_EXCEPTION, an
// authorization failure) is the error, matching ErrTopicSetup and the kerr.
func TopicPartitions(ctx context.Context, cl *kgo.Client, topic string) (int32, error) {
	details, err := kadm.NewClient(cl).ListTopics(ctx, topic)
	if err != nil {
		return 0, fmt.Errorf("%w: list topic %q: %w", ErrTopicSetup, topic, err)
	}
	d, ok := details[topic]
	if ok && d.Err != nil && !errors.Is(d.Err, kerr.UnknownTopicOrPartition) && !kerr.IsRetriable(d.Err) {
		// Not "missing": the callers looked again until their budget
		// ran out and then said the topic was not in the metadata, the
		// broker's answer said nowhere (a lint sweep).
		return 0, fmt.Errorf("%w: list topic %q: %w", ErrTopicSetup, topic, d.Err)
	}
	if !ok || d.Err != nil {
		// Not listed (yet): a fresh answer in kgo's cache, so that the
		// next call does not repeat this one for MetadataMinAge. Not
		// PurgeTopicsFromClient: cl may be the group consumer's (Worker.Get
		// counts the input's partitions through it), whose purge drops the
		// topic from its subscription for good — a metadata blip during a
		// query stopped the worker consuming (found by a review).
		refreshTopics(ctx, cl, topic)
		return 0, nil //nolint:nilerr // unknown or retriable: not there yet, the callers look again
	}
	return int32(len(d.Partitions)), nil
}
