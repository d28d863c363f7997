package keyflow

import "encoding/json"

// Codec encodes a key's state for its snapshot. Encode is never called with
// nil (an absent state is written as a tombstone). An Encode error of the
// key's snapshot fails its partition. A Decode error of a key's snapshot,
// when the key is loaded, makes its state undecodable:
// WithUndecodableStatePolicy decides what it does (default Fail: the key's
// partition fails with an error naming the snapshot record and key; Skip
// drops the state, DeadLetter sets it aside). A Decode error while undoing
// a skipped call (of the state the codec encoded itself, under
// WithFoldErrorPolicy) fails the partition. A Codec that panics fails the
// partition whatever the policies (the error matches ErrPanicked): a bug,
// not a bad state. Decode must not keep references into data, and Encode
// must return bytes it does not reuse: the runtime keeps the latest
// encoding to undo skipped records (WithFoldErrorPolicy) and to unload a
// key without encoding it again.
type Codec[S any] interface {
	Encode(state *S) ([]byte, error)
	Decode(data []byte) (*S, error)
}

// JSON returns the default codec, encoding/json.
func JSON[S any]() Codec[S] { return jsonCodec[S]{} }

type jsonCodec[S any] struct{}

func (jsonCodec[S]) Encode(s *S) ([]byte, error) { return json.Marshal(s) }

func (jsonCodec[S]) Decode(b []byte) (*S, error) {
	s := new(S)
	if err := json.Unmarshal(b, s); err != nil {
		return nil, err
	}
	return s, nil
}
