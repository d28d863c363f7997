// Package kcluster drives the 3-node Apache Kafka KRaft cluster of
// scripts/kafka-cluster.sh for tests (start, stop, kill and restart a node)
// and answers the questions a fault test asks a live cluster: which node
// leads a partition, coordinates a transactional.id or a group, and whether
// every replica is back in sync. The lookups are also the script's
// `leader-of`, `ready` and `wait-isr` commands (kcluster/cmd/kcluster).
package kcluster

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
)

// ErrNoLeader is matched by PartitionLeader's error when the partition has
// no leader right now (its leader died and none is elected yet).
var ErrNoLeader = errors.New("kcluster: no leader")

// PartitionLeader returns the node id leading topic[partition].
func PartitionLeader(ctx context.Context, adm *kadm.Client, topic string, partition int32) (int32, error) {
	md, err := adm.Metadata(ctx, topic)
	if err != nil {
		return -1, fmt.Errorf("kcluster: metadata of %s: %w", topic, err)
	}
	td, ok := md.Topics[topic]
	if !ok || td.Err != nil {
		return -1, fmt.Errorf("kcluster: topic %s: %w", topic, td.Err)
	}
	pd, ok := td.Partitions[partition]
	switch {
	case !ok:
		return -1, fmt.Errorf("kcluster: %s[%d]: no such partition (%d partitions)", topic, partition, len(td.Partitions))
	case pd.Err != nil:
		return -1, fmt.Errorf("kcluster: %s[%d]: %w", topic, partition, pd.Err)
	case pd.Leader < 0:
		return -1, fmt.Errorf("kcluster: %s[%d]: %w", topic, partition, ErrNoLeader)
	}
	return pd.Leader, nil
}

// Leaders returns, per node id, the partitions of topic it leads (sorted).
func Leaders(ctx context.Context, adm *kadm.Client, topic string) (map[int32][]int32, error) {
	md, err := adm.Metadata(ctx, topic)
	if err != nil {
		return nil, fmt.Errorf("kcluster: metadata of %s: %w", topic, err)
	}
	td, ok := md.Topics[topic]
	if !ok || td.Err != nil {
		return nil, fmt.Errorf("kcluster: topic %s: %w", topic, td.Err)
	}
	out := map[int32][]int32{}
	for _, pd := range td.Partitions.Sorted() {
		out[pd.Leader] = append(out[pd.Leader], pd.Partition)
	}
	return out, nil
}

// TxnCoordinator returns the node id coordinating transactional.id id (the
// leader of its __transaction_state partition; the id need not exist yet).
func TxnCoordinator(ctx context.Context, adm *kadm.Client, id string) (int32, error) {
	return coordinator(adm.FindTxnCoordinators(ctx, id), "transactional.id", id)
}

// GroupCoordinator returns the node id coordinating consumer group g.
func GroupCoordinator(ctx context.Context, adm *kadm.Client, g string) (int32, error) {
	return coordinator(adm.FindGroupCoordinators(ctx, g), "group", g)
}

func coordinator(rs kadm.FindCoordinatorResponses, kind, name string) (int32, error) {
	r, ok := rs[name]
	switch {
	case !ok:
		return -1, fmt.Errorf("kcluster: no coordinator answer for %s %q", kind, name)
	case r.Err != nil:
		return -1, fmt.Errorf("kcluster: coordinator of %s %q: %w", kind, name, r.Err)
	}
	return r.NodeID, nil
}

// Brokers returns the node ids the cluster's metadata lists (registered,
// unfenced brokers), sorted.
func Brokers(ctx context.Context, adm *kadm.Client) ([]int32, error) {
	bs, err := adm.ListBrokers(ctx)
	if err != nil {
		return nil, fmt.Errorf("kcluster: list brokers: %w", err)
	}
	ids := make([]int32, 0, len(bs))
	for _, b := range bs {
		ids = append(ids, b.NodeID)
	}
	sort.Slice(ids, func(i, j int) bool { return ids[i] < ids[j] })
	return ids, nil
}

// UnderReplicated lists the partitions of topics whose in-sync replica set
// is smaller than their replica set ("topic[p] isr=[..] replicas=[..]"),
// and those without a leader. Topics that do not exist are skipped (the
// internal topics appear only once used).
func UnderReplicated(ctx context.Context, adm *kadm.Client, topics ...string) ([]string, error) {
	md, err := adm.Metadata(ctx, topics...)
	if err != nil {
		return nil, fmt.Errorf("kcluster: metadata: %w", err)
	}
	var out []string
	for _, name := range md.Topics.Names() {
		td := md.Topics[name]
		if td.Err != nil {
			continue
		}
		for _, pd := range td.Partitions.Sorted() {
			if pd.Leader < 0 || len(pd.ISR) < len(pd.Replicas) {
				out = append(out, fmt.Sprintf("%s[%d] leader=%d isr=%v replicas=%v", name, pd.Partition, pd.Leader, pd.ISR, pd.Replicas))
			}
		}
	}
	return out, nil
}

// Poll calls cond every interval (each call bounded by max(interval, 5 s))
// until it returns done — then Poll returns cond's error, nil for success —
// or ctx ends: then ctx's error wrapping the last error cond returned. For
// states of a cluster, which pushes no event.
func Poll(ctx context.Context, interval time.Duration, cond func(context.Context) (bool, error)) error {
	var last error
	for {
		cctx, cancel := context.WithTimeout(ctx, max(interval, 5*time.Second))
		done, err := cond(cctx)
		cancel()
		if done {
			return err
		}
		if err != nil {
			last = err
		}
		select {
		case <-ctx.Done():
			if last != nil {
				return fmt.Errorf("%w (last: %w)", ctx.Err(), last)
			}
			return ctx.Err()
		case <-time.After(interval):
		}
	}
}
