package keyflow

// Policy says what to do with a record that cannot be processed.
type Policy int

const (
	// Fail fails the partition (the default): nothing is committed past the
	// record, and the error names topic, partition, offset and key.
	Fail Policy = iota
	// Skip logs the record's position and the error, counts it, and goes on.
	Skip
)

func (p Policy) String() string {
	if p == Skip {
		return "skip"
	}
	return "fail"
}
