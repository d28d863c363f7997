// Command kcluster answers scripts/kafka-cluster.sh's questions about a live
// cluster through kadm (the script builds it once into its state dir):
//
//	kcluster -brokers a:1,b:2,c:3 ready -n 3 [-node N] [-probe-topic T] [-timeout 2m]
//	kcluster -brokers ... leader-of TOPIC PARTITION     # node id leading it
//	kcluster -brokers ... leader-of -txn ID             # node id coordinating the transactional.id
//	kcluster -brokers ... leader-of -group G            # node id coordinating the group
//	kcluster -brokers ... leaders TOPIC                 # "node: partitions" lines
//	kcluster -brokers ... wait-isr [-timeout 2m] [TOPIC...]  # until no partition is under-replicated
//	kcluster -brokers ... describe                      # brokers, controller, under-replicated partitions
//
// Exit status 0 on success, 1 on a failed lookup or a timeout, 2 on bad usage.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/actorflow/actorflow/internal/kcluster"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
)

func main() { os.Exit(run(os.Args[1:])) }

func usage(format string, args ...any) int {
	fmt.Fprintf(os.Stderr, "kcluster: "+format+"\n", args...)
	fmt.Fprintln(os.Stderr, "usage: kcluster -brokers LIST {ready|leader-of|leaders|wait-isr|describe} ...")
	return 2
}

// fail prints err (the lookups' errors already name the package).
func fail(err error) int {
	fmt.Fprintln(os.Stderr, err)
	return 1
}

func run(args []string) int {
	fs := flag.NewFlagSet("kcluster", flag.ContinueOnError)
	brokers := fs.String("brokers", os.Getenv("ACTORFLOW_BROKERS"), "comma-separated seed brokers")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if *brokers == "" || fs.NArg() == 0 {
		return usage("need -brokers and a command")
	}
	// A comma-separated list must be split: kgo takes "a:1,b:2" as one host.
	cl, err := kgo.NewClient(kgo.SeedBrokers(strings.Split(*brokers, ",")...),
		kgo.DialTimeout(2*time.Second), kgo.RequestRetries(3))
	if err != nil {
		return fail(err)
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	cmd, rest := fs.Arg(0), fs.Args()[1:]
	switch cmd {
	case "ready":
		return ready(adm, rest)
	case "leader-of":
		return leaderOf(adm, rest)
	case "leaders":
		return leaders(adm, rest)
	case "wait-isr":
		return waitISR(adm, rest)
	case "describe":
		return describe(adm)
	}
	return usage("unknown command %q", cmd)
}

// ready waits until the metadata lists n brokers (and node, if given), then,
// with -probe-topic, until a topic replicated on all n can be created: the
// controller quorum works and every broker has caught up with it.
func ready(adm *kadm.Client, args []string) int {
	fs := flag.NewFlagSet("ready", flag.ContinueOnError)
	n := fs.Int("n", 3, "brokers the metadata must list")
	node := fs.Int("node", -1, "a node id the metadata must list")
	probe := fs.String("probe-topic", "", "create this topic (1 partition, replication factor n) once the brokers are listed")
	timeout := fs.Duration("timeout", 2*time.Minute, "give up after")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	ctx, cancel := context.WithTimeout(context.Background(), *timeout)
	defer cancel()
	err := kcluster.Poll(ctx, 200*time.Millisecond, func(ctx context.Context) (bool, error) {
		ids, err := kcluster.Brokers(ctx, adm)
		if err != nil {
			return false, err
		}
		if len(ids) < *n || (*node >= 0 && !slices.Contains(ids, int32(*node))) {
			return false, fmt.Errorf("brokers listed: %v", ids)
		}
		return true, nil
	})
	if err != nil {
		return fail(fmt.Errorf("brokers not listed: %w", err))
	}
	if *probe != "" {
		err = kcluster.Poll(ctx, 200*time.Millisecond, func(ctx context.Context) (bool, error) {
			_, err := adm.CreateTopic(ctx, 1, int16(*n), nil, *probe)
			if err == nil || errors.Is(err, kerr.TopicAlreadyExists) {
				return true, nil
			}
			return false, err
		})
		if err != nil {
			return fail(fmt.Errorf("probe topic %s: %w", *probe, err))
		}
	}
	return 0
}

func leaderOf(adm *kadm.Client, args []string) int {
	fs := flag.NewFlagSet("leader-of", flag.ContinueOnError)
	txn := fs.String("txn", "", "a transactional.id: print its transaction coordinator")
	group := fs.String("group", "", "a consumer group: print its group coordinator")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	var lookup func(context.Context) (int32, error)
	switch {
	case *txn != "":
		lookup = func(ctx context.Context) (int32, error) { return kcluster.TxnCoordinator(ctx, adm, *txn) }
	case *group != "":
		lookup = func(ctx context.Context) (int32, error) { return kcluster.GroupCoordinator(ctx, adm, *group) }
	case fs.NArg() == 2:
		p, perr := strconv.ParseInt(fs.Arg(1), 10, 32)
		if perr != nil {
			return usage("partition %q: %v", fs.Arg(1), perr)
		}
		lookup = func(ctx context.Context) (int32, error) {
			return kcluster.PartitionLeader(ctx, adm, fs.Arg(0), int32(p))
		}
	default:
		return usage("leader-of TOPIC PARTITION | -txn ID | -group G")
	}
	// Retriable answers (a coordinator loading, the internal topic being created on first use, no leader
	// elected yet) are waited out for a while.
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var id int32
	err := kcluster.Poll(ctx, 200*time.Millisecond, func(ctx context.Context) (bool, error) {
		var err error
		id, err = lookup(ctx)
		// (A missing topic is retriable in the protocol, but here it is a typo.)
		if err != nil && (errors.Is(err, kerr.UnknownTopicOrPartition) || !kerr.IsRetriable(err) && !errors.Is(err, kcluster.ErrNoLeader)) {
			return true, err
		}
		return err == nil, err
	})
	if err == nil && id < 0 {
		err = errors.New("kcluster: no node")
	}
	if err != nil {
		return fail(err)
	}
	fmt.Println(id)
	return 0
}

func leaders(adm *kadm.Client, args []string) int {
	if len(args) != 1 {
		return usage("leaders TOPIC")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	m, err := kcluster.Leaders(ctx, adm, args[0])
	if err != nil {
		return fail(err)
	}
	ids := make([]int32, 0, len(m))
	for id := range m {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	for _, id := range ids {
		fmt.Printf("%d: %v\n", id, m[id])
	}
	return 0
}

func waitISR(adm *kadm.Client, args []string) int {
	fs := flag.NewFlagSet("wait-isr", flag.ContinueOnError)
	timeout := fs.Duration("timeout", 2*time.Minute, "give up after")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	ctx, cancel := context.WithTimeout(context.Background(), *timeout)
	defer cancel()
	var last []string
	err := kcluster.Poll(ctx, 250*time.Millisecond, func(ctx context.Context) (bool, error) {
		u, err := kcluster.UnderReplicated(ctx, adm, fs.Args()...)
		last = u
		return err == nil && len(u) == 0, err
	})
	if err != nil {
		for _, u := range last {
			fmt.Fprintln(os.Stderr, "  under-replicated:", u)
		}
		return fail(fmt.Errorf("replicas not in sync: %w", err))
	}
	return 0
}

func describe(adm *kadm.Client) int {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	md, err := adm.BrokerMetadata(ctx)
	if err != nil {
		return fail(err)
	}
	for _, b := range md.Brokers {
		fmt.Printf("broker %d %s:%d\n", b.NodeID, b.Host, b.Port)
	}
	fmt.Printf("controller (as the brokers report it) %d\n", md.Controller)
	u, err := kcluster.UnderReplicated(ctx, adm)
	if err != nil {
		return fail(err)
	}
	fmt.Printf("under-replicated partitions: %d\n", len(u))
	for _, s := range u {
		fmt.Println("  " + s)
	}
	return 0
}
