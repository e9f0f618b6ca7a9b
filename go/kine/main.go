// kine, k3s' etcd shim, built from the published github.com/k3s-io/kine module for breakglass' tests.
//
// This is the upstream main.go of github.com/k3s-io/kine, nothing more: the point is to run the real kine (its
// etcd v3 server over SQLite), so we add no behaviour of our own. Which version is built is chosen by the
// -modfile given to `go build` (one v<X.Y.Z>.mod and .sum per version beside this file; see go/versions and
// scripts/gobuild.sh, which builds it with cgo and mattn/go-sqlite3 as kine's releases and k3s are).
package main

import (
	"context"
	"errors"
	"os"

	"github.com/k3s-io/kine/pkg/app"
	"github.com/sirupsen/logrus"
)

func main() {
	app := app.New()
	if err := app.Run(os.Args); err != nil {
		if !errors.Is(err, context.Canceled) {
			logrus.Fatal(err)
		}
	}
}
