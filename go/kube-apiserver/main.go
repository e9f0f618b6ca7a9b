// kube-apiserver, built from the published k8s.io/kubernetes module for breakglass' tests and sandbox.
//
// This is the upstream cmd/kube-apiserver main, nothing more: the point is to run the real apiserver, so
// we add no behaviour of our own. Which version is built is chosen by the -modfile given to `go build`
// (one v<X.Y.Z>.mod and .sum per version beside this file; see go/versions and scripts/gobuild.sh).
package main

import (
	"os"
	_ "time/tzdata"

	"k8s.io/component-base/cli"
	_ "k8s.io/component-base/logs/json/register" // --logging-format=json: one of the log formats diagnose reads
	_ "k8s.io/component-base/metrics/prometheus/clientgo"
	_ "k8s.io/component-base/metrics/prometheus/version"
	"k8s.io/kubernetes/cmd/kube-apiserver/app"
)

func main() {
	os.Exit(cli.Run(app.NewAPIServerCommand()))
}
