package kube

import (
	"hash/maphash"
	"slices"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/actorlet/actorlet/internal/actorkit"
)

var eventSeed = maphash.MakeSeed()

// eventCorrelator is one shard's memory of the events it wrote, by object.
// Only the shard's goroutine uses it.
type eventCorrelator struct {
	objs   map[string]*objEvents
	shrink actorkit.Shrinker // a thousand pods gone must not keep their map's room
}

// objEvents is what is known of one object's events: a few entries per
// container of a pod (Pulled, Created, Started, Killing), kept in slices.
type objEvents struct {
	last    time.Time      // its last event (the idle expiry's)
	named   int64          // the time in its last new Event's name (unix ns)
	spam    [2]tokenBucket // Normal, Warning
	similar []similarEvents
	seen    []seenEvent
}

// similarEvents: the distinct messages of one type and reason within the
// window, oldest first.
type similarEvents struct {
	typ, reason string
	msgs        []uint64
	last        time.Time
}

// seenEvent is an Event written (or being written): the one a repeat of
// the same type, reason and message (or the combined event of its type and
// reason) patches.
type seenEvent struct {
	typ, reason string
	msg         uint64 // maphash of the message; 0 when combined
	combined    bool
	name        string
	count       int32
	first       time.Time
	used        time.Time
}

// tokenBucket is the spam filter's: eventSpamBurst tokens, one more every
// 1/eventSpamQPS seconds.
type tokenBucket struct {
	tokens float64
	at     time.Time
}

func newEventCorrelator() *eventCorrelator {
	return &eventCorrelator{objs: map[string]*objEvents{}}
}

// correlate returns the Event to write for it, and the entry to give the
// written Event's name: a new Event (count 1), or the one it repeats with
// its count one higher. Nil: the spam filter holds it back (it still
// counts, as client-go's: the next Event written says how many there were).
func (c *eventCorrelator) correlate(it *eventItem, source v1.EventSource) (*v1.Event, *seenEvent) {
	now := it.at
	key := objectKey(&it.ref)
	o := c.objs[key]
	if o == nil {
		o = &objEvents{}
		c.objs[key] = o
		c.objs = actorkit.Shrink(&c.shrink, c.objs) // sees the peak
	}
	o.last = now
	msg := it.message
	h := maphash.String(eventSeed, msg)
	combined := o.similarTo(it.typ, it.reason, h, now)
	if combined {
		msg = eventCombinedText + msg
		h = 0
	}
	s := o.find(it.typ, it.reason, h, combined)
	if s == nil {
		// Two new Events of an object within a nanosecond (a clock that
		// ticks coarsely) would get the same name: the second one later.
		o.named = max(o.named+1, now.UnixNano())
		s = o.add(seenEvent{typ: it.typ, reason: it.reason, msg: h, combined: combined,
			name: eventName(it.ref.Name, o.named), first: now})
	}
	s.count++
	s.used = now
	bucket := &o.spam[0]
	if it.typ == v1.EventTypeWarning {
		bucket = &o.spam[1]
	}
	if !bucket.allow(now) {
		return nil, nil
	}
	ns := it.ref.Namespace
	if ns == "" {
		ns = metav1.NamespaceDefault
	}
	return &v1.Event{
		ObjectMeta:          metav1.ObjectMeta{Name: s.name, Namespace: ns},
		InvolvedObject:      it.ref,
		Reason:              it.reason,
		Message:             msg,
		FirstTimestamp:      metav1.NewTime(s.first),
		LastTimestamp:       metav1.NewTime(now),
		Count:               s.count,
		Type:                it.typ,
		Source:              source,
		ReportingController: source.Component,
		ReportingInstance:   source.Host,
	}, s
}

// similarTo records the message among its type's and reason's and says
// whether the event is to be combined: when it makes eventSimilarMax
// distinct messages within the window (the oldest is then dropped, so the
// next new message is combined too).
func (o *objEvents) similarTo(typ, reason string, msg uint64, now time.Time) bool {
	i := slices.IndexFunc(o.similar, func(s similarEvents) bool { return s.typ == typ && s.reason == reason })
	if i < 0 {
		o.similar = append(o.similar, similarEvents{typ: typ, reason: reason})
		i = len(o.similar) - 1
	}
	s := &o.similar[i]
	if now.Sub(s.last) > eventSimilarWindow {
		s.msgs = s.msgs[:0]
	}
	s.last = now
	if !slices.Contains(s.msgs, msg) {
		s.msgs = append(s.msgs, msg)
	}
	if len(s.msgs) < eventSimilarMax {
		return false
	}
	s.msgs = slices.Delete(s.msgs, 0, 1)
	return true
}

func (o *objEvents) find(typ, reason string, msg uint64, combined bool) *seenEvent {
	for i := range o.seen {
		s := &o.seen[i]
		if s.typ == typ && s.reason == reason && s.combined == combined && s.msg == msg {
			return s
		}
	}
	return nil
}

// add remembers a new Event, in place of the least recently seen one when
// the object has eventSeenMax.
func (o *objEvents) add(s seenEvent) *seenEvent {
	if len(o.seen) < eventSeenMax {
		o.seen = append(o.seen, s)
		return &o.seen[len(o.seen)-1]
	}
	oldest := 0
	for i := range o.seen {
		if o.seen[i].used.Before(o.seen[oldest].used) {
			oldest = i
		}
	}
	o.seen[oldest] = s
	return &o.seen[oldest]
}

func (b *tokenBucket) allow(now time.Time) bool {
	switch {
	case b.at.IsZero():
		b.tokens = eventSpamBurst
	case now.After(b.at):
		b.tokens = min(eventSpamBurst, b.tokens+now.Sub(b.at).Seconds()*eventSpamQPS)
	}
	if now.After(b.at) {
		b.at = now
	}
	if b.tokens < 1 {
		return false
	}
	b.tokens--
	return true
}

// forget drops an object.
func (c *eventCorrelator) forget(key string) {
	delete(c.objs, key)
	c.objs = actorkit.Shrink(&c.shrink, c.objs)
}

// sweep drops the objects without an event for eventIdleForget.
func (c *eventCorrelator) sweep(now time.Time) {
	for k, o := range c.objs {
		if now.Sub(o.last) > eventIdleForget {
			delete(c.objs, k)
		}
	}
	c.objs = actorkit.Shrink(&c.shrink, c.objs)
}
