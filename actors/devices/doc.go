// Package devices is the DevicesActor: the node's extended resources (the
// built-in GPUs through a Provider on NVML, and device plugins), their
// health, their allocation to pods' containers (checkpointed, never twice),
// and the capacity the NodeActor admits against.
package devices
