package keyflow

import "encoding/json"

// Codec encodes a key's state for its snapshot. Encode is never called with
// nil (an absent state is written as a tombstone). A Decode error fails the
// key's partition with an error naming the snapshot record and key. Decode
// must not keep references into data, and Encode must return bytes it does
// not reuse: the runtime keeps the latest encoding to undo skipped records
// (WithFoldErrorPolicy) and to unload a key without encoding it again.
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
