// Package supervisors holds actorlet's supervision machinery: an OTP-style
// restart strategy (bounded intensity in a sliding window, exponential capped
// backoff on an injected clock), receiver middlewares that log recovered
// panics with their stack, inject chaos and keep a registry of live actors,
// a chaos injector, and the root of the actor tree.
package supervisors
