// talos-machinery: Talos' own machine-config code (github.com/siderolabs/talos/pkg/machinery), built per Talos
// version, so breakglass' tests check what Talos really does with a config rather than our memory of it.
//
// Which Talos version is built is chosen by the -modfile given to `go build` (one v<X.Y.Z>.mod and .sum per
// version beside this file; see go/versions and scripts/gobuild.sh). Every call below exists in every version
// listed there; where Talos changed what its own code calls (1.14's ValidateAsClient/ValidateAtRuntime), an
// interface check picks the newer method when the version has it, so one main.go still compiles everywhere.
//
//	talos-machinery patch --config FILE [--patch PATCH]... [--mode metal|container|cloud] [--json]
//	    What `talosctl patch machineconfig` does to a node's config, and then what the node does with the
//	    result in ApplyConfiguration: configpatcher.LoadPatches (inline, @file, or a bare file name),
//	    configpatcher.Apply(configpatcher.WithBytes(config), patches), .Bytes(); the node loads those bytes
//	    (configloader.NewFromBytes), refuses a config without a v1alpha1 document, and validates it for a
//	    running (installed) machine in that mode, including the runtime checks (against an empty resource
//	    state: no disks, no volumes). Prints the patched bytes: what the node would store.
//	talos-machinery validate --config FILE [--mode metal|container|cloud] [--strict] [--json]
//	    What `talosctl validate --config FILE --mode M` does: load, then client-side validation (WithLocal).
//	talos-machinery gen --cluster-name NAME --endpoint URL [--kubernetes-version X.Y.Z] [--output-dir DIR]
//	    What `talosctl gen config NAME URL` writes for controlplane.yaml and worker.yaml with its default flags:
//	    a fresh secrets bundle, docs and examples as comments.
//	talos-machinery version
//	    The Talos version of the machinery built in.
//
// Exit codes: 0 done; 1 Talos refused the input (its own error on stderr, every line prefixed with
// "talos-machinery <version> <stage>: "); 2 usage, or a file that cannot be read or written.
// With --json, stdout is one JSON object instead: {"machinery", "ok", "stage", "error", "warnings", "config"}.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/cosi-project/runtime/pkg/state"
	"github.com/cosi-project/runtime/pkg/state/impl/inmem"
	"github.com/cosi-project/runtime/pkg/state/impl/namespaced"

	"github.com/siderolabs/talos/pkg/machinery/config/bundle"
	"github.com/siderolabs/talos/pkg/machinery/config/configloader"
	"github.com/siderolabs/talos/pkg/machinery/config/configpatcher"
	"github.com/siderolabs/talos/pkg/machinery/config/encoder"
	"github.com/siderolabs/talos/pkg/machinery/config/generate"
	"github.com/siderolabs/talos/pkg/machinery/config/machine"
	"github.com/siderolabs/talos/pkg/machinery/config/validation"
	"github.com/siderolabs/talos/pkg/machinery/constants"
	"github.com/siderolabs/talos/pkg/machinery/version"
)

const (
	exitOK       = 0
	exitRejected = 1
	exitUsage    = 2
)

// runtimeMode is Talos' runtime.Mode (internal/app/machined/pkg/runtime, not part of the machinery module) as
// validation sees it; installed plays the node's modeWrapper: an installed machine no longer requires install.
type runtimeMode struct {
	name      string
	installed bool
}

func (m runtimeMode) String() string        { return m.name }
func (m runtimeMode) RequiresInstall() bool { return m.name == "metal" && !m.installed }
func (m runtimeMode) InContainer() bool     { return m.name == "container" }

func parseMode(s string) (runtimeMode, error) {
	switch s {
	case "metal", "container", "cloud":
		return runtimeMode{name: s}, nil
	}

	return runtimeMode{}, fmt.Errorf("unknown runtime mode: %q (metal, container or cloud)", s)
}

// Talos 1.14 renamed the validation entry points; older versions only have Validate and RuntimeValidate.
type clientValidator interface {
	ValidateAsClient(validation.RuntimeMode, ...validation.Option) ([]string, error)
}

type runtimeValidator interface {
	ValidateAtRuntime(context.Context, state.State, validation.RuntimeMode, ...validation.Option) ([]string, error)
}

type result struct {
	Machinery string   `json:"machinery"`
	OK        bool     `json:"ok"`
	Stage     string   `json:"stage,omitempty"`
	Error     string   `json:"error,omitempty"`
	Warnings  []string `json:"warnings"`
	Config    string   `json:"config,omitempty"`
}

type usageError struct{ error }

func (e usageError) Unwrap() error { return e.error }

type stringList []string

func (l *stringList) String() string     { return strings.Join(*l, ",") }
func (l *stringList) Set(v string) error { *l = append(*l, v); return nil }

func main() {
	os.Exit(run(os.Args[1:], os.Stdin, os.Stdout, os.Stderr))
}

func run(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprintln(stderr, "usage: talos-machinery patch|validate|gen|version [flags] (talos-machinery CMD -h)")

		return exitUsage
	}

	var (
		res *result
		err error
	)

	asJSON := false

	switch args[0] {
	case "version":
		fmt.Fprintln(stdout, version.Tag)

		return exitOK
	case "patch":
		res, asJSON, err = patchCmd(args[1:], stdin)
	case "validate":
		res, asJSON, err = validateCmd(args[1:], stdin)
	case "gen":
		err = genCmd(args[1:], stderr)
	default:
		err = usageError{fmt.Errorf("unknown command %q: patch, validate, gen or version", args[0])}
	}

	var ue usageError
	if errors.As(err, &ue) {
		if !errors.Is(err, flag.ErrHelp) {
			fmt.Fprintf(stderr, "talos-machinery: %v\n", err)
		}

		return exitUsage
	}

	if err != nil {
		res = &result{Stage: "gen", Error: err.Error()}
	}

	if res == nil {
		return exitOK
	}

	res.Machinery = version.Tag
	res.OK = res.Error == ""

	if res.OK {
		res.Stage = ""
	}

	if res.Warnings == nil {
		res.Warnings = []string{}
	}

	if asJSON {
		out, _ := json.Marshal(res) //nolint:errchkjson
		fmt.Fprintln(stdout, string(out))
	} else {
		for _, w := range res.Warnings {
			fmt.Fprintf(stderr, "talos-machinery %s warning: %s\n", version.Tag, w)
		}

		if res.OK {
			io.WriteString(stdout, res.Config) //nolint:errcheck
		} else {
			prefix := fmt.Sprintf("talos-machinery %s %s: ", version.Tag, res.Stage)
			for _, line := range strings.Split(strings.TrimRight(res.Error, "\n\t "), "\n") {
				fmt.Fprintln(stderr, prefix+line)
			}
		}
	}

	if !res.OK {
		return exitRejected
	}

	return exitOK
}

func newFlags(name string) *flag.FlagSet {
	fs := flag.NewFlagSet("talos-machinery "+name, flag.ContinueOnError)
	fs.SetOutput(os.Stderr)

	return fs
}

func parse(fs *flag.FlagSet, args []string) error {
	if err := fs.Parse(args); err != nil {
		return usageError{err}
	}

	if fs.NArg() > 0 {
		return usageError{fmt.Errorf("unexpected argument %q", fs.Arg(0))}
	}

	return nil
}

func readConfig(path string, stdin io.Reader) ([]byte, error) {
	if path == "" {
		return nil, usageError{errors.New("--config FILE is required (- for stdin)")}
	}

	var (
		b   []byte
		err error
	)

	if path == "-" {
		b, err = io.ReadAll(stdin)
	} else {
		b, err = os.ReadFile(path)
	}

	if err != nil {
		return nil, usageError{err}
	}

	return b, nil
}

func patchCmd(args []string, stdin io.Reader) (*result, bool, error) {
	fs := newFlags("patch")
	configPath := fs.String("config", "", "the machine config (- for stdin)")
	modeName := fs.String("mode", "metal", "the node's runtime mode: metal, container or cloud")
	asJSON := fs.Bool("json", false, "print one JSON object on stdout")

	var patches stringList

	fs.Var(&patches, "patch", "a patch as talosctl -p takes it: inline, @file or a file name (repeatable)")

	if err := parse(fs, args); err != nil {
		return nil, false, err
	}

	mode, err := parseMode(*modeName)
	if err != nil {
		return nil, false, usageError{err}
	}

	body, err := readConfig(*configPath, stdin)
	if err != nil {
		return nil, false, err
	}

	// talosctl's side (cmd/talosctl/cmd/talos/patch.go)
	loaded, err := configpatcher.LoadPatches(patches)
	if err != nil {
		return &result{Stage: "patches", Error: err.Error()}, *asJSON, nil
	}

	out, err := configpatcher.Apply(configpatcher.WithBytes(body), loaded)
	if err != nil {
		return &result{Stage: "patch", Error: err.Error()}, *asJSON, nil
	}

	patched, err := out.Bytes()
	if err != nil {
		return &result{Stage: "patch", Error: err.Error()}, *asJSON, nil
	}

	// the node's side (ApplyConfiguration in internal/app/machined/internal/server/v1alpha1)
	res := nodeValidate(patched, runtimeMode{name: mode.name, installed: true})
	res.Config = string(patched)

	return res, *asJSON, nil
}

func nodeValidate(b []byte, mode runtimeMode) *result {
	cfg, err := configloader.NewFromBytes(b)
	if err != nil {
		return &result{Stage: "load", Error: err.Error()}
	}

	if cfg.RawV1Alpha1() == nil {
		return &result{Stage: "apply", Error: "the applied machine configuration doesn't contain v1alpha1 config, " +
			"did you mean to patch the machine config instead?"}
	}

	ctx := context.Background()
	st := state.WrapCore(namespaced.NewState(inmem.Build))

	if v, ok := cfg.(runtimeValidator); ok { // Talos 1.14+
		warnings, err := v.ValidateAtRuntime(ctx, st, mode)

		return &result{Stage: "validate", Error: errString(err), Warnings: warnings}
	}

	warnings, err := cfg.Validate(mode)
	if err != nil {
		return &result{Stage: "validate", Error: err.Error(), Warnings: warnings}
	}

	more, err := cfg.RuntimeValidate(ctx, st, mode)

	return &result{Stage: "validate", Error: errString(err), Warnings: append(warnings, more...)}
}

func validateCmd(args []string, stdin io.Reader) (*result, bool, error) {
	fs := newFlags("validate")
	configPath := fs.String("config", "", "the machine config (- for stdin)")
	modeName := fs.String("mode", "metal", "the runtime mode: metal, container or cloud")
	strict := fs.Bool("strict", false, "treat validation warnings as errors")
	asJSON := fs.Bool("json", false, "print one JSON object on stdout")

	if err := parse(fs, args); err != nil {
		return nil, false, err
	}

	mode, err := parseMode(*modeName)
	if err != nil {
		return nil, false, usageError{err}
	}

	b, err := readConfig(*configPath, stdin)
	if err != nil {
		return nil, false, err
	}

	// as cmd/talosctl/cmd/mgmt/validate.go
	cfg, err := configloader.NewFromBytes(b)
	if err != nil {
		return &result{Stage: "load", Error: err.Error()}, *asJSON, nil
	}

	opts := []validation.Option{validation.WithLocal()}
	if *strict {
		opts = append(opts, validation.WithStrict())
	}

	var warnings []string

	if v, ok := cfg.(clientValidator); ok { // Talos 1.14+
		warnings, err = v.ValidateAsClient(mode, opts...)
	} else {
		warnings, err = cfg.Validate(mode, opts...)
	}

	return &result{Stage: "validate", Error: errString(err), Warnings: warnings}, *asJSON, nil
}

func genCmd(args []string, stderr io.Writer) error {
	fs := newFlags("gen")
	clusterName := fs.String("cluster-name", "", "the cluster name (talosctl gen config's first argument)")
	endpoint := fs.String("endpoint", "", "the cluster endpoint, https://HOST:PORT (talosctl gen config's second argument)")
	kubeVersion := fs.String("kubernetes-version", constants.DefaultKubernetesVersion, "the Kubernetes version")
	outputDir := fs.String("output-dir", ".", "where controlplane.yaml and worker.yaml are written")

	if err := parse(fs, args); err != nil {
		return err
	}

	if *clusterName == "" || *endpoint == "" {
		return usageError{errors.New("--cluster-name and --endpoint are required")}
	}

	if !strings.HasPrefix(*endpoint, "https://") {
		return usageError{fmt.Errorf("the control plane endpoint URL should have scheme https:// (got %q)", *endpoint)}
	}

	// talosctl gen config's default flags (cmd/talosctl/cmd/mgmt/gen/config.go), in its order. Talos <= 1.12
	// also passed generate.WithPersist(true), which is generate's default and gone from 1.13 on.
	genOptions := []generate.Option{
		generate.WithInstallDisk("/dev/sda"),
		generate.WithInstallImage(defaultInstallImage()),
		generate.WithAdditionalSubjectAltNames([]string{}),
		generate.WithDNSDomain("cluster.local"),
		generate.WithClusterDiscovery(true),
	}

	opts := []bundle.Option{
		bundle.WithInputOptions(&bundle.InputOptions{
			ClusterName: *clusterName,
			Endpoint:    *endpoint,
			KubeVersion: strings.TrimPrefix(*kubeVersion, "v"),
			GenOptions:  genOptions,
		}),
	}

	// talosctl passes its (here empty) --config-patch* lists through LoadPatches too
	for _, with := range []func([]configpatcher.Patch) bundle.Option{
		bundle.WithPatch, bundle.WithPatchControlPlane, bundle.WithPatchWorker,
	} {
		patches, err := configpatcher.LoadPatches(nil)
		if err != nil {
			return fmt.Errorf("error parsing config JSON patch: %w", err)
		}

		opts = append(opts, with(patches))
	}

	configBundle, err := bundle.NewBundle(opts...)
	if err != nil {
		return fmt.Errorf("failed to generate config bundle: %w", err)
	}

	// --with-docs and --with-examples default to true
	comments := encoder.CommentsDisabled | encoder.CommentsDocs | encoder.CommentsExamples

	for _, t := range []machine.Type{machine.TypeControlPlane, machine.TypeWorker} {
		data, err := configBundle.Serialize(comments, t)
		if err != nil {
			return err
		}

		path := filepath.Join(*outputDir, t.String()+".yaml")

		if _, err := os.Stat(path); err == nil {
			return usageError{fmt.Errorf("%s already exists", path)}
		}

		if err := os.MkdirAll(*outputDir, 0o755); err != nil {
			return usageError{err}
		}

		if err := os.WriteFile(path, data, 0o644); err != nil {
			return usageError{err}
		}

		fmt.Fprintf(stderr, "Created %s\n", path)
	}

	return nil
}

// defaultInstallImage is talosctl gen config's --install-image default, which talosctl computes outside the
// machinery module (cmd/talosctl/pkg/mgmt/helpers, pkg/images): ghcr.io/siderolabs/installer:<tag> up to
// Talos 1.13, the Image Factory's metal installer with the empty schematic from 1.14.
func defaultInstallImage() string {
	if minor(version.Tag) >= 14 {
		return "factory.talos.dev/metal-installer/376567988ad370138ad8b2698212367b8edcb69b5fd68c80be1f2ec7d603b4ba:" +
			version.Tag
	}

	return "ghcr.io/siderolabs/installer:" + version.Tag
}

func minor(tag string) int {
	parts := strings.Split(strings.TrimPrefix(tag, "v"), ".")
	if len(parts) < 2 {
		return 0
	}

	n, _ := strconv.Atoi(parts[1]) //nolint:errcheck

	return n
}

func errString(err error) string {
	if err == nil {
		return ""
	}

	return err.Error()
}
