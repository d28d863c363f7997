package actorflow

import (
	"fmt"
	"slices"
	"strings"

	"github.com/actorflow/actorflow/coordinator"
	"github.com/actorflow/actorflow/internal/keyactor"
	"github.com/actorflow/actorflow/snapshotstore"
	"go.uber.org/zap"
)

// storeOpt records that the caller set name, an option of the worker's own
// Kafka store (checkStoreOptions).
func (c *config) storeOpt(name string) {
	if !slices.Contains(c.storeOpts, name) {
		c.storeOpts = append(c.storeOpts, name)
	}
}

// checkConfig refuses, at NewWorker, the settings Run found only after its
// broker and topic checks (up to twice the start timeout) or never: they
// depend on nothing but the options and the flow. Run's topic checks
// (ensureOutput, ensureDeadLetter) rely on these.
func checkConfig(c *config, flow keyactor.Handler) error {
	for _, b := range c.brokers {
		if strings.TrimSpace(b) == "" {
			return fmt.Errorf("actorflow: WithBrokers(%q): an empty broker address", c.brokers)
		}
	}
	first, most := c.retryBackoff, c.maxRetryBackoff
	if first <= 0 {
		first = coordinator.DefaultRetryBackoff
	}
	if most <= 0 {
		most = coordinator.DefaultMaxRetryBackoff
	}
	if first > most {
		// The delay was capped at max, but the restart's own bookkeeping
		// (its first retry, the memo of a failed rejoin check) took first.
		return fmt.Errorf("actorflow: WithPartitionRetryBackoff(%v, %v): the first delay %v is above the largest %v (zero or negative: the defaults %v and %v)",
			c.retryBackoff, c.maxRetryBackoff, first, most, coordinator.DefaultRetryBackoff, coordinator.DefaultMaxRetryBackoff)
	}
	snapshots := c.snapshotTopic() // "": a store that does not name its topic
	producer, out := flow.Output()
	if out != "" {
		switch {
		case out == c.input:
			return fmt.Errorf("actorflow: the flow's output topic %q (keyflow.WithOutput) is the input topic: the flow would fold its own outputs", out)
		case out == snapshots:
			return fmt.Errorf("actorflow: the flow's output topic %q (keyflow.WithOutput) is the snapshot topic: its outputs would pass for snapshots", out)
		case c.store == nil && c.kafka.Mode == snapshotstore.Plain && producer == nil:
			return fmt.Errorf("actorflow: the flow's output topic %q without a producer (keyflow.WithOutput(nil, ...)): the plain mode emits through the application's producer; only the transactional mode needs none", out)
		}
	}
	for _, t := range c.outputTopics {
		switch {
		case t == "":
			return fmt.Errorf("actorflow: WithOutputTopics(%q): an empty topic name", c.outputTopics)
		case t == c.input || t == snapshots:
			return fmt.Errorf("actorflow: WithOutputTopics: %q is the input or snapshot topic", t)
		case c.store == nil && c.kafka.Mode == snapshotstore.Plain && producer == nil:
			return fmt.Errorf("actorflow: WithOutputTopics(%q) without a producer (keyflow.WithOutput): the plain mode emits through the application's producer", c.outputTopics)
		}
	}
	if dlq := flow.DeadLetterTopic(c.input); dlq != "" && (dlq == c.input || dlq == snapshots) {
		return fmt.Errorf("actorflow: the flow's dead-letter topic %q (keyflow.WithDeadLetterTopic) is the input or snapshot topic", dlq)
	}
	return nil
}

// checkStoreOptions refuses options of the worker's own Kafka store beside
// WithStore, which does not read them: a WithResetLostState or a
// WithCreateTopics the caller believed in was silently ignored. The three
// that only describe the store — WithSnapshotTopic, WithMode,
// WithTransactionalIDPrefix — are refused only when the store says it has
// another value (a *snapshotstore.Kafka says all three): stating a store's
// own topic, mode or prefix again is harmless (the project's scenario
// helpers do). When the store does not say, they are logged as unchecked.
func checkStoreOptions(c *config) error {
	if c.store == nil {
		return nil
	}
	var unchecked []string
	for _, name := range c.storeOpts {
		switch name {
		case "WithSnapshotTopic":
			t, ok := c.store.(interface{ Topic() string })
			if !ok {
				continue // names the store's topic for the worker (config.snapshotTopic)
			}
			if t.Topic() != c.snapshot {
				return fmt.Errorf("actorflow: WithSnapshotTopic(%q) with WithStore: the store's snapshot topic is %q", c.snapshot, t.Topic())
			}
		case "WithMode":
			m, ok := c.store.(interface{ Mode() snapshotstore.Mode })
			if !ok {
				unchecked = append(unchecked, name)
				continue
			}
			if m.Mode() != c.kafka.Mode {
				return fmt.Errorf("actorflow: WithMode(%v) with WithStore: the store's mode is %v, and the store's applies", c.kafka.Mode, m.Mode())
			}
		case "WithTransactionalIDPrefix":
			k, ok := c.store.(interface {
				TransactionalID(inputTopic string, partition int32) string
			})
			if !ok {
				unchecked = append(unchecked, name)
				continue
			}
			if m, ok := c.store.(interface{ Mode() snapshotstore.Mode }); ok && m.Mode() == snapshotstore.Plain {
				continue // the plain mode uses no transactional id: nothing to disagree on
			}
			if got, want := k.TransactionalID(c.input, 0), fmt.Sprintf("%s-%s-%d", c.kafka.TransactionalIDPrefix, c.input, 0); got != want {
				return fmt.Errorf("actorflow: WithTransactionalIDPrefix(%q) with WithStore: the store's transactional ids are its own (%q for partition 0, not %q); set its prefix in the store's configuration",
					c.kafka.TransactionalIDPrefix, got, want)
			}
		default:
			return fmt.Errorf("actorflow: %s with WithStore: it configures the worker's own Kafka store, which WithStore replaces (configure the store given instead)", name)
		}
	}
	if len(unchecked) > 0 {
		c.log.Warn("options of the worker's own store given with WithStore: the store's own settings apply, and it does not say them, so these were not checked against it",
			zap.Strings("options", unchecked))
	}
	return nil
}
