package itest

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Which Kafka the suite runs against: one switch, KAFKA_VERSION (scripts/itest.sh exports it and
// builds or picks the image of that version), with the newest supported version as the default.

// defaultKafkaVersion is the broker version used when neither KAFKA_VERSION nor KAFKA_IMAGE is
// set: the newest supported one, KAFKA_VERSION_NEWEST in ../scripts/kafka-versions.env
// (TestKafkaVersionDefaultsAgree fails when the two differ).
const defaultKafkaVersion = "4.4.0"

// versionRE matches a release version x.y.z (a tag like 4.4.0 or 4.1.2, not latest or a digest).
var versionRE = regexp.MustCompile(`^(\d+)\.(\d+)\.(\d+)$`)

// kafkaImage is the image the suite starts: KAFKA_IMAGE if set (scripts/itest.sh sets it to the
// image scripts/kafka-image.sh built or found), else the upstream apache/kafka image of
// KAFKA_VERSION (default defaultKafkaVersion), for machines with a registry.
func kafkaImage() string {
	if image := os.Getenv("KAFKA_IMAGE"); image != "" {
		return image
	}
	v := os.Getenv("KAFKA_VERSION")
	if v == "" {
		v = defaultKafkaVersion
	}
	return "apache/kafka:" + v
}

// expectedKafkaVersion is the version the started broker must report: KAFKA_VERSION if set, else
// the tag of image when it is a release version, else "" (a custom image: not checked).
func expectedKafkaVersion(image string) string {
	if v := os.Getenv("KAFKA_VERSION"); v != "" {
		return v
	}
	if _, tag := splitImage(image); versionRE.MatchString(tag) {
		return tag
	}
	return ""
}

// brokerFacts is what the broker says about itself (ApiVersions), read once at start-up.
type brokerFacts struct {
	// guess is kversion's guess from the API versions ("v4.4", "at least v4.4"): patch levels
	// cannot be told apart from the wire.
	guess string
	// features are the finalized feature levels (group.version: KIP-848 groups;
	// transaction.version: KIP-890 part 2).
	features map[string]int16
	// maxVersions of the requests this runtime's guarantees ride on.
	maxVersions map[string]int16
}

// versionedRequests are the requests whose versions say what the broker checks: OffsetCommit and
// TxnOffsetCommit (v6: KIP-1319, STALE_MEMBER_EPOCH on the transactional path), the KIP-848
// heartbeat, EndTxn (v5: KIP-890 part 2).
var versionedRequests = []kmsg.Request{
	kmsg.NewPtrOffsetCommitRequest(), kmsg.NewPtrTxnOffsetCommitRequest(),
	kmsg.NewPtrConsumerGroupHeartbeatRequest(), kmsg.NewPtrEndTxnRequest(),
}

// facts is the suite's broker, filled by TestMain (nil when the suite is skipped).
var facts *brokerFacts

func readBrokerFacts(seeds []string) (*brokerFacts, error) {
	cl, err := kgo.NewClient(kgo.SeedBrokers(seeds...))
	if err != nil {
		return nil, err
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	all, err := kadm.NewClient(cl).ApiVersions(ctx)
	if err != nil {
		return nil, fmt.Errorf("ApiVersions: %w", err)
	}
	for _, v := range all.Sorted() {
		if v.Err != nil {
			return nil, fmt.Errorf("ApiVersions of broker %d: %w", v.NodeID, v.Err)
		}
		f := &brokerFacts{guess: v.VersionGuess(), features: map[string]int16{}, maxVersions: map[string]int16{}}
		for _, ff := range v.Raw().FinalizedFeatures {
			f.features[ff.Name] = ff.MaxVersionLevel
		}
		for _, r := range versionedRequests {
			if max, ok := v.KeyMaxVersion(r.Key()); ok {
				f.maxVersions[kmsg.NameForKey(r.Key())] = max
			}
		}
		return f, nil
	}
	return nil, fmt.Errorf("ApiVersions: no broker answered (seeds %v)", seeds)
}

func (f *brokerFacts) String() string {
	kv := func(m map[string]int16, prefix string) []string {
		var out []string
		for k, v := range m {
			out = append(out, fmt.Sprintf("%s%s%d", k, prefix, v))
		}
		sort.Strings(out)
		return out
	}
	return fmt.Sprintf("%s; features %s; max %s", f.guess,
		strings.Join(kv(f.features, "="), " "), strings.Join(kv(f.maxVersions, " v"), ", "))
}

// matchesVersion reports whether a kversion guess ("v4.4", "at least v4.4") names the major.minor
// of version ("4.4.0").
func matchesVersion(guess, version string) bool {
	m := versionRE.FindStringSubmatch(version)
	if m == nil {
		return false
	}
	want := "v" + m[1] + "." + m[2]
	g := strings.TrimPrefix(guess, "at least ")
	return g == want
}

// BrokerVersion returns the version the suite's broker runs, for test output: KAFKA_VERSION (or
// the image's tag) when TestBrokerVersion's check holds, plus the wire-level guess.
func BrokerVersion(t testing.TB) string {
	t.Helper()
	Brokers(t)
	want := expectedKafkaVersion(brokerImage)
	if facts == nil {
		return want
	}
	if want == "" {
		return facts.guess
	}
	return want + " (" + facts.guess + ")"
}

// TestBrokerVersion: the broker the suite started is the version asked for. It catches a switch
// that does not reach the broker (an image of another version under the expected name, a default
// left behind in one place).
func TestBrokerVersion(t *testing.T) {
	Brokers(t)
	want := expectedKafkaVersion(brokerImage)
	if facts == nil {
		t.Fatal("itest: the broker's ApiVersions were not read at start-up")
	}
	t.Logf("image %s, KAFKA_VERSION=%q: broker %s", brokerImage, os.Getenv("KAFKA_VERSION"), facts)
	if want == "" {
		t.Skipf("image %s names no release version and KAFKA_VERSION is unset: nothing to check against", brokerImage)
	}
	if !matchesVersion(facts.guess, want) {
		t.Fatalf("broker from image %s answers ApiVersions like %q, want Kafka %s", brokerImage, facts.guess, want)
	}
}

// TestKafkaVersionDefaultsAgree: the newest supported version is written once for the scripts
// and the Makefile (scripts/kafka-versions.env); the Go default and the compose file's default
// image must say the same. Needs no broker.
func TestKafkaVersionDefaultsAgree(t *testing.T) {
	env := readEnvFile(t, filepath.Join("..", "scripts", "kafka-versions.env"))
	newest, oldest := env["KAFKA_VERSION_NEWEST"], env["KAFKA_VERSION_OLDEST"]
	if newest != defaultKafkaVersion {
		t.Errorf("scripts/kafka-versions.env: KAFKA_VERSION_NEWEST=%q, itest's defaultKafkaVersion=%q", newest, defaultKafkaVersion)
	}
	if !versionRE.MatchString(oldest) {
		t.Errorf("scripts/kafka-versions.env: KAFKA_VERSION_OLDEST=%q is not a release version", oldest)
	}
	// The demo cluster's single-broker file and its 3-broker override (kafka2, kafka3): every upstream image
	// they name is the newest version.
	for _, name := range []string{"docker-compose.yml", "docker-compose.brokers3.yml"} {
		compose, err := os.ReadFile(filepath.Join("..", "deploy", name))
		if err != nil {
			t.Fatal(err)
		}
		if want := "${KAFKA_IMAGE:-apache/kafka:" + defaultKafkaVersion + "}"; !strings.Contains(string(compose), want) {
			t.Errorf("deploy/%s: the brokers' default image is not %s", name, want)
		}
		for _, m := range upstreamImageRE.FindAllStringSubmatch(string(compose), -1) {
			if m[1] != defaultKafkaVersion {
				t.Errorf("deploy/%s names %s, want version %s", name, m[0], defaultKafkaVersion)
			}
		}
	}
}

// upstreamImageRE finds apache/kafka:<version> in a compose file.
var upstreamImageRE = regexp.MustCompile(`apache/kafka:([0-9A-Za-z.\-]+)`)

// TestKafkaImageSelection: the one switch picks the image and the expected version.
func TestKafkaImageSelection(t *testing.T) {
	for _, c := range []struct {
		image, version      string // environment
		wantImage, wantVers string
	}{
		{"", "", "apache/kafka:" + defaultKafkaVersion, defaultKafkaVersion},
		{"", "4.1.2", "apache/kafka:4.1.2", "4.1.2"},
		{"localhost/actorflow-kafka:4.1.2", "", "localhost/actorflow-kafka:4.1.2", "4.1.2"},
		{"localhost/actorflow-kafka:4.1.2", "4.4.0", "localhost/actorflow-kafka:4.1.2", "4.4.0"},
		{"registry:5000/kafka:custom", "", "registry:5000/kafka:custom", ""},
	} {
		t.Setenv("KAFKA_IMAGE", c.image)
		t.Setenv("KAFKA_VERSION", c.version)
		image := kafkaImage()
		if image != c.wantImage || expectedKafkaVersion(image) != c.wantVers {
			t.Errorf("KAFKA_IMAGE=%q KAFKA_VERSION=%q: image %q expecting %q, want %q expecting %q",
				c.image, c.version, image, expectedKafkaVersion(image), c.wantImage, c.wantVers)
		}
	}
	for guess, want := range map[string]bool{"v4.4": true, "at least v4.4": true, "v4.1": false, "v4.44": false} {
		if matchesVersion(guess, "4.4.0") != want {
			t.Errorf("matchesVersion(%q, 4.4.0) = %v, want %v", guess, !want, want)
		}
	}
}

// readEnvFile reads NAME=value lines (comments and blank lines skipped).
func readEnvFile(t *testing.T, path string) map[string]string {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	out := map[string]string{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		if k, v, ok := strings.Cut(line, "="); ok {
			out[k] = v
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}
