package actorflow

import (
	"context"
	"errors"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/actorflow/actorflow/coordinator"
	"github.com/twmb/franz-go/pkg/kgo"
)

// The key → input partition mapping of Get is the Java client's default for
// keyed records: toPositive(murmur2(key)) % partitions. The hashes are the
// Java client's (librdkafka's unit test lists them as java_murmur2_results);
// a prime partition count makes every bit of the hash matter.
func TestPartitionOfIsJavaMurmur2(t *testing.T) {
	vectors := []struct {
		key  string
		hash uint32
	}{
		{"kafka", 0xd067cf64},
		{"giberish123456789", 0x8f552b0c},
		{"1234", 0x9fc97b14},
		{"234", 0xe7c009ca},
		{"34", 0x873930da},
		{"4", 0x5a4b5ca1},
		{"PreAmbleWillBeRemoved,ThePrePartThatIs", 0x78424f1c},
		{"reAmbleWillBeRemoved,ThePrePartThatIs", 0x4a62b377},
		{"eAmbleWillBeRemoved,ThePrePartThatIs", 0xe0e4e09e},
		{"AmbleWillBeRemoved,ThePrePartThatIs", 0x62b8b43f},
		{"", 0x106e08d9},
	}
	for _, n := range []int{1, 3, 12, 1_000_003} {
		for _, v := range vectors {
			want := int32(int64(v.hash&0x7fffffff) % int64(n))
			if got := partitionOf(nil, "t", v.key, n); got != want {
				t.Errorf("partitionOf(%q, %d) = %d, want %d (murmur2 %#x)", v.key, n, got, want, v.hash)
			}
		}
	}
}

// kgo's default producer partitioner (UniformBytesPartitioner) and
// LeastBackupPartitioner partition only by backup: their Partition panics.
// Get asked it anyway and panicked in the caller's goroutine; keyed
// records are murmur2-hashed by the first, as by the nil default.
func TestPartitionOfWithABackupPartitioner(t *testing.T) {
	uniform := kgo.UniformBytesPartitioner(64<<10, true, true, nil)
	for _, key := range []string{"kafka", "1234", ""} {
		for _, n := range []int{1, 12} {
			if got, want := partitionOf(uniform, "t", key, n), partitionOf(nil, "t", key, n); got != want {
				t.Errorf("partitionOf(UniformBytes, %q, %d) = %d, want murmur2's %d", key, n, got, want)
			}
			if got := partitionOf(kgo.LeastBackupPartitioner(), "t", key, n); got < 0 || int(got) >= n {
				t.Errorf("partitionOf(LeastBackup, %q, %d) = %d", key, n, got)
			}
		}
	}
}

// A member's endpoint is read back from the client.id the option builds; a
// client.id without one (a member without WithQueryEndpoint, kgo's "kgo")
// advertises none, nor does one whose marker is followed by no host:port.
func TestEndpointOfClientID(t *testing.T) {
	for _, c := range []struct{ clientID, want string }{
		{withEndpoint("kgo", "w1:8080"), "w1:8080"},
		{withEndpoint("app;query=x", "[2001:db8::1]:9"), "[2001:db8::1]:9"},
		{"kgo", ""},
		{"", ""},
		{"app;query=", ""},
		{"app;query=not an endpoint", ""},
		{"app;query=0.0.0.0:80", ""},
	} {
		if got := endpointOf(c.clientID); got != c.want {
			t.Errorf("endpointOf(%q) = %q, want %q", c.clientID, got, c.want)
		}
	}
}

// A partition count gone stale while the brokers do not answer is kept:
// Get failed with ErrUnavailable for every key, owned ones too, once the
// cache expired during an outage, and waited on another caller's metadata
// request under the cache's lock (found by a review).
func TestAStalePartitionCountIsKeptWhileTheBrokersAreDown(t *testing.T) {
	cl, err := kgo.NewClient(kgo.SeedBrokers("127.0.0.1:1"))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
	defer cancel()
	c := &partitionCount{n: 8, at: time.Now().Add(-time.Hour)}
	c.bind(context.Background())
	if n, err := c.count(ctx, cl, "in"); n != 8 || err != nil {
		t.Fatalf("count = %d, %v; want the known 8", n, err)
	}
	c.wait() // the background read, failed: the count kept, read again soon
	if c.n != 8 || time.Since(c.at) >= partitionCountTTL || c.refreshing {
		t.Fatalf("after a failed read: count %d, read %s ago (refreshing %v); want 8 kept and a retry scheduled within the TTL",
			c.n, time.Since(c.at), c.refreshing)
	}
	var none partitionCount
	if n, err := none.count(ctx, cl, "in"); err == nil {
		t.Fatalf("count = %d with nothing known and no broker; want an error", n)
	}
}

// A stale count is answered at once and read again in the background: read
// in the Get, a broker that accepts connections and never answers took each
// Get's whole deadline (the answer then failed with it), and every later
// Get again (found by a review). The background read ends with Run (wait).
func TestAStalePartitionCountIsAnsweredAtOnceFromAHungBroker(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	var held []net.Conn
	var mu sync.Mutex
	go func() { // accepts and never answers
		for {
			conn, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			held = append(held, conn)
			mu.Unlock()
		}
	}()
	defer func() {
		mu.Lock()
		defer mu.Unlock()
		for _, conn := range held {
			conn.Close()
		}
	}()
	cl, err := kgo.NewClient(kgo.SeedBrokers(ln.Addr().String()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	base, stop := context.WithCancel(context.Background())
	c := &partitionCount{n: 8, at: time.Now().Add(-time.Hour)}
	c.bind(base)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	n, err := c.count(ctx, cl, "in")
	if n != 8 || err != nil || ctx.Err() != nil {
		t.Fatalf("count = %d, %v (its context: %v); want the known 8, before the context ended", n, err, ctx.Err())
	}
	stop()
	c.wait() // the background read ends with its base
}

// Get answers from a partition it runs only while this member can vouch
// that it still owns it: an isolated member's partitions run on until kgo
// learns its membership is lost, while the group may have given them to
// another member.
func TestOwnershipInDoubt(t *testing.T) {
	tp := coordinator.TopicPartition{Topic: "in", Partition: 3}
	down := time.Date(2026, 12, 6, 12, 0, 0, 0, time.UTC)
	for _, c := range []struct {
		name  string
		h     Health
		owned error
		want  string // "" : no doubt
	}{
		{"reachable, owned", Health{BrokersReachable: true}, nil, ""},
		{"brokers down", Health{UnreachableSince: down, LastBrokerError: "dial tcp: refused"}, nil, "the brokers have not answered since 2026-12-06T12:00:00Z (dial tcp: refused)"},
		{"membership refused", Health{BrokersReachable: true}, errors.New("evicted by the coordinator"), "cannot vouch that it still owns the partition: evicted by the coordinator"},
	} {
		err := ownershipInDoubt(tp, c.h, c.owned)
		switch {
		case c.want == "" && err != nil:
			t.Errorf("%s: %v, want no doubt", c.name, err)
		case c.want != "" && (!errors.Is(err, ErrUnavailable) || !strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), "in[3]")):
			t.Errorf("%s: %v, want ErrUnavailable naming in[3] and %q", c.name, err, c.want)
		case c.owned != nil && !errors.Is(err, c.owned):
			t.Errorf("%s: %v does not match its cause %v (errors.Is)", c.name, err, c.owned)
		}
	}
}
