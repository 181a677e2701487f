// Package nvml finds NVIDIA GPUs through NVML (go-nvml's nvml.Interface:
// the driver's libnvidia-ml.so.1, or go-nvml's simulated DGX servers) and
// serves them as the DevicesActor's Provider of nvidia.com/gpu: discovery,
// health events (Xid, double-bit ECC), allocation specs as NVIDIA's device
// plugin gives them, samples for the DCGM-named gauges. It imports neither
// actors nor messages (an outbound adapter).
//
// # Specs
//
// Open takes the --gpus value:
//
//   - "nvml": the driver's library, dlopened at Init. Without it Open
//     returns an error wrapping ErrNoLibrary; with the library but no GPU
//     (or no kernel driver loaded) one wrapping ErrNoDevices. The caller
//     logs one line and carries on without GPUs.
//   - "mock:dgxa100", "mock:dgxh100", "mock:dgxh200", "mock:dgxb200":
//     go-nvml's simulated servers (8 GPUs each), completed so that they
//     answer every query this package makes as a real idle GPU of that
//     model does (H100: 85520809984 B of memory, 700 W power limit,
//     compute capability 9.0; A100: 8.0), with stable UUIDs (a hash of
//     the model and the index, so a restarted process finds the same GPUs)
//     and NVML events that InjectXid raises. Query parameters:
//     count=N (only the first N GPUs), xid-every=30s (raise an Xid on a
//     GPU picked by a seeded random source at that period of
//     Options.Clock), xid=79 (the Xid raised by xid-every, default 79),
//     seed=1 (the seed). Example: "mock:dgxh100?count=2&xid-every=1m".
//
// # Health
//
// Watch registers for Xid critical errors and double-bit ECC errors (those
// each GPU supports) and marks a GPU unhealthy on a critical Xid or a
// double-bit ECC error; application Xids (13, 31, 43, 45, 68, 109) leave
// it healthy, as NVIDIA's k8s-device-plugin does; an event with no device
// marks every GPU. An unhealthy GPU stays unhealthy for the life of the
// GPUs value. On mock specs InjectXid raises an Xid through the same NVML
// event set (device ID AllGPUs, "*": an event with no device).
//
// # Labels and annotations
//
// Describe returns GPU feature discovery's labels (nvidia.com/gpu.present,
// gpu.count, gpu.product, gpu.memory, gpu.family, gpu.compute.major/minor,
// gpu.machine, mig.capable, cuda.driver.*, cuda.driver-version.*,
// cuda.runtime.*, cuda.runtime-version.*), and one annotation per GPU:
//
//	actorlet.io/gpu-<index>: <uuid>,<pci bus id>,<model>,<memory MiB>,mig=<enabled|disabled>
//
// for example "actorlet.io/gpu-0":
// "GPU-5e1b6f0e-...,0000:1b:00.0,NVIDIA H100 80GB HBM3,81559,mig=disabled".
//
// # Samples
//
// Sample returns, per GPU UUID, DCGM exporter's field names:
// DCGM_FI_DEV_GPU_UTIL and DCGM_FI_DEV_MEM_COPY_UTIL (%), DCGM_FI_DEV_FB_USED
// and DCGM_FI_DEV_FB_FREE (MiB), DCGM_FI_DEV_GPU_TEMP (C),
// DCGM_FI_DEV_POWER_USAGE (W) and DCGM_FI_DEV_XID_ERRORS (the last Xid
// seen, 0 if none).
//
// # The real-GPU check
//
// On a machine with an NVIDIA GPU and its driver:
//
//	go test -run TestRealGPU -v ./adapters/nvml/
package nvml
