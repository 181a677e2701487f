package supervisors

import (
	"log/slog"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/actorlet/actorlet/internal/actortest"
)

func TestBucketOf(t *testing.T) {
	tests := []struct {
		name string
		d    time.Duration
		want int
	}{
		{"zero", 0, 0},
		{"1us is the first bound", time.Microsecond, 0},
		{"just above 1us", time.Microsecond + 1, 1},
		{"4us", 4 * time.Microsecond, 1},
		{"just above 4us", 4*time.Microsecond + 1, 2},
		{"1ms", time.Millisecond, 5},
		{"1.024ms is bound 5", 1024 * time.Microsecond, 5},
		{"just above 1.024ms", 1024*time.Microsecond + 1, 6},
		{"an hour is +Inf", time.Hour, numBuckets},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := bucketOf(tc.d)
			if got != tc.want {
				t.Fatalf("bucketOf(%v) = %d, want %d", tc.d, got, tc.want)
			}
			// The bucket's bound holds d; the one below does not.
			if got < numBuckets && tc.d.Seconds() > HandlingBuckets[got]*1.0000001 {
				t.Fatalf("%v above its bound %v", tc.d, HandlingBuckets[got])
			}
			if got > 0 && tc.d.Seconds() <= HandlingBuckets[got-1] {
				t.Fatalf("%v fits the lower bound %v", tc.d, HandlingBuckets[got-1])
			}
		})
	}
}

// blocker blocks on release while handling "block", so its mailbox fills;
// it sends the time it started handling "block" on started.
type blocker struct {
	started chan time.Time
	release chan struct{}
}

func (b *blocker) Receive(c actor.Context) {
	if c.Message() == "block" {
		b.started <- time.Now()
		<-b.release
	}
}

// TestMailboxLengthAndHandling checks what the debug page and the metrics
// read: the mailbox length of a busy actor (read from protoactor's
// mailbox; fails if a protoactor upgrade hides it), messages handled and
// their handling time, per actor and per kind.
func TestMailboxLengthAndHandling(t *testing.T) {
	sys := newSystem(t)
	reg := NewRegistry(nil)
	started, release := make(chan time.Time, 1), make(chan struct{})
	props := actor.PropsFromProducer(func() actor.Actor { return &blocker{started: started, release: release} },
		actor.WithReceiverMiddleware(Middlewares(reg, slog.New(slog.DiscardHandler), nil)...))
	pid, err := sys.Root.SpawnNamed(props, "pod-1234")
	if err != nil {
		t.Fatal(err)
	}
	actortest.Eventually(t, "actor registered", func() bool { return len(reg.Snapshot()) == 1 })
	sys.Root.Send(pid, "block")
	for range 5 {
		sys.Root.Send(pid, "work")
	}
	actortest.Eventually(t, "5 messages waiting", func() bool { return reg.Snapshot()[0].Mailbox == 5 })
	ks := reg.KindStats()
	if len(ks) != 1 || ks[0].Kind != KindPod || ks[0].Live != 1 || ks[0].MailboxLength != 5 || ks[0].MailboxMax != 5 {
		t.Fatalf("kind stats while blocked: %+v", ks)
	}
	// The registry times handling on the wall clock: hold the blocked
	// message until it has taken at least 2 ms.
	blockedAt := <-started
	actortest.Eventually(t, "the blocked message to take 2 ms", func() bool { return time.Since(blockedAt) >= 2*time.Millisecond })
	close(release)
	actortest.Eventually(t, "mailbox drained", func() bool {
		a := reg.Snapshot()[0]
		return a.Mailbox == 0 && a.Messages == 7 // Started, block, 5 x work
	})
	a := reg.Snapshot()[0]
	if a.HandlingNanos < int64(2*time.Millisecond) || a.MeanHandlingMicros <= 0 {
		t.Fatalf("handling time not counted: %+v", a)
	}
	ks = reg.KindStats()
	var inBuckets uint64
	for _, n := range ks[0].Buckets {
		inBuckets += n
	}
	if ks[0].Handled != 7 || inBuckets != 7 || ks[0].HandlingSeconds < 0.002 {
		t.Fatalf("kind stats after: %+v", ks[0])
	}
	// The blocked message lands in a bucket of at least 2 ms.
	var slow uint64
	for i, n := range ks[0].Buckets {
		if i == numBuckets || HandlingBuckets[i] >= 0.002 {
			slow += n
		}
	}
	if slow < 1 {
		t.Fatalf("no slow message in the histogram: %v", ks[0].Buckets)
	}
	// Stats by kind outlive the actor.
	if err := sys.Root.StopFuture(pid).Wait(); err != nil {
		t.Fatal(err)
	}
	actortest.Eventually(t, "actor gone", func() bool { return len(reg.Snapshot()) == 0 })
	if ks := reg.KindStats(); len(ks) != 1 || ks[0].Live != 0 || ks[0].Handled < 7 {
		t.Fatalf("kind stats after stop: %+v", ks)
	}
}
