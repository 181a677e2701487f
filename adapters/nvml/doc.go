// Package nvml finds NVIDIA GPUs through NVML (go-nvml's nvml.Interface:
// the driver's libnvidia-ml.so.1, or go-nvml's simulated DGX servers) and
// serves them as the DevicesActor's Provider of nvidia.com/gpu: discovery,
// health events (Xid, double-bit ECC), allocation specs as NVIDIA's device
// plugin gives them, samples for the DCGM-named gauges. It imports neither
// actors nor messages (an outbound adapter).
package nvml

import "github.com/NVIDIA/go-nvml/pkg/nvml"

var _ nvml.Interface = nil
