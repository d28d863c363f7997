package itest

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"os/signal"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/actorflow/actorflow/internal/kgotxn"
	"github.com/cenkalti/backoff/v4"
	"github.com/ory/dockertest/v3"
	dc "github.com/ory/dockertest/v3/docker"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
)

const (
	skipEnv = "ACTORFLOW_SKIP_ITEST"
	// containerLabel marks every container this suite starts:
	//   docker ps -a --filter label=org.actorflow.itest
	containerLabel = "org.actorflow.itest"
	// controllerPort is the KRaft controller listener inside the container; never published.
	controllerPort = 9093
)

var (
	// brokers is the seed list of the suite's broker (["127.0.0.1:P"]); empty when skipped.
	brokers []string
	// skipReason is set when ACTORFLOW_SKIP_ITEST=1: every test that asks for Brokers skips.
	skipReason string
	// brokerImage is the image the suite's broker runs (kafka_version_test.go: kafkaImage).
	brokerImage string
)

func TestMain(m *testing.M) {
	if id := os.Getenv(reaperEnv); id != "" {
		// This process is the reaper child of a test binary, not a test run (see reaper_unix_test.go).
		os.Exit(runReaper(id))
	}
	os.Exit(run(m))
}

func run(m *testing.M) int {
	if os.Getenv(skipEnv) == "1" {
		skipReason = skipEnv + "=1: integration tests against a real Kafka broker were NOT run"
		banner(os.Stderr, "SKIPPED: "+skipReason,
			"unset it and run scripts/itest.sh to run them")
		return m.Run()
	}

	b, err := startBroker()
	if err != nil {
		banner(os.Stderr, "FAILED to start the Kafka broker for the integration tests:",
			err.Error(),
			"",
			"Run the suite through scripts/itest.sh (it provisions the container engine and image),",
			"or set DOCKER_HOST / KAFKA_IMAGE yourself, or set "+skipEnv+"=1 to skip it on purpose.")
		return 2
	}
	defer b.stop()
	brokers = b.brokers
	if facts, err = readBrokerFacts(b.brokers); err != nil {
		fmt.Fprintf(os.Stderr, "itest: could not read the broker's version: %v\n", err)
	} else {
		fmt.Fprintf(os.Stderr, "itest: broker %s (image %s, KAFKA_VERSION=%q)\n", facts, b.image, os.Getenv("KAFKA_VERSION"))
	}

	code := m.Run()
	if code != 0 {
		b.dumpLogs(120)
	}
	return code
}

// banner prints a message that stands out in go test output.
func banner(w *os.File, lines ...string) {
	bar := strings.Repeat("!", 100)
	fmt.Fprintln(w, bar)
	for _, l := range lines {
		fmt.Fprintln(w, "!!! itest: "+l)
	}
	fmt.Fprintln(w, bar)
}

// ---------------------------------------------------------------------------------------------
// The broker container.

type broker struct {
	pool    *dockertest.Pool
	res     *dockertest.Resource
	reaper  *reaper
	image   string
	brokers []string
	once    sync.Once
}

func startBroker() (*broker, error) {
	pool, err := dockertest.NewPool("")
	if err != nil {
		return nil, fmt.Errorf("dockertest.NewPool (DOCKER_HOST=%q): %w", os.Getenv("DOCKER_HOST"), err)
	}
	if err := pool.Client.Ping(); err != nil {
		return nil, fmt.Errorf("no container engine answers at DOCKER_HOST=%q: %w", os.Getenv("DOCKER_HOST"), err)
	}

	image := kafkaImage()
	brokerImage = image
	repo, tag := splitImage(image)
	host, bindIP := brokerHost()
	var (
		res     *dockertest.Resource
		p       string
		started time.Time
	)
	// podman's runc start fails now and then ("API error (500): write child:
	// broken pipe", seen once in a CI rehearsal, then not again): the
	// container is created but never started. Remove it and try again, on
	// another port.
	for attempt := 1; ; attempt++ {
		port, err := freePort()
		if err != nil {
			return nil, err
		}
		// The container listens on the same port number as the host port it is published on, so the
		// advertised listener (host:port) is right both inside and outside the container.
		p = strconv.Itoa(port)
		name := fmt.Sprintf("actorflow-itest-%d-%s", os.Getpid(), p)
		started = time.Now()
		res, err = pool.RunWithOptions(&dockertest.RunOptions{
			Repository:   repo,
			Tag:          tag,
			Name:         name,
			Env:          brokerEnv(host, port),
			ExposedPorts: []string{p + "/tcp"},
			PortBindings: map[dc.Port][]dc.PortBinding{dc.Port(p + "/tcp"): {{HostIP: bindIP, HostPort: p}}},
			Labels:       map[string]string{containerLabel: "1", containerLabel + ".pid": strconv.Itoa(os.Getpid())},
		}, func(hc *dc.HostConfig) {
			hc.PublishAllPorts = false // only the port above, not the image's EXPOSEd 9092
			hc.RestartPolicy = dc.NeverRestart()
		})
		if err == nil {
			break
		}
		_ = pool.Client.RemoveContainer(dc.RemoveContainerOptions{ID: name, Force: true, RemoveVolumes: true})
		if attempt == 3 {
			return nil, fmt.Errorf("run %s (%d attempts): %w", image, attempt, err)
		}
		fmt.Fprintf(os.Stderr, "itest: run %s failed (attempt %d of 3): %v; trying again\n", image, attempt, err)
		time.Sleep(time.Duration(attempt) * time.Second)
	}
	b := &broker{pool: pool, res: res, image: image, brokers: []string{net.JoinHostPort(host, p)}}

	// Remove the container even if this process dies without running its defers.
	if b.reaper, err = startReaper(res.Container.ID); err != nil {
		fmt.Fprintf(os.Stderr, "itest: warning: no reaper process (%v); a killed test run may leave container %s behind\n",
			err, res.Container.Name)
	}
	sigc := make(chan os.Signal, 1)
	signal.Notify(sigc, os.Interrupt, syscall.SIGTERM)
	go func() {
		s := <-sigc
		fmt.Fprintf(os.Stderr, "itest: %v: removing the broker container\n", s)
		b.stop()
		os.Exit(1)
	}()

	pool.MaxWait = readyTimeout()
	// pool.Retry backs off exponentially (0.5s, 0.75s, ... 5s); poll the port every 200ms first so a
	// broker that is up in 4s is seen at once. (Behind Docker's userland proxy the port accepts
	// connections before Kafka listens; then pool.Retry does the waiting.)
	b.waitPort(started.Add(pool.MaxWait))
	err = pool.Retry(func() error { return b.probe() })
	if err != nil {
		b.dumpLogs(200)
		b.stop()
		return nil, fmt.Errorf("broker %s (%s) not ready within %v: %w", b.brokers[0], image, pool.MaxWait, err)
	}
	fmt.Fprintf(os.Stderr, "itest: Kafka broker %s from image %s ready in %.1fs (container %s)\n",
		b.brokers[0], image, time.Since(started).Seconds(), strings.TrimPrefix(res.Container.Name, "/"))
	return b, nil
}

func (b *broker) waitPort(deadline time.Time) {
	for time.Now().Before(deadline) {
		if conn, err := net.DialTimeout("tcp", b.brokers[0], time.Second); err == nil {
			conn.Close()
			return
		}
		if c, err := b.pool.Client.InspectContainer(b.res.Container.ID); err == nil && !c.State.Running {
			return // probe reports it
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// probe succeeds once the broker lists itself and can create a topic (the controller is up and
// the broker has caught up with the metadata log).
func (b *broker) probe() error {
	c, err := b.pool.Client.InspectContainer(b.res.Container.ID)
	if err != nil {
		return err
	}
	if !c.State.Running {
		return backoff.Permanent(fmt.Errorf("container exited (status %d)", c.State.ExitCode))
	}
	// A plain dial first: while the port is closed, fail at once instead of letting kgo retry
	// its dials until the context ends.
	conn, err := net.DialTimeout("tcp", b.brokers[0], 2*time.Second)
	if err != nil {
		return err
	}
	conn.Close()
	cl, err := kgo.NewClient(kgo.SeedBrokers(b.brokers...), kgo.DialTimeout(3*time.Second))
	if err != nil {
		return err
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	adm := kadm.NewClient(cl)
	bs, err := adm.ListBrokers(ctx)
	if err != nil {
		return err
	}
	if len(bs) == 0 {
		return errors.New("no brokers listed yet")
	}
	if _, err := adm.CreateTopic(ctx, 1, 1, nil, "itest-ready-probe"); err != nil && !errors.Is(err, kerr.TopicAlreadyExists) {
		return err
	}
	return nil
}

func (b *broker) stop() {
	b.once.Do(func() {
		var err error
		for i := 0; i < 3; i++ {
			if err = b.pool.Purge(b.res); err == nil {
				break
			}
			time.Sleep(time.Second)
		}
		if err != nil {
			fmt.Fprintf(os.Stderr, "itest: could not remove broker container %s: %v\n", b.res.Container.ID, err)
		}
		b.reaper.release()
	})
}

// dumpLogs prints the tail of the broker's log (WARN and above, plus startup lines).
func (b *broker) dumpLogs(lines int) {
	var out strings.Builder
	err := b.pool.Client.Logs(dc.LogsOptions{
		Container:    b.res.Container.ID,
		OutputStream: &out,
		ErrorStream:  &out,
		Stdout:       true,
		Stderr:       true,
		Tail:         strconv.Itoa(lines),
	})
	if err != nil {
		fmt.Fprintf(os.Stderr, "itest: could not read the broker's log: %v\n", err)
		return
	}
	fmt.Fprintf(os.Stderr, "---- last %d lines of the broker's log (%s) ----\n%s---- end of broker log ----\n",
		lines, b.image, out.String())
}

// brokerEnv is one configuration understood by both the upstream apache/kafka image and
// localhost/actorflow-kafka (scripts/kafka-image/entrypoint.sh): KAFKA_FOO_BAR -> foo.bar.
// ITEST_KAFKA_<NAME>=v in the test's environment overrides/adds KAFKA_<NAME>=v.
func brokerEnv(host string, port int) []string {
	ctrl := "localhost:" + strconv.Itoa(controllerPort)
	env := map[string]string{
		"CLUSTER_ID":                           clusterID(),
		"KAFKA_NODE_ID":                        "1",
		"KAFKA_PROCESS_ROLES":                  "broker,controller",
		"KAFKA_LISTENERS":                      fmt.Sprintf("PLAINTEXT://0.0.0.0:%d,CONTROLLER://%s", port, ctrl),
		"KAFKA_ADVERTISED_LISTENERS":           fmt.Sprintf("PLAINTEXT://%s", net.JoinHostPort(host, strconv.Itoa(port))),
		"KAFKA_LISTENER_SECURITY_PROTOCOL_MAP": "PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT",
		"KAFKA_INTER_BROKER_LISTENER_NAME":     "PLAINTEXT",
		"KAFKA_CONTROLLER_LISTENER_NAMES":      "CONTROLLER",
		"KAFKA_CONTROLLER_QUORUM_VOTERS":       "1@" + ctrl,
		// Writable by the upstream image's non-root user too.
		"KAFKA_LOG_DIRS":                                                    "/tmp/kraft-combined-logs",
		"KAFKA_OFFSETS_TOPIC_REPLICATION_FACTOR":                            "1",
		"KAFKA_TRANSACTION_STATE_LOG_REPLICATION_FACTOR":                    "1",
		"KAFKA_TRANSACTION_STATE_LOG_MIN_ISR":                               "1",
		"KAFKA_SHARE_COORDINATOR_STATE_TOPIC_REPLICATION_FACTOR":            "1",
		"KAFKA_SHARE_COORDINATOR_STATE_TOPIC_MIN_ISR":                       "1",
		"KAFKA_GROUP_INITIAL_REBALANCE_DELAY_MS":                            "0",
		"KAFKA_TRANSACTION_ABORT_TIMED_OUT_TRANSACTION_CLEANUP_INTERVAL_MS": "1000",
		"KAFKA_TRANSACTION_MAX_TIMEOUT_MS":                                  "900000",
		// The protocol matrix (protocol_test.go). KIP-848 groups served explicitly (4.1's
		// default is classic,consumer,streams; explicit so that other versions behave the same),
		// and per-group session timeouts / heartbeat intervals (consumer.session.timeout.ms,
		// consumer.heartbeat.interval.ms, set by the matrix) allowed below the default floors
		// of 45 s / 5 s. Groups that set nothing keep the defaults (45 s / 5 s).
		"KAFKA_GROUP_COORDINATOR_REBALANCE_PROTOCOLS":    "classic,consumer",
		"KAFKA_GROUP_CONSUMER_MIN_SESSION_TIMEOUT_MS":    "2000",
		"KAFKA_GROUP_CONSUMER_MIN_HEARTBEAT_INTERVAL_MS": "100",
		"KAFKA_HEAP_OPTS":           "-Xms256m -Xmx768m",
		"KAFKA_LOG4J_ROOT_LOGLEVEL": "WARN",
	}
	for _, kv := range os.Environ() {
		k, v, _ := strings.Cut(kv, "=")
		if rest, ok := strings.CutPrefix(k, "ITEST_KAFKA_"); ok && rest != "" {
			env["KAFKA_"+rest] = v
		}
	}
	out := make([]string, 0, len(env))
	for k, v := range env {
		out = append(out, k+"="+v)
	}
	sort.Strings(out)
	return out
}

// clusterID makes a KRaft cluster id: 16 random bytes, base64url without padding. A leading '-'
// is avoided because the storage tool's argument parser would take it for an option.
func clusterID() string {
	for {
		var raw [16]byte
		_, _ = rand.Read(raw[:])
		if id := base64.RawURLEncoding.EncodeToString(raw[:]); id[0] != '-' {
			return id
		}
	}
}

// splitImage splits "registry:5000/name:tag" into ("registry:5000/name", "tag"); no tag -> "latest".
func splitImage(image string) (repo, tag string) {
	slash := strings.LastIndex(image, "/")
	if colon := strings.LastIndex(image, ":"); colon > slash {
		return image[:colon], image[colon+1:]
	}
	return image, "latest"
}

// brokerHost is the address clients use for the broker, and the host IP the port is bound to.
// Local engines (unix socket, localhost): 127.0.0.1, bound on loopback only. A remote engine
// (DOCKER_HOST=tcp://h:port): h, bound on all addresses. ACTORFLOW_ITEST_BROKER_HOST overrides.
func brokerHost() (host, bindIP string) {
	if h := os.Getenv("ACTORFLOW_ITEST_BROKER_HOST"); h != "" {
		return h, ""
	}
	if u, err := url.Parse(os.Getenv("DOCKER_HOST")); err == nil && u.Scheme == "tcp" {
		if h := u.Hostname(); h != "" && h != "localhost" && h != "127.0.0.1" && h != "::1" {
			return h, ""
		}
	}
	return "127.0.0.1", "127.0.0.1"
}

// freePort asks the kernel for a free loopback port. Another process could take it before the
// container binds it; that shows up as a failed container start, not as a wrong broker.
func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

func readyTimeout() time.Duration {
	if s := os.Getenv("ACTORFLOW_ITEST_READY_TIMEOUT"); s != "" {
		if d, err := time.ParseDuration(s); err == nil {
			return d
		}
	}
	return 2 * time.Minute
}

// ---------------------------------------------------------------------------------------------
// Helpers for tests.

// Brokers returns the seed brokers of the suite's real Kafka broker. It skips the test when the
// suite is skipped (ACTORFLOW_SKIP_ITEST=1).
func Brokers(t testing.TB) []string {
	t.Helper()
	if skipReason != "" {
		t.Skip(skipReason)
	}
	if len(brokers) == 0 {
		t.Fatal("itest: no broker: TestMain did not start one")
	}
	return append([]string(nil), brokers...)
}

// newClient returns a kgo client seeded with the suite's broker, closed when the test ends.
func newClient(t testing.TB, opts ...kgo.Opt) *kgo.Client {
	t.Helper()
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(Brokers(t)...)}, opts...)...)
	if err != nil {
		t.Fatalf("kgo.NewClient: %v", err)
	}
	t.Cleanup(cl.Close)
	return cl
}

// newAdmin returns a kadm client on the suite's broker, closed when the test ends.
func newAdmin(t testing.TB) *kadm.Client {
	t.Helper()
	return kadm.NewClient(newClient(t))
}

// uniqueName is "itest-<test name>-<kind>-<random>", restricted to Kafka's legal name characters.
func uniqueName(t testing.TB, kind string) string {
	var b [4]byte
	_, _ = rand.Read(b[:])
	name := strings.Map(func(r rune) rune {
		if r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-' {
			return r
		}
		return '-'
	}, t.Name())
	if len(name) > 150 {
		name = name[:150]
	}
	return fmt.Sprintf("itest-%s-%s-%s", name, kind, hex.EncodeToString(b[:]))
}

// uniqueGroup returns a consumer group id no other test uses.
func uniqueGroup(t testing.TB) string {
	return uniqueName(t, "group")
}

// newTopic creates a topic with replication factor 1 (log compaction on if compacted), waits until
// every partition has a leader, and deletes it when the test ends.
func newTopic(t testing.TB, partitions int, compacted bool) string {
	t.Helper()
	var configs map[string]*string
	if compacted {
		configs = map[string]*string{"cleanup.policy": kadm.StringPtr("compact")}
	}
	return createTopic(t, "topic", partitions, configs)
}

// createTopic creates a uniquely named topic with configs, waits until every
// partition has a leader, and deletes it when the test ends.
func createTopic(t testing.TB, prefix string, partitions int, configs map[string]*string) string {
	t.Helper()
	adm := newAdmin(t)
	topic := uniqueName(t, prefix)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := adm.CreateTopic(ctx, int32(partitions), 1, configs, topic); err != nil {
		t.Fatalf("create topic %s: %v", topic, err)
	}
	for {
		td, err := adm.ListTopics(ctx, topic)
		if err == nil && td[topic].Err == nil && len(td[topic].Partitions) == partitions && allLed(td[topic]) {
			break
		}
		if ctx.Err() != nil {
			t.Fatalf("topic %s: partitions without a leader after 30s (last error: %v)", topic, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_, _ = adm.DeleteTopics(ctx, topic)
	})
	return topic
}

func allLed(td kadm.TopicDetail) bool {
	for _, p := range td.Partitions {
		if p.Err != nil || p.Leader < 0 {
			return false
		}
	}
	return true
}

// ---------------------------------------------------------------------------------------------
// The smoke test: the broker does what the design relies on.

func TestBrokerTransactionsSmoke(t *testing.T) {
	Brokers(t)
	topic := newTopic(t, 1, false)
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	start := time.Now()
	since := func() string { return fmt.Sprintf("[%5.2fs]", time.Since(start).Seconds()) }

	prod := newClient(t,
		kgo.TransactionalID(uniqueName(t, "txn")),
		kgo.DefaultProduceTopic(topic),
		kgo.TransactionTimeout(30*time.Second),
	)

	// 1. Three records in one committed transaction: offsets 0..2, commit marker at 3.
	if err := prod.BeginTransaction(); err != nil {
		t.Fatalf("begin: %v", err)
	}
	want := []string{"one", "two", "three"}
	var recs []*kgo.Record
	for _, v := range want {
		recs = append(recs, &kgo.Record{Key: []byte("k"), Value: []byte(v)})
	}
	if err := prod.ProduceSync(ctx, recs...).FirstErr(); err != nil {
		t.Fatalf("produce: %v", err)
	}
	if err := kgotxn.EndTransaction(ctx, prod, kgo.TryCommit, 10*time.Second, recs...); err != nil {
		t.Fatalf("commit: %v", err)
	}
	t.Logf("%s transaction 1 (3 records) committed", since())

	// 2. A read_committed consumer reads them back, in order.
	cons := newClient(t,
		kgo.ConsumeTopics(topic),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
	)
	got := pollN(ctx, t, cons, 3)
	for i, r := range got {
		if string(r.Value) != want[i] || r.Offset != int64(i) {
			t.Fatalf("record %d: got %q at offset %d, want %q at offset %d", i, r.Value, r.Offset, want[i], i)
		}
	}
	t.Logf("%s read_committed consumer read %d committed records at offsets 0..2", since(), len(got))

	// 3. With a transaction open, the high watermark (read_uncommitted end) moves past the open
	// record while the last stable offset (read_committed end) stays pinned at its first offset.
	adm := newAdmin(t)
	if err := prod.BeginTransaction(); err != nil {
		t.Fatalf("begin 2: %v", err)
	}
	if err := prod.ProduceSync(ctx, &kgo.Record{Key: []byte("k"), Value: []byte("open")}).FirstErr(); err != nil {
		t.Fatalf("produce 2: %v", err)
	}
	hwm, lso := endOffsets(ctx, t, adm, topic)
	t.Logf("%s transaction 2 open: high watermark=%d last stable offset=%d", since(), hwm, lso)
	if hwm != 5 || lso != 4 {
		t.Fatalf("open transaction: got HWM=%d LSO=%d, want HWM=5 (3 records + marker + open record) and LSO=4 (pinned)", hwm, lso)
	}
	// The open record stays invisible to read_committed.
	pctx, pcancel := context.WithTimeout(ctx, 2*time.Second)
	if fs := cons.PollFetches(pctx); fs.NumRecords() != 0 {
		t.Fatalf("read_committed consumer saw %d records of an open transaction", fs.NumRecords())
	}
	pcancel()

	// 4. Commit: the markers are written asynchronously after EndTxn, so wait for the LSO to
	// catch up with the high watermark (6: the second commit marker), then read the record.
	if err := prod.EndTransaction(ctx, kgo.TryCommit); err != nil {
		t.Fatalf("commit 2: %v", err)
	}
	for {
		hwm, lso = endOffsets(ctx, t, adm, topic)
		if hwm == 6 && lso == 6 {
			break
		}
		if ctx.Err() != nil {
			t.Fatalf("after commit: HWM=%d LSO=%d, want both 6", hwm, lso)
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Logf("%s transaction 2 committed: high watermark=%d last stable offset=%d", since(), hwm, lso)
	if r := pollN(ctx, t, cons, 1)[0]; string(r.Value) != "open" || r.Offset != 4 {
		t.Fatalf("after commit: got %q at offset %d, want \"open\" at offset 4", r.Value, r.Offset)
	}
	t.Logf("%s read_committed consumer read the record of transaction 2 at offset 4", since())
}

// endOffsets returns partition 0's high watermark (ListOffsets read_uncommitted) and last stable
// offset (ListOffsets read_committed).
func endOffsets(ctx context.Context, t *testing.T, adm *kadm.Client, topic string) (hwm, lso int64) {
	t.Helper()
	ends, err := adm.ListEndOffsets(ctx, topic)
	if err != nil {
		t.Fatalf("ListEndOffsets: %v", err)
	}
	committed, err := adm.ListCommittedOffsets(ctx, topic)
	if err != nil {
		t.Fatalf("ListCommittedOffsets: %v", err)
	}
	e, ok1 := ends.Lookup(topic, 0)
	c, ok2 := committed.Lookup(topic, 0)
	if !ok1 || !ok2 || e.Err != nil || c.Err != nil {
		t.Fatalf("list offsets of %s/0: %v %v", topic, e.Err, c.Err)
	}
	return e.Offset, c.Offset
}

// pollN polls until it has n records (or fails the test when ctx ends).
func pollN(ctx context.Context, t *testing.T, cl *kgo.Client, n int) []*kgo.Record {
	t.Helper()
	var out []*kgo.Record
	for len(out) < n {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("got %d of %d records before the deadline", len(out), n)
		}
		fs.EachError(func(topic string, p int32, err error) {
			t.Fatalf("fetch %s/%d: %v", topic, p, err)
		})
		out = append(out, fs.Records()...)
	}
	return out
}
