// Command systemctl is a stand-in for systemd's systemctl on test machines
// whose PID 1 is not systemd: `kubeadm join` runs `systemctl restart
// kubelet`, and this starts the kubelet unit's ExecStart= exactly as systemd
// would (the unit file and its drop-ins, Environment=, EnvironmentFile=).
// See testenv.SystemctlMain; testenv.SystemctlStandIn builds it.
package main

import (
	"os"

	"github.com/actorlet/actorlet/internal/testenv"
)

func main() {
	os.Exit(testenv.SystemctlMain(os.Args[1:], os.Stdout, os.Stderr))
}
