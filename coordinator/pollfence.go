package coordinator

import "context"

// pollFence orders the seeks of partitions that start again here (a failed
// partition's restart, a partition kgo kept across a membership change)
// against the poll loop's polls. Plain logic under Consumer.mu, unit-tested
// in pollfence_internal_test.go.
//
// Why: the poll loop takes its records from kgo (PollFetches) before it
// takes Consumer.deliver to hand them over. A poll that returned just
// before a seek, from kgo's old position, could wait for deliver while the
// seek and the new copy's start held it, and then hand the new copy
// records from past its committed offset: the copy folded them first and
// skipped the records before them as replays (a review found it; kgo drops
// only what it still buffered at the seek). So the records of a poll that
// started before a partition's seek are dropped; the partition stays
// paused from before its seek until a poll that started after it, so no
// poll can carry both old records and new ones; and a poll blocked on
// other partitions is woken for it.
type pollFence struct {
	// polls is the number of polls started so far.
	polls uint64
	// sought: the records of tp from a poll numbered at most this came
	// from before tp's latest seek.
	sought map[TopicPartition]uint64
	// resume: tp is resumed when a poll numbered above this starts.
	resume map[TopicPartition]uint64
	// wake ends the current poll (its context's cancel), so that a due
	// resume does not wait for a poll blocked on the other partitions.
	wake context.CancelFunc
}

func newPollFence() pollFence {
	return pollFence{sought: map[TopicPartition]uint64{}, resume: map[TopicPartition]uint64{}}
}

// startPoll numbers a new poll, whose context wake cancels, and returns
// the partitions due to be resumed before it.
func (f *pollFence) startPoll(wake context.CancelFunc) (seq uint64, due []TopicPartition) {
	f.polls++
	f.wake = wake
	for tp, after := range f.resume {
		if after < f.polls {
			due = append(due, tp)
			delete(f.resume, tp)
		}
	}
	return f.polls, due
}

// seek records that tp's fetch position is set now (tp paused): every poll
// started so far may carry its records from before. A resume pending from
// an earlier seek is void.
func (f *pollFence) seek(tp TopicPartition) {
	f.sought[tp] = f.polls
	delete(f.resume, tp)
}

// current reports whether the records of tp from poll seq came after its
// latest seek.
func (f *pollFence) current(tp TopicPartition, seq uint64) bool {
	return seq > f.sought[tp]
}

// resumeAfterSeek asks for tp to be resumed at the next poll, and wakes the
// current one.
func (f *pollFence) resumeAfterSeek(tp TopicPartition) {
	f.resume[tp] = f.polls
	if f.wake != nil {
		f.wake()
	}
}

// forget voids tp's pending resume (it stops here) and reports whether
// there was one: the partition is still paused then.
func (f *pollFence) forget(tp TopicPartition) bool {
	_, pending := f.resume[tp]
	delete(f.resume, tp)
	return pending
}
