package keyflow

import (
	"time"

	"github.com/actorflow/actorflow/internal/keyactor"
)

// DefaultOutputTimeout is the default delivery timeout of an output in the
// plain mode (WithOutputTimeout; transactional outputs go with their
// transaction and its retries): a quarter of the default revoke teardown bound (40 s,
// 2/3 of the 60 s default rebalance timeout). A revoke's flush waits at most
// this long for a stuck output before the key fails, which leaves most of
// the bound to the transaction that follows the flush and to the stop.
const DefaultOutputTimeout = 10 * time.Second

// ErrOutputTimeout is matched (errors.Is) by the error of an output emitted
// with Context.Emit that was not acknowledged within the flow's output
// timeout (WithOutputTimeout). The error also matches
// context.DeadlineExceeded and names the input topic, partition and offset,
// the key, the output topic and the timeout.
var ErrOutputTimeout = keyactor.ErrOutputTimeout
