package main

// Blank imports that pin the project's dependencies in go.mod until the code
// that uses them lands. Remove an entry once a real import exists.
import (
	_ "github.com/asynkron/protoactor-go/actor"
	_ "github.com/prometheus/client_golang/prometheus"
	_ "github.com/prometheus/client_golang/prometheus/promhttp"
	_ "github.com/spf13/pflag"
	_ "google.golang.org/grpc"
	_ "k8s.io/api/core/v1"
	_ "k8s.io/apimachinery/pkg/api/resource"
	_ "k8s.io/client-go/kubernetes"
	_ "k8s.io/client-go/tools/clientcmd"
	_ "k8s.io/cri-api/pkg/apis/runtime/v1"
	_ "k8s.io/cri-api/pkg/apis/testing"
	_ "k8s.io/utils/clock"
	_ "k8s.io/utils/clock/testing"
	_ "sigs.k8s.io/yaml"
)

func main() {}
