package actorkit

import "time"

// ActorInfo is one live actor as the supervisors' registry sees it: the
// registry's snapshot returns them and the debug page draws them (one
// type for both, here because adapters do not import supervisors).
type ActorInfo struct {
	PID      string `json:"pid"`
	Kind     string `json:"kind"`
	Parent   string `json:"parent,omitempty"`
	Restarts int    `json:"restarts"`
	Messages uint64 `json:"messages"`
	// Mailbox is the number of user messages waiting (-1: unknown).
	Mailbox int `json:"mailbox"`
	// HandlingNanos is the total time spent handling messages (the
	// actor's Receive and the middlewares inside the registry's).
	HandlingNanos int64 `json:"handlingNanos"`
	// MeanHandlingMicros is HandlingNanos per message, in microseconds.
	MeanHandlingMicros float64   `json:"meanHandlingMicros"`
	LastFailure        string    `json:"lastFailure,omitempty"`
	LastFailureAt      time.Time `json:"lastFailureAt,omitzero"`
}

// KindStats is what the supervisors' registry knows about one actor kind:
// the metrics adapter exports it (mailbox length and handling duration
// histogram by kind) and the debug page shows it.
type KindStats struct {
	Kind string
	// Live actors of the kind now.
	Live int
	// MailboxLength is the sum of the live actors' waiting user messages,
	// MailboxMax the longest one.
	MailboxLength int
	MailboxMax    int
	// Handled messages since start (actors that are gone included), their
	// total handling time, and their count per bucket of the registry's
	// handling buckets (not cumulative; one more entry for +Inf).
	Handled         uint64
	HandlingSeconds float64
	Buckets         []uint64
}
