// Package actorkit holds the idioms every actor of actorlet uses, in one
// place: a wake-up message on the injected clock (Timer), a slow call run
// off the mailbox whose result comes back as a message tagged with the
// actor's incarnation (Go), and exponential back-off (Backoff, on
// k8s.io/apimachinery's wait.Backoff). Two more keep a long-lived parent
// from holding the memory of what it no longer has: ForgetStoppedChildren
// (protoactor's set of children keeps stopped children reachable) and
// Shrink (a Go map keeps its memory after its keys are deleted).
//
// An actor makes one Self in its Started handler; every incarnation gets a
// new generation, so a timer or a call of an earlier incarnation (before a
// restart) is recognised and dropped.
package actorkit
