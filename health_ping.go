package actorflow

import (
	"context"
	"fmt"
	"strings"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// brokerPing probes a cluster: reachable while any broker answers. It asks
// every broker the last answer listed, at once, for metadata (no topics),
// and returns as soon as one answers. kgo's Ping asks them one after
// another, and one frozen broker (its connections open, nothing answered: a
// paused node) took the whole probe's time, so a 3-node cluster with two
// brokers up was reported unreachable — the worker not ready while it
// processed (a chaos run's node pauses). Not safe for concurrent use.
type brokerPing struct {
	known []kmsg.MetadataResponseBroker // the brokers the last answer listed
}

// ping probes through cl; the error names each broker's failure. With no
// answer yet (the first probe, or a cluster that listed none), one request
// kgo routes to a broker of its choice (the seeds before any is known).
func (p *brokerPing) ping(ctx context.Context, cl *kgo.Client) error {
	if len(p.known) == 0 {
		req := kmsg.NewPtrMetadataRequest()
		req.Topics = []kmsg.MetadataRequestTopic{}
		resp, err := req.RequestWith(ctx, cl)
		if err == nil {
			p.known = resp.Brokers
		}
		return err
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel() // the others' requests end with it
	type answer struct {
		resp *kmsg.MetadataResponse
		err  error
	}
	answers := make(chan answer, len(p.known))
	for _, b := range p.known {
		go func() {
			req := kmsg.NewPtrMetadataRequest() // one each: kgo sets its version
			req.Topics = []kmsg.MetadataRequestTopic{}
			resp, err := req.RequestWith(ctx, cl.Broker(int(b.NodeID)))
			if err != nil {
				err = fmt.Errorf("broker %d (%s:%d): %w", b.NodeID, b.Host, b.Port, err)
			}
			answers <- answer{resp, err}
		}()
	}
	failed := make(brokerErrors, 0, len(p.known))
	for range p.known {
		a := <-answers
		if a.err == nil {
			if len(a.resp.Brokers) > 0 {
				p.known = a.resp.Brokers
			}
			return nil
		}
		failed = append(failed, a.err)
	}
	// None answered: the next probe goes through kgo's routing again and
	// learns the brokers anew. Kept, a list whose brokers were all gone (a
	// cluster replaced behind the same seeds, new node ids) was asked for
	// ever while the cluster answered (helper-111).
	p.known = nil
	return failed
}

// brokerErrors is every broker's failure to answer a probe, on one line.
type brokerErrors []error

func (e brokerErrors) Error() string {
	s := make([]string, len(e))
	for i, err := range e {
		s[i] = err.Error()
	}
	return "no broker answered: " + strings.Join(s, "; ")
}

func (e brokerErrors) Unwrap() []error { return e }
