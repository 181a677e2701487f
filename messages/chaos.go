package messages

// ChaosPanic makes the receiving actor panic (chaos injection). The
// supervisors' middleware panics before the actor sees the message.
type ChaosPanic struct {
	Reason string
}

// Tick is a periodic-work step. Gen lets an actor ignore ticks armed by an
// earlier incarnation or an earlier timer.
type Tick struct {
	Gen uint64
}
