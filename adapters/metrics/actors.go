package metrics

import (
	"sync"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/actorlet/actorlet/internal/actorkit"
)

// SetActorStats makes every scrape read the actor system through src (the
// supervisors' registry's KindStats: Buckets count per bound of bounds, not
// cumulative, then +Inf) and export, by actor kind: actorlet_actors (live
// actors, fresh at each scrape), actorlet_actor_messages_total,
// actorlet_actor_mailbox_length (sum over the kind's actors),
// actorlet_actor_mailbox_length_max and the histogram
// actorlet_actor_message_handling_duration_seconds with the given bucket
// bounds (seconds). src runs once per scrape; its labels are kinds only (a
// bounded set), never one per pod.
func (r *Registry) SetActorStats(bounds []float64, src func() []actorkit.KindStats) {
	r.actorStats.set(bounds, src)
}

type actorCollector struct {
	actors   *prometheus.GaugeVec
	messages *prometheus.CounterVec

	mailbox    *prometheus.Desc
	mailboxMax *prometheus.Desc
	handling   *prometheus.Desc
	messagesD  *prometheus.Desc

	mu     sync.Mutex
	bounds []float64
	src    func() []actorkit.KindStats
	kinds  []string // initialised at zero
}

func newActorCollector(actors *prometheus.GaugeVec, messages *prometheus.CounterVec) *actorCollector {
	a := func(name string) string { return prometheus.BuildFQName(actorletNamespace, "", name) }
	return &actorCollector{
		actors: actors, messages: messages,
		mailbox:    prometheus.NewDesc(a("actor_mailbox_length"), "Messages waiting in the mailboxes of live actors, summed by actor kind.", []string{labelKind}, nil),
		mailboxMax: prometheus.NewDesc(a("actor_mailbox_length_max"), "The longest mailbox among live actors of a kind.", []string{labelKind}, nil),
		handling:   prometheus.NewDesc(a("actor_message_handling_duration_seconds"), "Time actors took to handle a message, by actor kind.", []string{labelKind}, nil),
		messagesD:  prometheus.NewDesc(a("actor_messages_total"), "Messages handled by actors, by actor kind.", []string{labelKind}, nil),
	}
}

func (c *actorCollector) set(bounds []float64, src func() []actorkit.KindStats) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.bounds, c.src = append([]float64(nil), bounds...), src
}

func (c *actorCollector) Describe(ch chan<- *prometheus.Desc) {
	c.actors.Describe(ch)
	c.messages.Describe(ch)
	ch <- c.mailbox
	ch <- c.mailboxMax
	ch <- c.handling
}

func (c *actorCollector) Collect(ch chan<- prometheus.Metric) {
	c.mu.Lock()
	bounds, src, kinds := c.bounds, c.src, c.kinds
	c.mu.Unlock()
	if src == nil {
		c.actors.Collect(ch)
		c.messages.Collect(ch)
		return
	}
	stats := src()
	seen := make(map[string]bool, len(stats))
	for _, s := range stats {
		seen[s.Kind] = true
		ch <- prometheus.MustNewConstMetric(c.mailbox, prometheus.GaugeValue, float64(s.MailboxLength), s.Kind)
		ch <- prometheus.MustNewConstMetric(c.mailboxMax, prometheus.GaugeValue, float64(s.MailboxMax), s.Kind)
		ch <- prometheus.MustNewConstMetric(c.messagesD, prometheus.CounterValue, float64(s.Handled), s.Kind)
		cum := make(map[float64]uint64, len(bounds))
		var n uint64
		for i, b := range bounds {
			if i < len(s.Buckets) {
				n += s.Buckets[i]
			}
			cum[b] = n
		}
		ch <- prometheus.MustNewConstHistogram(c.handling, s.Handled, s.HandlingSeconds, cum, s.Kind)
		c.actors.WithLabelValues(s.Kind).Set(float64(s.Live))
	}
	// Kinds initialised at zero (InitActorKinds) that never ran an actor.
	for _, k := range kinds {
		if !seen[k] {
			ch <- prometheus.MustNewConstMetric(c.messagesD, prometheus.CounterValue, 0, k)
		}
	}
	c.actors.Collect(ch)
}

func (c *actorCollector) addKinds(kinds ...string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.kinds = append(c.kinds, kinds...)
}
