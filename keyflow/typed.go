package keyflow

import (
	"encoding/json"

	"github.com/actorflow/actorflow/internal/keyactor"
	"github.com/twmb/franz-go/pkg/kgo"
)

// Decoder decodes an input record into the value a typed fold receives
// (NewTyped): the input's serde, as Kafka Streams' Serde or goka's Codec.
// It sees the whole record (key, value, headers, timestamp). A returned
// error marks the record undecodable: WithUndecodablePolicy decides what
// it does. A Decoder that panics fails the partition whatever the
// policies, as any panic of the flow does (ErrPanicked): it runs within
// the fold's call, so the error names the fold (`payments[0] offset 7 key
// "acct-1": fold: panic in the flow: ...`). It runs on the key's actor,
// one record at a time.
type Decoder[V any] func(rec *kgo.Record) (V, error)

// TypedFoldFunc folds one decoded input value into a key's state, like
// FoldFunc folds a record; kc.Record() is the record v was decoded from.
type TypedFoldFunc[S, V any] func(kc *Context, state *S, v V) (*S, error)

// NewTyped returns a flow whose fold receives each input record decoded by
// decode instead of the raw record (which stays available as kc.Record()).
// See Option for opts.
//
// A decode error does not reach fold: it is the record's failure, wrapping
// ErrUndecodable (unless it already does), so WithUndecodablePolicy
// applies (default: the fold error policy, Fail): the partition fails, or
// the record is skipped or dead-lettered (kind KindUndecodable), with an
// error naming topic, partition, offset and key, such as
// `payments[0] offset 7 key "acct-1": decode: keyflow: undecodable input
// record: invalid character 'x' looking for beginning of value`. A fold
// error is handled as New's. A panic of decode, as one of fold, fails the
// partition whatever the policies (Decoder).
//
// NewTyped panics when decode or fold is nil, as New does for a nil fold.
func NewTyped[S, V any](decode Decoder[V], fold TypedFoldFunc[S, V], opts ...Option) *Flow[S] {
	switch {
	case decode == nil:
		panic("keyflow.NewTyped: nil decoder")
	case fold == nil:
		panic("keyflow.NewTyped: nil fold")
	}
	return New(func(kc *Context, s *S, rec *kgo.Record) (*S, error) {
		v, err := decode(rec)
		if err != nil {
			return nil, keyactor.Undecodable(err)
		}
		return fold(kc, s, v)
	}, opts...)
}

// DecodeJSON is a Decoder of record values in JSON (encoding/json) into a
// V: keyflow.NewTyped(keyflow.DecodeJSON, fold), V taken from fold. A
// record without a value (nil or empty) is an error, as is one
// json.Unmarshal refuses.
func DecodeJSON[V any](rec *kgo.Record) (V, error) {
	var v V
	if len(rec.Value) == 0 {
		return v, errEmptyValue
	}
	err := json.Unmarshal(rec.Value, &v)
	return v, err
}
