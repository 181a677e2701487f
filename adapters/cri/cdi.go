package cri

import (
	"fmt"
	"strconv"
	"strings"
)

// NoCDI says why a runtime, by the name and version its Version call
// answers, cannot inject CDI devices (ContainerConfig.CDIDevices), or ""
// when it can or does not tell. containerd reads CDI names from 1.7 on
// (with enable_cdi; 2.0 always): 1.6 and older drop them without an error,
// so a container would run without its devices. Other runtimes are trusted
// (CRI-O has read CDI names since 1.23; the CRI field is theirs to honour).
func NoCDI(name, version string) string {
	if name != "containerd" {
		return ""
	}
	major, minor, ok := majorMinor(version)
	if !ok || major > 1 || (major == 1 && minor >= 7) {
		return ""
	}
	return fmt.Sprintf("containerd %s ignores CDI devices (CDI needs containerd 1.7 or later)", version)
}

// majorMinor reads "v1.6.20", "1.6.20-1", "2.4.2+unknown".
func majorMinor(v string) (major, minor int, ok bool) {
	parts := strings.SplitN(strings.TrimPrefix(v, "v"), ".", 3)
	if len(parts) < 2 {
		return 0, 0, false
	}
	var err1, err2 error
	major, err1 = strconv.Atoi(parts[0])
	minor, err2 = strconv.Atoi(strings.TrimFunc(parts[1], func(r rune) bool { return r < '0' || r > '9' }))
	return major, minor, err1 == nil && err2 == nil
}
