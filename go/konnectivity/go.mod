// Marks the module root only: every build passes -modfile=v<X.Y.Z>.mod (go help modfile). konnectivity's server
// and agent are upstream's main packages sigs.k8s.io/apiserver-network-proxy/cmd/{server,agent}, named by the
// .mod's `tool` directive; scripts/gobuild.sh builds both from the module cache (konnectivity-server,
// konnectivity-agent). `go install …@v0.36.0` cannot: upstream's go.mod replaces konnectivity-client with a folder
// the module zip lacks, so the .mod requires the client at the same version instead.
module breakglass.invalid/konnectivity

go 1.24
