package main

// allocationCheckpointName is the file under --root-dir that keeps the
// pods' allocated resources across restarts (in-place pod resize,
// actors/node allocation.go): upstream's allocated_pods_state.
const allocationCheckpointName = "allocated_pods_state"
