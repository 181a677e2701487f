// Package messages holds the plain value types that actors exchange, one file
// per protocol. No logic, no adapters. Kubernetes objects inside a message are
// deep-copied by the sender; the receiver owns them.
package messages
