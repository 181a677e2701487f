package metrics

import "github.com/prometheus/client_golang/prometheus"

// SetEventsDropped exports actorlet_events_dropped_total: the events the
// recorder dropped because its queue to the API server was full (past
// --event-qps and --event-burst at a high rate of pod starts). Upstream's
// recorder drops them the same way, with a log line only. dropped runs
// once per scrape; a second call is an error.
func (r *Registry) SetEventsDropped(dropped func() uint64) error {
	return r.Register(prometheus.NewCounterFunc(prometheus.CounterOpts{
		Namespace: actorletNamespace,
		Name:      "events_dropped_total",
		Help:      "Events not written to the API server because the event recorder's queue was full.",
	}, func() float64 { return float64(dropped()) }))
}
